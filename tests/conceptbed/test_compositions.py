"""ConceptBed's compositions on the world: prompts, questions, exact drawings, Table 2's arithmetic."""

import numpy as np
import pytest

from concept_grounding.conceptbed.compositions import (
    CompositionScores,
    VQAJudge,
    concept_prompts,
    questions,
    questions_of,
    real_images,
    table2,
)
from concept_grounding.world import BirdWorld, WorldConfig
from concept_grounding.world.composition import RELATIONS


@pytest.fixture(scope="module")
def world():
    return BirdWorld(
        WorldConfig(
            image_size=32, pose="canonical", scene="plain", class_names=("001.Black_footed_Albatross", "073.Blue_Jay")
        )
    )


def test_every_prompt_has_its_categorys_questions(world):
    kinds = {"relation": ["scene"], "action": ["facing"], "attribute": ["attribute"], "counting": ["count"]}
    for category, prompt, attribute in concept_prompts(world, 0):
        qs = questions(prompt)
        assert qs[0].kind == "concept" and qs[0].text == "is there a V*?"
        asked = [q.kind for q in qs[1:]]
        assert asked == kinds[category] if category != "composite" else len(asked) == 2, (prompt, asked)
        assert (attribute is not None) == (category == "attribute")
        if attribute is not None:  # an attribute the species lacks at class level
            assert not world.class_attributes[0][world.vocab.attribute_index(attribute)]


def test_real_images_draw_exactly_what_is_asked(world):
    from concept_grounding.world.composition import ACTIONS

    scene = {v: k for k, v in RELATIONS.items()}
    for _, prompt, attribute in concept_prompts(world, 1):
        images = real_images(world, 1, prompt, attribute, 2)
        assert images.shape == (2, 32, 32, 3)
        q = {x.kind: x.value for x in questions(prompt)}
        if attribute is not None:  # the first exact edits of the species' samples
            edits = [world.edited(1 + 2 * k, attribute)[0] for k in range(10)]
            first = next(e for e in edits if e is not None)
            assert (images[0] == first.image).all()
            assert first.attributes[world.vocab.attribute_index(attribute)] == 1
        if "scene" in q:
            assert q["scene"] in scene.values() and q["scene"] in RELATIONS
        if "facing" in q:
            assert ACTIONS[q["facing"]] in prompt
    # the drawing is the world's composition with the asked truth
    from dataclasses import replace

    varied = BirdWorld(replace(world.config, pose="varied", scene="varied"))
    img = real_images(world, 0, "a photo of two V* in the sky", None, 1)[0]
    i = next(i for i in range(0, 400, 2) if varied.pose(i).background_name == "sky")
    assert (img == varied.composition(i, 2).image).all()


def test_table2_arithmetic_known_answers():
    def scores(p_concept, p_questions, clip=20.0):
        s = CompositionScores.empty()
        s.add("relation", np.array([[p_concept, p_questions]] * 4), np.full(4, clip))
        s.add("composite", np.array([[np.nan, p_questions, np.nan]] * 2), np.full(2, clip))
        return s

    t = table2({"Original": scores(0.9, 0.95), "learner": scores(0.3, 0.2, 25.0)})
    assert t["Original"]["relation"]["ccd"] == 0.0 and t["learner"]["relation"]["ccd"] == pytest.approx(0.75)
    assert t["learner"]["relation"]["accuracy"] == 0.0 and t["Original"]["relation"]["accuracy"] == 1.0
    assert t["learner"]["relation"]["concept"] == pytest.approx(0.3) and t["learner"]["relation"]["clip"] == 25.0
    # an unanswered question (NaN) is left out; an unanswered concept question gives None
    assert t["learner"]["composite"]["accuracy"] == 0.0 and t["learner"]["composite"]["concept"] is None
    assert t["learner"]["action"] == {"clip": None, "accuracy": None, "ccd": None, "concept": None}


@pytest.mark.parametrize("prompt", ["a V* in the sky", "a photo of four V*", "a photo of a V* eating a fish", ""])
def test_prompts_the_question_generator_cannot_parse_are_one_line(prompt):
    with pytest.raises(ValueError, match=r"^prompt: cannot make questions of"):
        questions(prompt)


def test_questions_of_many_prompts_equal_one_call_per_prompt(world):
    prompts = [p for _, p, _ in concept_prompts(world, 0)] * 3
    batched = questions_of(prompts)
    assert batched == [questions(p) for p in prompts]
    assert batched[0] is not batched[13]  # fresh lists: a caller may edit one prompt's questions
    with pytest.raises(ValueError, match=r"^prompt: cannot make questions of"):
        questions_of(["a photo of two V*", "a photo of four V*"])


@pytest.fixture(scope="module")
def oracle():
    from concept_grounding.judge import load_world_judge
    from concept_grounding.judge.composition import load_composition_judge

    return VQAJudge(load_composition_judge(), load_world_judge())


def test_p_yes_reads_the_asked_value_of_each_judge(world, oracle):
    from concept_grounding.judge import judge_images
    from concept_grounding.judge.composition import HEADS

    images = real_images(world, 0, "a photo of two V* in the sky", None, 3)
    qs = questions("a photo of two V* in the sky facing left") + questions(f"a photo of a V* with {_phrase(world)}")[1:]
    p = oracle.p_yes(images, qs, 0, world)
    heads, attributes = oracle.judge.probabilities(images), judge_images(oracle.attributes, images)[1]
    assert p.shape == (3, 5) and np.isnan(p[:, 0]).all()  # no species oracle: the concept question is unanswered
    np.testing.assert_allclose(p[:, 1], heads["count"][:, 1], atol=1e-6)
    np.testing.assert_allclose(p[:, 2], heads["scene"][:, HEADS["scene"].index("sky")], atol=1e-6)
    np.testing.assert_allclose(p[:, 3], heads["facing"][:, HEADS["facing"].index("left")], atol=1e-6)
    np.testing.assert_allclose(p[:, 4], attributes[:, world.vocab.attribute_index(_attribute(world))], atol=1e-6)
    assert (p[:, 1:3] > 0.5).all()  # exact drawings of two birds in the sky: the judge answers yes


def test_p_yes_batched_equals_the_per_image_and_per_question_loops(world, oracle):
    rows = concept_prompts(world, 1)
    for category in ("relation", "action", "attribute", "counting", "composite"):
        _, prompt, attribute = next(r for r in rows if r[0] == category)
        qs = questions(prompt)
        images = real_images(world, 1, prompt, attribute, 4)
        batched = oracle.p_yes(images, qs, 1, world)
        per_image = np.concatenate([oracle.p_yes(images[i : i + 1], qs, 1, world) for i in range(len(images))])
        per_question = np.stack([oracle.p_yes(images, [q], 1, world)[:, 0] for q in qs], axis=1)
        np.testing.assert_allclose(batched, per_image, atol=1e-5)
        np.testing.assert_allclose(batched, per_question, atol=1e-5)


def _attribute(world) -> str:
    return next(a for c, _, a in concept_prompts(world, 0) if c == "attribute")


def _phrase(world) -> str:
    from concept_grounding.worldflux.captions import caption_phrase

    return caption_phrase(_attribute(world))
