"""The packaged CUB/SUB facts, and the checks docs/README.md names."""

import subprocess
import sys

import pytest

from concept_grounding.vocabulary import (
    Vocabulary,
    attribute_phrase,
    load_vocabulary,
    split_attribute,
)


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return load_vocabulary()


def test_sizes(vocab):
    assert (vocab.num_attributes, vocab.num_parts, vocab.num_classes) == (312, 15, 200)
    assert len(vocab.cbm_112) == 112 and len(set(vocab.cbm_112)) == 112
    assert len(vocab.groups) == 28
    assert sum(len(ix) for ix in vocab.groups.values()) == 312


def test_seventeen_sub_attributes_in_cbm_112(vocab):
    """SUB paper: 17 of its 32 substitution attributes overlap the CBM-112 subset."""
    assert len(vocab.sub_attribute_indices) == 32
    assert len(set(vocab.sub_attribute_indices) & set(vocab.cbm_112)) == 17


def test_eighty_nine_of_112_have_a_part(vocab):
    """Aysel et al.: 89 of the 112 CBM concepts map to a body part."""
    assert len(vocab.cbm_112_with_part) == 89


def test_sub_facts(vocab):
    assert len(vocab.sub_classes) == 33
    assert all(c in vocab.classes for c in vocab.sub_classes)
    assert vocab.sub_guidance_birds["has_bill_shape::needle"] == "Hummingbird"
    for phrase, name in vocab.sub_substitutions.items():
        assert attribute_phrase(name) == phrase


def test_lookups(vocab):
    i = vocab.attribute_index("has_crown_color::yellow")
    assert vocab.attributes[i] == "has_crown_color::yellow"
    assert vocab.group_of(i) == "crown_color"
    assert vocab.parts_of("has_size::small_(5_-_9_in)") == ()
    assert vocab.parts_of("has_wing_color::blue") == ("left wing", "right wing")
    assert vocab.class_index("Blue Jay") == vocab.class_index("073.Blue_Jay") == 72
    assert vocab.part_index("throat") == 14
    assert vocab.group_values("bill_shape")[3] == "needle"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda v: v.attribute_index("has_crown_color::plaid"), "unknown attribute"),
        (lambda v: v.class_index("Dodo"), "unknown CUB class"),
        (lambda v: v.part_index("fin"), "unknown part"),
        (lambda v: v.group_values("fin_color"), "unknown attribute group"),
    ],
)
def test_unknown_names_raise_clear_errors(vocab, call, message):
    with pytest.raises(KeyError, match=message):
        call(vocab)


def test_split_attribute_rejects_bare_names():
    with pytest.raises(ValueError, match="not a CUB attribute name"):
        split_attribute("yellow")


def test_import_is_light():
    """Importing the package must not pull torch, datasets, diffusers or gradio."""
    code = (
        "import sys, concept_grounding, concept_grounding.cli;"
        "heavy = [m for m in ('torch', 'datasets', 'diffusers', 'gradio', 'transformers') if m in sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_typo_in_an_attribute_suggests_the_name_meant():
    """``tdg_prompts(..., "has_crown_color::yelow")`` listed five other colours
    and never yellow, and a typo in the group (``world.counterfactual``) answered "same group: []"."""
    from concept_grounding import BirdWorld, tdg_prompts

    with pytest.raises(ValueError, match=r"did you mean 'has_crown_color::yellow'"):
        tdg_prompts("017.Cardinal", "has_crown_color::yelow")
    world = BirdWorld()
    with pytest.raises(ValueError, match=r"did you mean 'has_crown_color::black'") as err:
        world.counterfactual(world.sample(0), "has_crwn_color::black")
    assert "[]" not in str(err.value)
