"""SUB accuracy (Bader et al., 2025): does a concept model see a substituted attribute, and stop seeing the
removed one?"""

from typing import ClassVar, Literal

import evaluate

from concept_grounding.metrics import sub_accuracy
from concept_grounding.metrics.examples import CONFIG_EXAMPLES, EXAMPLES
from concept_grounding.metrics.module_inputs import CheckedInputs, InputField

_DESCRIPTION = """\
SUB accuracy (Bader et al., 2025, Sec. 5.5-5.6, App. F) on synthetic attribute substitutions.
Config "binary" (CBMs, CEMs, probes): predictions are concept probabilities; s+ = fraction of
images with P(S+) > 0.5, s- = fraction of (image, removed attribute) pairs with P(S-) <= 0.5;
attributes the model does not know are skipped and counted; chance is 50 %.
Configs "group" / "group_with_none" (CLIP-like): predictions are image-text similarities; the
argmax within S+'s attribute group (plus "none" when a none_scores column is given) is the
prediction; s+ = argmax is S+, s- = argmax is not S-. Chance: 1 / (|A| + 1) and
1 - 1 / (|A| + 1) with the "none" option (App. F), 1 / |A| without.
Breakdowns per target attribute, attribute group and reference class. Higher is better.

protocol="paper" (default) follows the paper's text as above; protocol="official" reproduces
SUB's published evaluation code (github.com/ExplainableML/sub, CBM_testing/):

    rule                 "paper"                              "official"
    s+ hit (binary)      P(S+) > 0.5                          P(S+) >= 0.5  (sigmoid(logit) >= 0.5)
    s- hit (binary)      P(S-) <= 0.5                         P(S-) < 0.5
    which S- count       every (image, S-) pair whose S- is   one per image: its S- in the lowest
                         a column                             column (the first class-level positive
                                                              attribute of the group in the model's
                                                              list); images with none are dropped
    images for s-        binary: all; group: S+ is a column   only images whose S+ counts for s+
    group options        the group, plus "none" with          the group only; none_scores rejected
                         none_scores ("group_with_none")
    group S+ / S-        any column                           CBM-112 attributes only (the notebook
                                                              skips images whose S+ is not in CBM-112)
    chance               App. F                               0.5 (binary); 1/|A|, 1 - 1/|A| (group)
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `float`): concept probabilities / similarities per image,
        one per entry of concept_names.
    target_attributes (`list` of `str`): S+ attribute name of each image.
    removed_attributes (`list` of `list` of `str`): S- attribute names of each image.
    reference_classes (`list` of `str`): reference class of each image.
    none_scores (`list` of `float`, "group_with_none" only): similarity of the "none" option.
    concept_names (`list` of `str`): CUB attribute names of the prediction columns.
    protocol (`str`, defaults to "paper"): "paper" or "official" (see the description).
Returns:
    `s_plus`, `s_minus`, `chance_s_plus`, `chance_s_minus`, `n_s_plus`, `n_s_minus`,
    `skipped_target`, `skipped_removed` and `breakdown` (per attribute, group, class).
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("sub_accuracy")
    >>> names = ["has_bill_shape::dagger", "has_bill_shape::needle"]
    >>> out = metric.compute(predictions=[[0.2, 0.9], [0.7, 0.4]],
    ...                      target_attributes=["has_bill_shape::needle"] * 2,
    ...                      removed_attributes=[["has_bill_shape::dagger"]] * 2,
    ...                      reference_classes=["017.Cardinal", "073.Blue_Jay"], concept_names=names)
    >>> out["s_plus"], out["s_minus"], out["chance_s_plus"]
    (0.5, 0.5, 0.5)
    >>> clip = evaluate.load("sub_accuracy", "group_with_none")
    >>> out = clip.compute(predictions=[[0.1, 0.3], [0.3, 0.1]], none_scores=[0.2, 0.2],
    ...                    target_attributes=["has_bill_shape::needle"] * 2,
    ...                    removed_attributes=[["has_bill_shape::dagger"]] * 2,
    ...                    reference_classes=["017.Cardinal", "073.Blue_Jay"], concept_names=names)
    >>> out["s_plus"], out["s_minus"], round(out["chance_s_plus"], 4)
    (0.5, 0.5, 0.3333)
    >>> official = evaluate.load("sub_accuracy")
    >>> out = official.compute(predictions=[[0.2, 0.5], [0.5, 0.4]],
    ...                        target_attributes=["has_bill_shape::needle"] * 2,
    ...                        removed_attributes=[["has_bill_shape::dagger"]] * 2,
    ...                        reference_classes=["017.Cardinal", "073.Blue_Jay"], concept_names=names,
    ...                        protocol="official")
    >>> out["s_plus"], out["s_minus"]   # "paper" gives (0.0, 1.0): 0.5 is not > 0.5 but is <= 0.5
    (0.5, 0.5)
"""

_CITATION = """\
@inproceedings{bader2025sub,
  title     = {SUB: Benchmarking CBM Generalization via Synthetic Attribute Substitutions},
  author    = {Bader, Jessica and Girrbach, Leander and Alaniz, Stephan and Akata, Zeynep},
  year      = {2025},
  url       = {https://github.com/ExplainableML/sub}
}
"""

_CONFIGS = ("binary", "group", "group_with_none")


#: The card's example, what the metric Space's page computes first: the package's one copy.
WIDGET_EXAMPLE = EXAMPLES["sub_accuracy"]
#: Every config the card describes and its example: one tab each on the metric Space.
WIDGET_EXAMPLES = CONFIG_EXAMPLES["sub_accuracy"]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SubAccuracy(CheckedInputs, evaluate.Metric):
    """Thin shell over :func:`concept_grounding.metrics.sub_accuracy`."""

    score_direction: ClassVar[Literal["higher", "lower"]] = "higher"
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    category: ClassVar[str] = "concept robustness (counterfactual)"

    def _input_fields(self) -> dict[str, InputField]:
        binary = self.config_name in ("default", "binary")
        fields = {
            "predictions": InputField("probability" if binary else "value", row_ndim=1),
            "target_attributes": InputField("name"),
            "removed_attributes": InputField("names"),
            "reference_classes": InputField("name"),
        }
        if self.config_name == "group_with_none":
            fields["none_scores"] = InputField("value")
        return fields

    def _info(self) -> evaluate.MetricInfo:
        if self.config_name not in ("default",) + _CONFIGS:
            raise ValueError(f"config_name must be one of {_CONFIGS}, got {self.config_name!r}")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            reference_urls=[
                "https://github.com/ExplainableML/sub",
                "https://huggingface.co/datasets/Jessica-bader/SUB",
            ],
        )

    def _compute(
        self,
        predictions,
        target_attributes,
        removed_attributes,
        reference_classes,
        none_scores=None,
        concept_names=None,
        protocol="paper",
    ):
        if concept_names is None:
            raise ValueError("concept_names (the CUB attribute name of every prediction column) is required")
        if none_scores is not None and self.config_name != "group_with_none":
            raise ValueError(
                f"none_scores is only used by the 'group_with_none' config (this is "
                f"{self.config_name!r}): load sub_accuracy with 'group_with_none', or leave it out"
            )
        mode = "binary" if self.config_name in ("default", "binary") else "group"
        columns = dict(
            predictions=predictions,
            target_attributes=target_attributes,
            removed_attributes=removed_attributes,
            reference_classes=reference_classes,
        )
        if self.config_name == "group_with_none":
            columns["none_scores"] = none_scores
        c = self._checked(**columns)
        return sub_accuracy(
            c["predictions"],
            c["target_attributes"],
            c["removed_attributes"],
            concept_names=concept_names,
            reference_classes=c["reference_classes"],
            mode=mode,
            protocol=protocol,
            none_scores=c.get("none_scores"),
        )
