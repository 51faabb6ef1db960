"""Concept location metric (CLM, Aysel et al., 2025): do a model's important concepts light up the right body part?"""

from typing import ClassVar, Literal

import evaluate

from concept_grounding.metrics import concept_location
from concept_grounding.metrics.examples import EXAMPLES
from concept_grounding.metrics.module_inputs import CheckedInputs, InputField

_DESCRIPTION = """\
CLM (Aysel et al., 2025, Eq. 11): for the top-l concepts of each image (ranked by theta[j, k] *
u[i, j] as in concept existence), upsample the concept activation map bilinearly to the image
size M1 x M2, take its alpha * M1 * M2 / 12 highest pixels, and score the fraction of concepts
whose body-part centre lies inside. Concepts with no part, or with no visible part, are skipped
and counted; a concept on paired parts (eyes, legs, wings) hits if either visible centre does.
Pixels tied with the centre's value count as inside. Reported for alpha = 1, 3, 6 and
l = 1, 3, 5. Higher is better; scores lie in [0, 1].
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted class of each image.
    references (`list` of `int`): true class (for the correctly classified subset).
    concept_scores (`list` of `list` of `float`): concept vector u of each image, length L.
    concept_maps (`list` of L x H x W `float`): concept activation maps of each image.
    part_xy (`list` of P x 2 `float`): part centres (x, y) in image pixels.
    part_visible (`list` of P `bool`): part visibility.
    theta (`array`, L x K): concept-to-class weights.
    concept_names (`list` of `str`): CUB attribute names of the L concepts (parts come from the
        vocabulary), or concept_parts (`list` of part-index lists), one per concept.
    image_size (`tuple`, defaults to the map size): (M1, M2) = (height, width).
    alphas (defaults to (1, 3, 6)), top_l (defaults to (1, 3, 5)), ranking, by_magnitude,
    rank_within_part_concepts, return_ranks: see `concept_grounding.metrics.concept_location`.
Returns:
    `location@{l}_alpha{alpha}` (and `..._correct`), `top_concepts`, `evaluated`, `hits`,
    `centre_rank` (with return_ranks=True), `region_sizes`, `skipped_no_part`, `skipped_invisible`,
    `images_without_evaluated`.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("concept_location")
    >>> peak_top_left = [[1.0, 0.0], [0.0, 0.0]]
    >>> out = metric.compute(predictions=[0], references=[0], concept_scores=[[2.0, 1.0]],
    ...                      concept_maps=[[peak_top_left, peak_top_left]],
    ...                      part_xy=[[[0.0, 0.0], [3.0, 3.0]]], part_visible=[[True, True]],
    ...                      theta=[[1.0], [1.0]], concept_parts=[[0], [1]], image_size=(4, 4),
    ...                      alphas=(1,), top_l=(1, 2))
    >>> out["location@1_alpha1"], out["location@2_alpha1"]
    (1.0, 0.5)
"""

_CITATION = """\
@inproceedings{aysel2025concept,
  title     = {Concept-Based Explainable Artificial Intelligence: Metrics and Benchmarks},
  author    = {Aysel, Halil Ibrahim and Cai, Xiaohao and Prugel-Bennett, Adam},
  year      = {2025}
}
"""


#: The card's example, what the metric Space's page computes first: the package's one copy.
WIDGET_EXAMPLE = EXAMPLES["concept_location"]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ConceptLocation(CheckedInputs, evaluate.Metric):
    """Thin shell over :func:`concept_grounding.metrics.concept_location`."""

    score_direction: ClassVar[Literal["higher", "lower"]] = "higher"
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    category: ClassVar[str] = "concept localisation"

    def _input_fields(self) -> dict[str, InputField]:
        return {
            "predictions": InputField("label"),
            "references": InputField("label"),
            "concept_scores": InputField("value", row_ndim=1),
            "concept_maps": InputField("value", row_ndim=3, dtype="float32"),
            "part_xy": InputField("value", row_ndim=2, dtype="float32"),
            "part_visible": InputField("flag", row_ndim=1),
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
        concept_maps,
        part_xy,
        part_visible,
        theta=None,
        concept_names=None,
        concept_parts=None,
        image_size=None,
        alphas=(1, 3, 6),
        top_l=(1, 3, 5),
        ranking="theta_u",
        by_magnitude=False,
        rank_within_part_concepts=False,
        return_ranks=False,
    ):
        if theta is None:
            raise ValueError("theta (the L x K concept-to-class weights) is required")
        c = self._checked(
            predictions=predictions,
            references=references,
            concept_scores=concept_scores,
            concept_maps=concept_maps,
            part_xy=part_xy,
            part_visible=part_visible,
        )
        return concept_location(
            c["concept_maps"],
            c["part_xy"],
            c["part_visible"],
            theta=theta,
            concept_scores=c["concept_scores"],
            predictions=c["predictions"],
            references=c["references"],
            concept_names=concept_names,
            concept_parts=concept_parts,
            image_size=image_size,
            alphas=tuple(alphas),
            top_l=tuple(top_l),
            ranking=ranking,
            by_magnitude=by_magnitude,
            rank_within_part_concepts=rank_within_part_concepts,
            return_ranks=return_ranks,
        )
