"""The ``conceptbed`` settings (:class:`ConceptBedConfig`, every flag declared once) and what they imply: the
learners and tasks a run scores (ConceptBed, Patel et al., Sec. 4; docs/guide/conceptbed.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..judge.conceptbed_spec import CAPACITIES
from ..loaders.conceptbed import TASKS
from ..settings import setting
from ..validators import choice_of, int_at_least, positive_int
from .learners import FLUX_LEARNERS

__all__ = ["ConceptBedConfig", "COMPOSITION", "DEFAULT_LEARNERS", "QUICK_STEPS", "concept_tasks"]

DEFAULT_LEARNERS = (*FLUX_LEARNERS, "Original")
#: The task of Table 2 (compositional reasoning over the object concepts).
COMPOSITION = "composition"
#: ``--quick``'s learner steps. By 30 steps LoRA leaves its step-0 CCD, DreamBooth by 100, Textual Inversion and
#: Custom Diffusion not within 300 (docs/conceptbed/convergence.md); 100 would pass ``--quick``'s 10 minutes
QUICK_STEPS = 30


@dataclass(frozen=True)
class ConceptBedConfig:
    """Settings of a ConceptBed run (``--quick``: 2 concepts per task, 8 real and 4 generated
    images each, :data:`QUICK_STEPS` learner steps)."""

    learners: tuple[str, ...] | None = setting(
        None,
        "learners to evaluate (the four diffusers learners, 'Original', and the references 'another species', "
        "'exact'; default: the four and 'Original', or only 'Original' beside --generated / --learned; may be empty "
        "with those)",
        nargs="*",
        convert=tuple,
    )
    tasks: tuple[str, ...] | None = setting(
        None,
        "tasks (Table 1's columns; 'composition': Table 2, the object concepts "
        "composed with relations, actions, attributes and counts; default: every task of Table 1, "
        "or the tasks --concept-folder holds)",
        nargs="+",
        choices=(*TASKS, COMPOSITION),
        convert=tuple,
    )
    concepts: int = setting(4, "concepts per task", parse=positive_int)
    m: int = setting(8, "training images per concept", parse=positive_int)
    real: int = setting(
        16,
        "held-out real images per concept (--concept-folder: at most this many, as many more train its oracle)",
        parse=positive_int,
    )
    images: int = setting(16, "generated images per concept (N)", parse=positive_int)
    oracle_per_class: int = setting(40, "oracle training renders per species", parse=int_at_least(2))
    oracle_epochs: int = setting(8, "oracle training epochs", parse=positive_int)
    capacity: str = setting("medium", "oracle capacity of Tables 1 and 7", parse=choice_of(CAPACITIES, "capacity"))
    table8: tuple[str, ...] = setting(
        tuple(CAPACITIES),
        "oracle capacities of Table 8",
        nargs="*",
        parse=choice_of(CAPACITIES, "capacity"),
        convert=tuple,
    )
    encoder: str = setting(
        "world-clip",
        "image encoder of the DINO-style baseline ('world-clip': the shipped "
        "world CLIP's image tower; or a CLIP name or folder)",
    )
    model: str | None = setting(None, "diffusers Flux folder the learners fine-tune (default: the shipped world Flux)")
    steps: int = setting(400, "learner training steps", parse=positive_int, flag="--learn-steps")
    device: str = setting("cpu", "learners' device")
    quick: bool = setting(False, "a small run (a few minutes on two cores)", action="store_true")
    seed: int = setting(0, "world, oracle and generation seed", parse=int)
    cache: str | None = setting(None, "oracle cache folder (default: OUT/oracles)")
    concept_folder: str | None = setting(
        None,
        "a concept folder (ours, or ConceptBed's published imagenet/pacs/cub "
        "layout) instead of the world's concepts; its oracles train on it",
    )
    image_size: int = setting(
        32, "generation and oracle side for --concept-folder images (the world Flux's 32 px)", parse=positive_int
    )
    ratings: str | None = setting(
        None,
        "people's ratings of OUT/ratings (the Parquet `annotate --items OUT/ratings "
        "--export` writes) for Table 3 (default: simulated raters, said so)",
    )
    export_concepts: str | None = setting(
        None,
        "write each task's concepts for training elsewhere (DIR/<task>/<concept>/train/*.png and concept.json) "
        "and stop: nothing is trained",
        metavar="DIR",
    )
    generated: str | None = setting(
        None,
        "score images made by any method, DIR/<task>/<concept>/*.png (the first --images of each, sorted), as "
        "the row --name of every table",
        metavar="DIR",
    )
    learned: str | None = setting(
        None,
        "load each concept's diffusers weights, DIR/<task>/<concept>/ (pytorch_lora_weights.safetensors, "
        "*_emb.safetensors, learned_embeds.safetensors or a pipeline folder), into --model; generate and score "
        "them as the row --name",
        metavar="DIR",
    )
    name: str | None = setting(None, "the table row of --generated or --learned (a name no learner has)")
    keep_generated: bool = setting(
        True,
        "do not keep the generated images (kept as OUT/generated/<learner>/<task>/<concept>/*.png, the layout "
        "--generated reads)",
        flag="--no-keep-generated",
        action="store_false",
    )
    work: str | None = None
    classes: tuple[str, ...] | None = None

    def effective(self) -> ConceptBedConfig:
        """The config with the default learners and tasks resolved and ``--quick``'s sizes applied."""
        if self.tasks is None:
            from .folder import folder_tasks

            return replace(self, tasks=folder_tasks(self.concept_folder) if self.concept_folder else TASKS).effective()
        if self.learners is None:
            brought = self.generated or self.learned
            return replace(self, learners=("Original",) if brought else DEFAULT_LEARNERS).effective()
        if not self.quick:
            return self
        return replace(
            self,
            concepts=min(self.concepts, 2),
            real=min(self.real, 8),
            images=min(self.images, 4),
            steps=min(self.steps, QUICK_STEPS),
        )


def concept_tasks(config: ConceptBedConfig) -> list[str]:
    """The concept tasks a run learns concepts of (compositions compose the object concepts)."""
    tasks = [t for t in config.tasks if t != COMPOSITION]
    return tasks + ["object"] if COMPOSITION in config.tasks and "object" not in tasks else tasks
