"""Concept global importance metric (CGIM, Aysel et al., 2025): do the classifier's concept weights agree with the
class-level ground truth?"""

from typing import ClassVar, Literal

import evaluate

from concept_grounding.metrics import concept_global_importance
from concept_grounding.metrics.examples import EXAMPLES
from concept_grounding.metrics.module_inputs import CheckedInputs, InputField

_DESCRIPTION = """\
CGIM (Aysel et al., 2025, Eqs. 3-8): the cosine similarity, per concept (rows) and per class
(columns), between the class-level ground truth V (L x K) and
  type 1: the classifier weights theta (L x K);
  type 2: U*, the mean concept vector of the correctly classified test images of each class;
  type 3: theta * U* (element-wise).
Scores lie in [-1, 1]; higher is better. A class without a correctly classified image has
NaN type 2/3 scores and is left out of the per-concept vectors; means ignore NaN.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted class of each test image.
    references (`list` of `int`): true class of each test image.
    concept_scores (`list` of `list` of `float`): concept vector u of each image, length L.
    theta (`array`, L x K): concept-to-class weights.
    class_attributes (`array`, L x K): class-level ground truth V.
Returns:
    `per_concept_type{1,2,3}` (L,), `per_class_type{1,2,3}` (K,), their means
    `concept_type{t}` / `class_type{t}`, `histogram_edges` (21,), `histogram_counts`
    (2 levels x 3 types x 20 bins) and `classes_without_correct`.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("concept_global_importance")
    >>> out = metric.compute(predictions=[0, 1], references=[0, 1],
    ...                      concept_scores=[[1.0, 0.0], [0.0, 2.0]],
    ...                      theta=[[1.0, -1.0], [0.0, 1.0]], class_attributes=[[1, 0], [0, 1]])
    >>> [round(x, 3) for x in out["per_concept_type1"]], out["concept_type2"], out["class_type3"]
    ([0.707, 1.0], 1.0, 1.0)
"""

_CITATION = """\
@inproceedings{aysel2025concept,
  title     = {Concept-Based Explainable Artificial Intelligence: Metrics and Benchmarks},
  author    = {Aysel, Halil Ibrahim and Cai, Xiaohao and Prugel-Bennett, Adam},
  year      = {2025}
}
"""


#: The card's example, what the metric Space's page computes first: the package's one copy.
WIDGET_EXAMPLE = EXAMPLES["concept_global_importance"]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ConceptGlobalImportance(CheckedInputs, evaluate.Metric):
    """Thin shell over :func:`concept_grounding.metrics.concept_global_importance`."""

    score_direction: ClassVar[Literal["higher", "lower"]] = "higher"
    score_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    category: ClassVar[str] = "concept faithfulness (global)"

    def _input_fields(self) -> dict[str, InputField]:
        return {
            "predictions": InputField("label"),
            "references": InputField("label"),
            "concept_scores": InputField("value", row_ndim=1),
        }

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            reference_urls=["https://arxiv.org/abs/2501.19271"],
        )

    def _compute(self, predictions, references, concept_scores, theta=None, class_attributes=None):
        if theta is None or class_attributes is None:
            raise ValueError("theta and class_attributes (both L x K) are required")
        c = self._checked(predictions=predictions, references=references, concept_scores=concept_scores)
        return concept_global_importance(
            theta, class_attributes, c["concept_scores"], c["predictions"], c["references"]
        )
