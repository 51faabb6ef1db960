"""load_sub / write_sub on local copies in every layout we accept, and the offline Hub error."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from PIL import Image

from concept_grounding.loaders import (
    DEFAULT_SUB_COLUMNS,
    HubUnavailableError,
    SUBFormatError,
    load_sub,
    write_sub,
)
from concept_grounding.loaders.sub import normalise_attribute
from concept_grounding.schema import sub_features
from concept_grounding.vocabulary import load_vocabulary

VOCAB = load_vocabulary()


def tiny_image(seed: int, size=(9, 7)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8))


def sub_rows():
    return [
        {
            "image": tiny_image(0),
            "reference_class": "017.Cardinal",
            "target_attribute": "has_crown_color::black",
            "removed_attributes": ["has_crown_color::red"],
            "group": "crown_color",
            "source_id": 3,
            "seed": 11,
        },
        {
            "image": tiny_image(1),
            "reference_class": "073.Blue_Jay",
            "target_attribute": "has_bill_shape::needle",
            "removed_attributes": [],
            "group": "bill_shape",
            "source_id": -1,
            "seed": -1,
        },
    ]


@pytest.fixture
def sub_dataset():
    import datasets

    return datasets.Dataset.from_list(sub_rows(), features=sub_features())


def same_pixels(a, b) -> bool:
    return np.array_equal(np.asarray(a.convert("RGB")), np.asarray(b.convert("RGB")))


def test_write_sub_then_load_sub_round_trips(sub_dataset, tmp_path):
    import datasets

    root = write_sub(sub_dataset, tmp_path / "sub")
    assert (root / "metadata.jsonl").is_file() and len(list((root / "images").glob("*.png"))) == 2
    back = load_sub(root)
    assert back.features == sub_features()
    for col in ("reference_class", "target_attribute", "removed_attributes", "group", "source_id", "seed"):
        assert back[col] == sub_dataset[col], col
    for a, b in zip(sub_dataset, back):
        assert same_pixels(a["image"], b["image"])
    plain = datasets.load_dataset("imagefolder", data_dir=str(root))["train"]
    assert plain.num_rows == 2 and plain[0]["reference_class"] == "017.Cardinal"
    assert same_pixels(plain[1]["image"], sub_dataset[1]["image"])


def test_save_to_disk_folder_loads(sub_dataset, tmp_path):
    sub_dataset.save_to_disk(str(tmp_path / "disk"))
    back = load_sub(tmp_path / "disk")
    assert back["target_attribute"] == sub_dataset["target_attribute"]


def hub_like_parquet(tmp_path, bird_names, attr_names):
    """A folder laid out like a Hub dataset repo: data/test-00000-of-00001.parquet with
    ClassLabel columns bird_label / attr_label (attribute names spelled with '--')."""
    import datasets

    feats = datasets.Features(
        {
            "image": datasets.Image(),
            "bird_label": datasets.ClassLabel(names=bird_names),
            "attr_label": datasets.ClassLabel(names=attr_names),
        }
    )
    ds = datasets.Dataset.from_dict(
        {"image": [tiny_image(5), tiny_image(6), tiny_image(7)], "bird_label": [0, 1, 1], "attr_label": [1, 0, 1]},
        features=feats,
    )
    (tmp_path / "SUB" / "data").mkdir(parents=True)
    ds.to_parquet(str(tmp_path / "SUB" / "data" / "test-00000-of-00001.parquet"))
    return tmp_path / "SUB", ds


def test_hub_layout_with_default_column_map_and_derived_s_minus(tmp_path):
    root, src = hub_like_parquet(
        tmp_path, ["Cardinal", "Blue_Jay"], ["has_breast_color--white", "has_crown_color--black"]
    )
    class_attributes = np.zeros((200, 312), np.uint8)
    cardinal, jay = VOCAB.class_index("017.Cardinal"), VOCAB.class_index("073.Blue_Jay")
    red_crown, black_crown = (
        VOCAB.attribute_index("has_crown_color::red"),
        VOCAB.attribute_index("has_crown_color::black"),
    )
    blue_crown = VOCAB.attribute_index("has_crown_color::blue")
    red_breast = VOCAB.attribute_index("has_breast_color::red")
    class_attributes[cardinal, [red_crown, red_breast]] = 1
    class_attributes[jay, [blue_crown, black_crown]] = 1  # S+ itself is never in S-
    ds = load_sub(root, class_attributes=class_attributes)
    assert set(DEFAULT_SUB_COLUMNS) == {"image", "bird_label", "attr_label"}
    assert ds["reference_class"] == ["017.Cardinal", "073.Blue_Jay", "073.Blue_Jay"]
    assert ds["target_attribute"] == ["has_crown_color::black", "has_breast_color::white", "has_crown_color::black"]
    assert ds["group"] == ["crown_color", "breast_color", "crown_color"]
    assert ds["removed_attributes"] == [["has_crown_color::red"], [], ["has_crown_color::blue"]]
    assert ds["source_id"] == [-1, -1, -1] and ds["seed"] == [-1, -1, -1]
    assert same_pixels(ds[2]["image"], src[2]["image"])


#: ``attr_label`` names of the Hub card of Jessica-bader/SUB (its README's dataset_info YAML).
HUB_CARD_ATTR_LABELS = [
    f"has_{name}"
    for name in [
        "back_color--grey",
        "belly_pattern--striped",
        "bill_color--grey",
        "bill_shape--needle",
        "breast_color--blue",
        "breast_color--red",
        "breast_color--white",
        "breast_pattern--spotted",
        "crown_color--black",
        "crown_color--grey",
        "crown_color--pink",
        "crown_color--white",
        "eye_color--blue",
        "eye_color--white",
        "eye_color--yellow",
        "forehead_color--grey",
        "leg_color--black",
        "leg_color--grey",
        "leg_color--pink",
        "primary_color--blue",
        "primary_color--brown",
        "primary_color--green",
        "primary_color--orange",
        "tail_pattern--multi-colored",
        "tail_pattern--solid",
        "throat_color--blue",
        "throat_color--yellow",
        "underparts_color--green",
        "underparts_color--red",
        "upperparts_color--yellow",
        "wing_color--black",
        "wing_color--grey",
        "wing_color--white",
    ]
]


def test_every_attr_label_of_the_hub_card_normalises():
    names = [normalise_attribute(n, VOCAB) for n in HUB_CARD_ATTR_LABELS]
    assert len(set(names)) == 33 and all(n in VOCAB.attributes for n in names)
    # the card and the vocabulary's 32 substitutions differ in two names (see loaders/sub.py)
    assert set(names) - set(VOCAB.sub_substitutions.values()) == {
        "has_belly_pattern::striped",
        "has_upperparts_color::yellow",
    }
    assert set(VOCAB.sub_substitutions.values()) - set(names) == {"has_breast_pattern::striped"}


def test_attribute_names_in_another_case_normalise():
    """A re-typed copy's capitals are a spelling, not another attribute."""
    assert normalise_attribute("Has_Crown_Color::Black", VOCAB) == "has_crown_color::black"
    assert normalise_attribute("HAS_CROWN_COLOR--BLACK", VOCAB) == "has_crown_color::black"
    assert normalise_attribute("Black Crown Color", VOCAB) == "has_crown_color::black"


def test_class_attributes_with_their_own_class_names(tmp_path):
    root, _ = hub_like_parquet(
        tmp_path, ["Cardinal", "Blue Jay"], ["has_breast_color--white", "has_crown_color--black"]
    )
    ca = np.zeros((2, 312), np.uint8)
    ca[0, VOCAB.attribute_index("has_crown_color::red")] = 1
    ds = load_sub(root, class_attributes=ca, class_names=["017.Cardinal", "073.Blue_Jay"])
    assert ds["removed_attributes"][0] == ["has_crown_color::red"]
    with pytest.raises(ValueError, match="class_attributes must be"):
        load_sub(root, class_attributes=ca)  # 2 rows but 200 default class names


def test_without_s_minus_source_warns_and_leaves_it_empty(tmp_path):
    root, _ = hub_like_parquet(
        tmp_path, ["Cardinal", "Blue_Jay"], ["has_breast_color--white", "has_crown_color--black"]
    )
    with pytest.warns(UserWarning, match="S- is left empty"):
        ds = load_sub(root)
    assert ds["removed_attributes"] == [[], [], []]


def write_csv_copy(tmp_path, header, rows):
    folder = tmp_path / "csvsub"
    (folder / "imgs").mkdir(parents=True)
    for k in range(len(rows)):
        buf = io.BytesIO()
        tiny_image(20 + k).save(buf, format="PNG")
        (folder / "imgs" / f"{k}.png").write_bytes(buf.getvalue())
    with open(folder / "sub.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for k, row in enumerate(rows):
            w.writerow([f"imgs/{k}.png", *row])
    return folder


def test_csv_with_column_map_and_sub_phrases(tmp_path):
    folder = write_csv_copy(
        tmp_path,
        ["file", "changed_attr", "bird"],
        [["black crown color", "Blue Jay"], ["needle bill shape", "cardinal"], ["has_wing_color--red", "Cardinal"]],
    )
    ds = load_sub(folder, column_map={"file": "image", "changed_attr": "target_attribute", "bird": "reference_class"},
                  class_attributes=np.zeros((200, 312), np.uint8))  # fmt: skip
    assert ds["reference_class"] == ["073.Blue_Jay", "017.Cardinal", "017.Cardinal"]
    assert ds["target_attribute"] == ["has_crown_color::black", "has_bill_shape::needle", "has_wing_color::red"]
    with Image.open(folder / "imgs" / "1.png") as im:
        assert same_pixels(ds[1]["image"], im)
    single = load_sub(folder / "sub.csv", column_map={"file": "image", "changed_attr": "target_attribute",
                                                      "bird": "reference_class"},
                      class_attributes=np.zeros((200, 312), np.uint8))  # fmt: skip
    assert single.num_rows == 3


def test_missing_column_lists_found_columns_and_mapping(tmp_path):
    folder = write_csv_copy(tmp_path, ["file", "changed_attr", "bird"], [["black crown color", "Blue Jay"]])
    with pytest.raises(SUBFormatError) as err:
        load_sub(folder)  # default Hub mapping: bird_label / attr_label are not there
    msg = str(err.value)
    assert isinstance(err.value, ValueError)
    assert "'bird_label' (-> reference_class)" in msg and "'attr_label' (-> target_attribute)" in msg
    assert "['file', 'changed_attr', 'bird']" in msg and "'image' (-> image)" in msg
    assert "column_map" in msg


def test_bad_values_name_the_row(tmp_path):
    folder = write_csv_copy(
        tmp_path, ["file", "attr", "bird"], [["black crown color", "Blue Jay"], ["purple tail", "Cardinal"]]
    )
    with pytest.raises(SUBFormatError, match="row 1: unknown attribute 'purple tail'"):
        load_sub(folder, column_map={"file": "image", "attr": "target_attribute", "bird": "reference_class"})
    folder2 = write_csv_copy(tmp_path / "b", ["file", "attr", "bird"], [["black crown color", "Dodo"]])
    with pytest.raises(SUBFormatError, match="row 0: unknown CUB class 'Dodo'"):
        load_sub(folder2, column_map={"file": "image", "attr": "target_attribute", "bird": "reference_class"})


def test_csv_missing_image_names_file_and_line(tmp_path):
    folder = write_csv_copy(tmp_path, ["file", "attr", "bird"], [["black crown color", "Blue Jay"]] * 2)
    (folder / "imgs" / "1.png").unlink()
    with pytest.raises(SUBFormatError) as err:
        load_sub(folder, column_map={"file": "image", "attr": "target_attribute", "bird": "reference_class"})
    assert err.value.line == 3 and err.value.file.endswith("sub.csv") and "imgs/1.png" in str(err.value)


def test_hub_offline_says_how_to_pass_a_local_copy(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailableError) as err:
        load_sub("Jessica-bader/SUB")
    msg = str(err.value)
    assert "unreachable" in msg and "load_sub('path/to/SUB')" in msg and "save_to_disk" in msg


def test_missing_local_path_is_not_sent_to_the_hub(tmp_path):
    with pytest.raises(SUBFormatError, match="no such file or folder"):
        load_sub(tmp_path / "nowhere" / "SUB")


def test_world_sub_export_round_trips(tmp_path):
    try:
        from concept_grounding.world import BirdWorld, WorldConfig
    except ImportError:
        pytest.skip("concept_grounding.world is not there yet")
    world = BirdWorld(WorldConfig(image_size=64))
    ds = world.sub_dataset(per_pairing=1, pairings=world.default_pairings()[:3])
    back = load_sub(write_sub(ds, tmp_path / "world_sub"))
    for col in ("reference_class", "target_attribute", "removed_attributes", "group", "source_id", "seed"):
        assert back[col] == ds[col], col
    for a, b in zip(ds, back):
        assert same_pixels(a["image"], b["image"])
