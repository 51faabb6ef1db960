"""Concept Confidence Deviation (CCD, ConceptBed, Patel et al., 2023): does an oracle trust generated images
as much as real ones?"""

from typing import ClassVar, Literal

import evaluate

from concept_grounding.metrics import concept_confidence_deviation
from concept_grounding.metrics.examples import CONFIG_EXAMPLES, EXAMPLES
from concept_grounding.metrics.module_inputs import CheckedInputs, InputField

_DESCRIPTION = """\
CCD (ConceptBed, Patel et al., 2023, Eq. 3):
    CCD = - E_c [ E_{x_gen of c} f(y_c | x_gen) - E_{x_real of c} f(y_c | x_real) ]
with f an oracle's probability for the concept's label. 0: the oracle is as confident on the
generated images as on the real ones; positive: they deviate. Lower is better.
Configurations: "classifier" (default; predictions are oracle softmax rows) and "vqa"
(predictions are VQA probabilities of "yes" to existence questions, references the question
group). `reduction="pooled"` compares the mean over all generated images with the mean over
all real images, as the ConceptBed reference code (`DeltaNew`) does. Accuracy, MSP and ECE on the generated
images come alongside.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: oracle softmax row (`list` of `float`, "classifier") or P(yes) (`float`, "vqa")
        of each GENERATED image.
    references (`list` of `int`): concept id of each generated image.
    real_probabilities (`array`): the same oracle outputs on REAL images of the concepts.
    real_labels (`array` of `int`): concept id of each real image.
    reduction (`str`, defaults to "per_concept"): "per_concept" (Eq. 3) or "pooled".
    n_bins (`int`, defaults to 15): ECE bins.
Returns:
    `ccd`, `per_concept_ccd`, `concepts`, `generated_mean`, `real_mean`, `real_pooled_mean`,
    `accuracy`, `msp`, `ece` (generated images) and `real_accuracy`.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("concept_confidence_deviation")
    >>> out = metric.compute(predictions=[[0.9, 0.1], [0.7, 0.3], [0.2, 0.8]], references=[0, 0, 1],
    ...                      real_probabilities=[[0.9, 0.1], [0.1, 0.9]], real_labels=[0, 1])
    >>> round(out["ccd"], 4), round(out["msp"], 4)
    (0.1, 0.8)
    >>> vqa = evaluate.load("concept_confidence_deviation", "vqa")
    >>> round(vqa.compute(predictions=[0.9, 0.3, 0.6], references=[0, 0, 1],
    ...                   real_probabilities=[0.8, 0.7], real_labels=[0, 1])["ccd"], 4)
    0.15
"""

_CITATION = """\
@inproceedings{patel2024conceptbed,
  title     = {ConceptBed: Evaluating Concept Learning Abilities of Text-to-Image Diffusion Models},
  author    = {Patel, Maitreya and Gokhale, Tejas and Baral, Chitta and Yang, Yezhou},
  year      = {2023},
  url       = {https://conceptbed.github.io}
}
"""


#: The card's example, what the metric Space's page computes first: the package's one copy.
WIDGET_EXAMPLE = EXAMPLES["concept_confidence_deviation"]
#: Every config the card describes and its example: one tab each on the metric Space.
WIDGET_EXAMPLES = CONFIG_EXAMPLES["concept_confidence_deviation"]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ConceptConfidenceDeviation(CheckedInputs, evaluate.Metric):
    """Thin shell over :func:`concept_grounding.metrics.concept_confidence_deviation`."""

    score_direction: ClassVar[Literal["higher", "lower"]] = "lower"
    score_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    category: ClassVar[str] = "generation fidelity (oracle confidence)"

    def _input_fields(self) -> dict[str, InputField]:
        vqa = self.config_name == "vqa"
        return {"predictions": InputField("probability", row_ndim=0 if vqa else 1), "references": InputField("label")}

    def _info(self) -> evaluate.MetricInfo:
        if self.config_name not in ("default", "classifier", "vqa"):
            raise ValueError(f"config_name must be 'classifier' or 'vqa', got {self.config_name!r}")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            reference_urls=["https://conceptbed.github.io"],
        )

    def _compute(
        self, predictions, references, real_probabilities=None, real_labels=None, reduction="per_concept", n_bins=15
    ):
        if real_probabilities is None or real_labels is None:
            raise ValueError("real_probabilities and real_labels are required")
        mode = "vqa" if self.config_name == "vqa" else "classifier"
        c = self._checked(predictions=predictions, references=references)
        return concept_confidence_deviation(
            c["predictions"],
            c["references"],
            real_probabilities,
            real_labels,
            mode=mode,
            reduction=reduction,
            n_bins=n_bins,
        )
