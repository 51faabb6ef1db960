"""TDG prompt pairs against SUB App. D's examples, verbatim."""

import pytest

from concept_grounding import load_vocabulary
from concept_grounding.tdg.prompts import (
    attribute_category,
    prompting_only_prompt,
    tdg_prompts,
)

APP_D = [
    (
        "European Goldfinch",
        "has_crown_color::black",
        "A photo of a European Goldfinch with black colored feathers on the crown of its head",
        "A photo of a bird with black colored feathers on the crown of its head",
    ),
    (
        "Downy Woodpecker",
        "has_breast_color::red",
        "A photo of a Downy Woodpecker with a red colored breast",
        "A photo of a bird with a red colored breast",
    ),
    (
        "Western Grebe",
        "has_tail_pattern::solid",
        "A photo of a Western Grebe with a solid tail like a Gray Catbird",
        "A photo of a Gray Catbird with a solid tail",
    ),
    (
        "Cardinal",
        "has_breast_pattern::spotted",
        "A photo of a Cardinal with a spotted belly like a Brown Thrasher",
        "A photo of a Brown Thrasher with a spotted belly",
    ),
    (
        "Blue Jay",
        "has_bill_shape::needle",
        "A photo of a Blue Jay with the body of a Blue Jay and a beak like a Hummingbird",
        "A photo of a Hummingbird",
    ),
]


@pytest.mark.parametrize(("cls", "attribute", "c_r", "c_g"), APP_D)
def test_appendix_d_examples(cls, attribute, c_r, c_g):
    p = tdg_prompts(cls, attribute)
    assert (p.reference, p.guide) == (c_r, c_g)
    assert prompting_only_prompt(cls, attribute) == c_r


def test_folder_names_and_guide_birds_of_appendix_b():
    p = tdg_prompts("186.Cedar_Waxwing", "has_breast_pattern::striped")
    assert p.guide_bird == "Song Sparrow" and p.reference_class == "Cedar Waxwing"
    assert tdg_prompts("Blue Jay", "has_tail_pattern::multi-colored").guide == (
        "A photo of a Cedar Waxwing with a multi-colored tail"
    )


def test_every_sub_pairing_has_prompts():
    vocab = load_vocabulary()
    categories = {}
    for cls in vocab.sub_classes:
        for attribute in vocab.sub_substitutions.values():
            p = tdg_prompts(cls, attribute, vocab=vocab)
            assert p.reference.startswith("A photo of a ") and p.guide.startswith("A photo of a ")
            categories[attribute] = p.category
    assert sorted(categories.values()).count("colour") == 27
    assert sorted(categories.values()).count("pattern") == 4
    assert sorted(categories.values()).count("shape") == 1


def test_errors():
    with pytest.raises(ValueError, match="reference_class"):
        tdg_prompts("Blue Dragon", "has_crown_color::black")
    with pytest.raises(ValueError, match="attribute"):
        tdg_prompts("Blue Jay", "has_crown_color::plaid")
    with pytest.raises(ValueError, match="no TDG prompt template"):
        attribute_category("has_size::small_(5_-_9_in)")
    with pytest.raises(ValueError, match="guide_bird"):
        tdg_prompts("Blue Jay", "has_bill_shape::cone")
    assert (
        tdg_prompts("Blue Jay", "has_bill_shape::cone", guide_bird="Song Sparrow").guide == "A photo of a Song Sparrow"
    )
