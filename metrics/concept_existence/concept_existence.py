"""Concept existence metric (Aysel et al., 2025): do a model's most important concepts exist in the image?"""

from typing import ClassVar, Literal

import evaluate

from concept_grounding.metrics import concept_existence
from concept_grounding.metrics.examples import EXAMPLES
from concept_grounding.metrics.module_inputs import CheckedInputs, InputField

_DESCRIPTION = """\
Concept existence (the "CEM" of Aysel et al., 2025, Eq. 9): for each test image predicted as
class k, rank the L concepts by their local importance theta[j, k] * u[i, j] (or theta alone, or
u alone) and score the fraction of the top-l concepts that are in the image's ground-truth
concept set. Reported for l = 1, 3, 5 on the whole set and on the correctly classified images.
Higher is better; scores lie in [0, 1]. Ties in importance go to the lower concept index.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted class of each image.
    references (`list` of `int`): true class of each image (for the correctly classified subset).
    concept_scores (`list` of `list` of `float`): concept vector u of each image, length L.
    concept_labels (`list` of `list` of `int`): 0/1 ground-truth concepts of each image, length L.
    theta (`array`, L x K): concept-to-class weights of the classifier h(u) = theta^T u + b.
    top_l (`tuple` of `int`, defaults to (1, 3, 5)): the l values.
    ranking (`str`, defaults to "theta_u"): "theta_u", "theta" or "u".
    by_magnitude (`bool`, defaults to False): rank |importance| instead of the signed value.
Returns:
    `existence@l` and `existence@l_correct` for every l, `num_correct`, `per_image`
    (N x len(top_l)) and `top_concepts` (N x max(top_l)).
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("concept_existence")
    >>> theta = [[2.0, 0.0], [1.0, 1.0], [0.0, 3.0]]          # 3 concepts, 2 classes
    >>> out = metric.compute(predictions=[0, 1], references=[0, 0],
    ...                      concept_scores=[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
    ...                      concept_labels=[[1, 0, 0], [1, 0, 0]], theta=theta, top_l=(1, 2))
    >>> out["existence@1"], out["existence@2"], out["existence@1_correct"]
    (0.5, 0.25, 1.0)
"""

_CITATION = """\
@inproceedings{aysel2025concept,
  title     = {Concept-Based Explainable Artificial Intelligence: Metrics and Benchmarks},
  author    = {Aysel, Halil Ibrahim and Cai, Xiaohao and Prugel-Bennett, Adam},
  year      = {2025}
}
"""


#: The card's example, what the metric Space's page computes first: the package's one copy.
WIDGET_EXAMPLE = EXAMPLES["concept_existence"]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ConceptExistence(CheckedInputs, evaluate.Metric):
    """Thin shell over :func:`concept_grounding.metrics.concept_existence`."""

    score_direction: ClassVar[Literal["higher", "lower"]] = "higher"
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    category: ClassVar[str] = "concept faithfulness (local)"

    def _input_fields(self) -> dict[str, InputField]:
        return {
            "predictions": InputField("label"),
            "references": InputField("label"),
            "concept_scores": InputField("value", row_ndim=1),
            "concept_labels": InputField("flag", row_ndim=1),
        }

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            reference_urls=["https://arxiv.org/abs/2501.19271"],
        )

    def _compute(
        self,
        predictions,
        references,
        concept_scores,
        concept_labels,
        theta=None,
        top_l=(1, 3, 5),
        ranking="theta_u",
        by_magnitude=False,
    ):
        if theta is None:
            raise ValueError("theta (the L x K concept-to-class weights) is required")
        c = self._checked(
            predictions=predictions, references=references, concept_scores=concept_scores, concept_labels=concept_labels
        )
        return concept_existence(
            theta,
            c["concept_scores"],
            c["predictions"],
            c["concept_labels"],
            c["references"],
            top_l=tuple(top_l),
            ranking=ranking,
            by_magnitude=by_magnitude,
        )
