"""One registry of image judges: every registered judge creates, answers with the shapes it
declares and validates on the world's exact truth against its bar; unknown names fail in one line."""

import numpy as np
import pytest

from concept_grounding.judge import (
    ImageJudge,
    JudgeReport,
    attribute_judge,
    create_judge,
    judge_of,
    list_judges,
    register_judge,
)
from concept_grounding.world import BirdWorld, WorldConfig

#: three CUB classes for the judges trained here (ConceptBed's, tiny: they need not pass their bar)
CLASSES = ("017.Cardinal", "073.Blue_Jay", "036.Northern_Flicker")
TINY = dict(classes=CLASSES, per_class=4, epochs=1, capacity="small")


@pytest.fixture(scope="module")
def concept_model_folder(tmp_path_factory):
    from concept_grounding.models import train_cem
    from concept_grounding.models.data import to_tensors, toy_concept_dataset

    ds = toy_concept_dataset(n_per_class=4, image_size=16)
    concepts = [i for i, v in enumerate(np.asarray(ds["attributes"]).any(axis=0)) if v]
    folder = tmp_path_factory.mktemp("concept_model") / "m"
    train_cem(to_tensors(ds, concepts, image_size=16), epochs=1, progress=False).save_pretrained(folder)
    return folder


def _kwargs(name: str, concept_model_folder) -> dict:
    if name.startswith("conceptbed-"):
        return TINY
    if name == "concept-model":
        return {"path": concept_model_folder, "image_size": 16}
    return {}


def _validation_world(judge) -> BirdWorld | None:
    """The shipped world judge on its first three species (same order, so labels agree); else the default."""
    if judge.name == "world-judge":
        return BirdWorld(
            WorldConfig(image_size=judge.image_size, class_names=judge.class_names[:3], pose="canonical", scene="plain")
        )
    return None


def test_the_package_s_judges_are_registered():
    assert list_judges() == [
        "composition-judge",
        "concept-model",
        "conceptbed-attributes",
        "conceptbed-species",
        "conceptbed-style",
        "world-judge",
    ]


@pytest.mark.parametrize("name", list_judges())
def test_every_registered_judge_answers_in_its_declared_shapes_and_validates(name, concept_model_folder):
    judge = create_judge(name, **_kwargs(name, concept_model_folder))
    assert isinstance(judge, ImageJudge) and judge.name == name
    size = getattr(judge, "image_size", 32) if name != "concept-model" else 32
    images = np.stack([s.image for s in BirdWorld(WorldConfig(image_size=size)).samples(range(3))])
    probs = judge.probabilities(images)
    assert {k: v.shape for k, v in probs.items()} == {k: (3, n) for k, n in judge.head_sizes.items()}
    assert all(np.all((p >= 0) & (p <= 1)) for p in probs.values())
    report = judge.validate(_validation_world(judge), per_class=1)
    assert isinstance(report, JudgeReport) and report.judge == name and report.bar == judge.bar == 0.95
    assert report.accuracy and all(0 <= v <= 1 for v in report.accuracy.values()) and report.images > 0
    assert report.passed == all(v >= report.bar for v in report.accuracy.values())
    if name in ("world", "composition"):  # the shipped judges meet their bars on exact truth
        assert report.passed, str(report)


def test_an_unknown_name_fails_in_one_line_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown name") as err:
        create_judge("wrold")
    message = str(err.value)
    assert "\n" not in message and message.startswith("judge: unknown name 'wrold'; known: ")
    assert all(name in message for name in list_judges())


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="'world-judge' is already registered"):
        register_judge("world-judge")(lambda: None)


def test_the_report_is_a_small_typed_record():
    report = JudgeReport("toy", {"count": 0.99, "scene": 0.9}, 0.95, images=20)
    assert not report.passed and report.failing == ("scene",)
    assert report.to_dict() == {
        "judge": "toy",
        "accuracy": {"count": 0.99, "scene": 0.9},
        "bar": 0.95,
        "images": 20,
        "passed": False,
    }
    assert str(report) == "toy judge: count 99.0 %, scene 90.0 % (bar 95 %): FAILS"


def test_a_folder_resolves_to_its_judge_and_the_filter_reads_its_attributes(concept_model_folder, tmp_path):
    from PIL import Image

    assert judge_of(str(concept_model_folder), image_size=16).name == "concept-model"
    create_judge("world-judge").save_pretrained(tmp_path / "world")
    assert judge_of(str(tmp_path / "world")).name == "world-judge"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text('{"layers": 2}')
    with pytest.raises(ValueError, match="holds no saved judge or concept model"):
        judge_of(str(tmp_path / "other"))
    probs = attribute_judge("world-judge")(
        [Image.new("RGB", (64, 64), (200, 30, 30))] * 2
    )  # resized to the judge's side
    assert probs.shape == (2, 312)
    with pytest.raises(ValueError, match="'composition-judge' has no attributes head"):
        attribute_judge("composition-judge")


def test_the_filter_takes_a_judge_by_name_and_refuses_an_unknown_one_in_one_line(tmp_path):
    from concept_grounding.errors import UsageError
    from concept_grounding.judge import attribute_judge
    from concept_grounding.tdg.filter_job import FilterConfig, build_scorer
    from concept_grounding.tdg.filter_scorers import AttributeJudgeScorer

    config = FilterConfig(
        input=tmp_path, out=tmp_path, scorer="oracle", oracle="world-judge", judge_loader=attribute_judge
    )
    assert isinstance(build_scorer(config), AttributeJudgeScorer)
    assert isinstance(
        build_scorer(FilterConfig(input=tmp_path, out=tmp_path, scorer="world-judge", judge_loader=attribute_judge)),
        AttributeJudgeScorer,
    )
    with pytest.raises(UsageError, match=r"oracle: judge: 'wrold' is neither a registered judge"):
        build_scorer(
            FilterConfig(input=tmp_path, out=tmp_path, scorer="oracle", oracle="wrold", judge_loader=attribute_judge)
        )
