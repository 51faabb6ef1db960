"""load_cub / write_cub / class_level_labels on tiny hand-written CUB folders.

The fixture writes the official files in their exact formats: 7 images of 3 classes
(train = images 1-5, test = 6-7), all 312 attributes, 15 parts, with hand-chosen values
on attributes 1-7 (1-based, as in the files) so that every number below is hand-checked.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from concept_grounding.loaders import (
    CUBFormatError,
    DatasetWarning,
    class_level_labels,
    load_cub,
    read_cub_tables,
    write_cub,
)
from concept_grounding.vocabulary import load_vocabulary

VOCAB = load_vocabulary()
CLASSES = ["001.Black_footed_Albatross", "017.Cardinal", "073.Blue_Jay"]
FILES = {
    1: "001.Black_footed_Albatross/Black_Footed_Albatross_0001_796111.jpg",
    2: "001.Black_footed_Albatross/Black_Footed_Albatross_0002_55.jpg",
    3: "001.Black_footed_Albatross/Black_Footed_Albatross_0003_796136.jpg",
    4: "017.Cardinal/Cardinal_0001_17057.jpg",
    5: "073.Blue_Jay/Blue_Jay_0001_62744.jpg",
    6: "001.Black_footed_Albatross/Black_Footed_Albatross_0004_796130.jpg",
    7: "017.Cardinal/Cardinal_0002_17125.jpg",
}
CLASS_OF = {1: 1, 2: 1, 3: 1, 4: 2, 5: 3, 6: 1, 7: 2}
TRAIN = {1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 0, 7: 0}
# (image_id, attribute_id) -> (is_present, certainty_id); every other pair is "0 3".
LABELS = {
    (1, 1): (1, 4), (2, 1): (1, 3), (3, 1): (0, 3),                  # class 1: 2 of 3 present -> 1
    (1, 2): (1, 4), (2, 2): (0, 4), (3, 2): (0, 4), (4, 2): (1, 2),  # class 1 -> 0; class 2 -> 1
    (6, 2): (1, 4), (7, 2): (0, 4),                                   # test images do not vote
    (1, 3): (1, 4), (2, 3): (0, 1), (3, 3): (0, 1),                  # "not visible" absences do not vote -> 1
    (1, 4): (1, 2), (2, 4): (0, 2), (3, 4): (0, 1),                  # tie 1:1 -> 1 (CBM rule)
    (1, 5): (0, 1), (2, 5): (0, 1), (3, 5): (0, 1),                  # no votes at all -> 1 (CBM rule)
    (1, 6): (1, 4), (2, 6): (1, 4), (3, 6): (1, 4), (4, 6): (1, 4), (5, 6): (1, 3),  # on for all 3 classes
    (2, 7): (1, 4),                                                  # written as an irregular 7-field line
}  # fmt: skip
IRREGULAR = "2 7 1 4 0 0 13.405"  # a stray extra value, as in the real file
IMAGE_SIZE = {i: (12 + i, 10) for i in FILES}


def image_bytes(i: int) -> bytes:
    rng = np.random.default_rng(i)
    w, h = IMAGE_SIZE[i]
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(buf, format="JPEG")
    return buf.getvalue()


def attribute_label_lines() -> list[str]:
    lines = []
    for i in FILES:
        for j in range(1, VOCAB.num_attributes + 1):
            p, c = LABELS.get((i, j), (0, 3))
            if (i, j) == (2, 7):
                lines.append(IRREGULAR)
            elif (i, j) == (3, 8):
                lines.append("3  8 0 3  1.25 ")  # doubled spaces and trailing blank: still 5 fields
            else:
                lines.append(f"{i} {j} {p} {c} {0.5 * j:.3f}")
    return lines


def write_text(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def make_cub(root: Path, *, attributes_at: str = "attributes/attributes.txt") -> Path:
    cub = root / "CUB_200_2011"
    write_text(cub / "images.txt", [f"{i} {f}" for i, f in FILES.items()])
    write_text(cub / "classes.txt", [f"{k} {c}" for k, c in enumerate(CLASSES, start=1)])
    # image_class_labels.txt deliberately not in image order: ids are matched, not positions
    write_text(cub / "image_class_labels.txt", [f"{i} {CLASS_OF[i]}" for i in (7, 1, 2, 3, 4, 5, 6)])
    write_text(cub / "train_test_split.txt", [f"{i} {TRAIN[i]}" for i in FILES])
    write_text(cub / "bounding_boxes.txt", [f"{i} {i}.0 {2 * i}.5 8.0 6.0" for i in FILES])
    write_text((cub / attributes_at).resolve(), [f"{j} {a}" for j, a in enumerate(VOCAB.attributes, start=1)])
    write_text(cub / "attributes" / "certainties.txt", ["1 not visible", "2 guessing", "3 probably", "4 definitely"])
    write_text(cub / "attributes" / "image_attribute_labels.txt", attribute_label_lines())
    write_text(
        cub / "attributes" / "class_attribute_labels_continuous.txt",
        [" ".join(["50.0"] * VOCAB.num_attributes)] * len(CLASSES),
    )
    write_text(cub / "parts" / "parts.txt", [f"{k} {p}" for k, p in enumerate(VOCAB.parts, start=1)])
    locs = []
    for i in FILES:
        for k in range(1, VOCAB.num_parts + 1):
            if (i, k) == (1, 1):
                locs.append("1 1 10.0 5.0 1")
            elif (i, k) == (1, 7):
                locs.append("1 7 3.5 2.0 1")
            else:
                locs.append(f"{i} {k} 0.0 0.0 0")
    write_text(cub / "parts" / "part_locs.txt", locs)
    for i, name in FILES.items():
        (cub / "images" / name).parent.mkdir(parents=True, exist_ok=True)
        (cub / "images" / name).write_bytes(image_bytes(i))
    return cub


@pytest.fixture
def cub(tmp_path) -> Path:
    return make_cub(tmp_path)


# ------------------------------------------------------------------ exact values
def test_tables_hold_the_exact_values(cub):
    with pytest.warns(DatasetWarning) as seen:
        t = read_cub_tables(cub)
    assert t.image_ids.tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert t.file_names == list(FILES.values())
    assert t.class_names == CLASSES
    assert t.labels.tolist() == [0, 0, 0, 1, 2, 0, 1]  # 1-based class ids -> 0-based
    assert t.is_train.tolist() == [True] * 5 + [False] * 2
    # 1-based attribute id j -> column j - 1
    assert t.attributes[0, :7].tolist() == [1, 1, 1, 1, 0, 1, 0]
    assert t.certainty[0, :7].tolist() == [4, 4, 4, 2, 1, 4, 3]
    assert t.attributes[1, 6] == 1 and t.certainty[1, 6] == 4  # the irregular line: first four fields
    assert t.attributes[2, 7] == 0 and t.certainty[2, 7] == 3  # the doubled-space line
    assert t.attributes.sum() == sum(p for p, _ in LABELS.values())
    assert t.irregular_lines == [312 + 7]  # image 2's block starts after image 1's 312 lines
    assert [str(w.message) for w in seen] == [
        "attributes/image_attribute_labels.txt: 1 line(s) with extra fields (the first four used), e.g. line(s) [319]"
    ]
    np.testing.assert_array_equal(t.part_xy[0, 0], [10.0, 5.0])
    np.testing.assert_array_equal(t.part_xy[0, 6], [3.5, 2.0])  # part 7 = left eye
    assert t.part_visible[0].nonzero()[0].tolist() == [0, 6]
    assert not t.part_visible[1:].any()
    np.testing.assert_array_equal(t.bbox[2], [3.0, 6.5, 8.0, 6.0])
    assert t.class_attributes_continuous.shape == (3, 312)
    assert t.mask_files is None and t.part_map_files is None


def test_load_cub_splits_rows_and_features(cub):
    from concept_grounding.schema import cub_features

    dd = load_cub(cub, min_class_count=None, progress=False)
    assert set(dd) == {"train", "test"}
    assert dd["train"]["image_id"] == [1, 2, 3, 4, 5] and dd["test"]["image_id"] == [6, 7]
    assert dd["train"].features == cub_features(CLASSES)
    row = dd["test"][1]
    assert row["file_name"] == FILES[7] and row["label"] == 1 and row["is_train"] is False
    assert row["mask"] is None and row["part_map"] is None
    with Image.open(cub / "images" / FILES[7]) as im:
        np.testing.assert_array_equal(np.asarray(row["image"]), np.asarray(im.convert("RGB")))
    assert row["image"].size == IMAGE_SIZE[7]
    assert np.asarray(dd["train"][0]["part_xy"]).shape == (15, 2)


def test_load_cub_accepts_the_parent_folder(cub):
    dd = load_cub(cub.parent, min_class_count=None, progress=False)
    assert dd["train"].num_rows == 5


@pytest.mark.parametrize("where", ["attributes.txt", "../attributes.txt", "attributes/attributes.txt"])
def test_attributes_txt_in_every_known_place(tmp_path, where):
    cub = make_cub(tmp_path, attributes_at=where)
    assert read_cub_tables(cub, check_images=False).attributes.shape == (7, 312)


# ------------------------------------------------------------------ class-level labels
def test_class_level_majority_vote_hand_computed(cub):
    dd = load_cub(cub, min_class_count=None, progress=False)
    by_class = {r["label"]: r["class_attributes"] for split in dd.values() for r in split}
    # attribute ids 1..7 (columns 0..6), worked out from LABELS by hand
    assert by_class[0][:7] == [1, 0, 1, 1, 1, 1, 0]  # attribute 7: 1 present vs 2 absent
    assert by_class[1][:7] == [0, 1, 0, 0, 0, 1, 0]
    assert by_class[2][:7] == [0, 0, 0, 0, 0, 1, 0]
    assert sum(by_class[0]) == 5 and sum(by_class[1]) == 2 and sum(by_class[2]) == 1


def test_min_class_count_zeroes_attributes_on_too_few_classes(cub):
    with pytest.warns(UserWarning, match="min_class_count"):
        dd = load_cub(cub, min_class_count=5, progress=False)
    assert sum(sum(r["class_attributes"]) for r in dd["train"]) == 0
    dd = load_cub(cub, min_class_count=2, progress=False)  # only attribute 6 is on for >= 2 classes
    for r in dd["train"]:
        assert np.flatnonzero(r["class_attributes"]).tolist() == [5]


def test_class_level_labels_arrays():
    a = np.array([[1, 0, 0], [0, 0, 1], [1, 1, 0], [0, 1, 0]], dtype=np.uint8)
    c = np.array([[4, 4, 1], [4, 1, 4], [4, 4, 4], [2, 1, 4]], dtype=np.uint8)
    y = np.array([0, 0, 1, 1])
    cls, keep = class_level_labels(a, y, 3, certainty=c, min_class_count=2)
    # class 0: attr0 1:1 tie -> 1; attr1 0 present, absences cert 4 + cert 1 -> 0:1 -> 0; attr2 1:0 -> 1
    # class 1: attr0 1:1 -> 1; attr1 2:0 -> 1; attr2 0:2 -> 0;  class 2: no images -> all 1
    assert cls.tolist() == [[1, 0, 1], [1, 1, 0], [1, 1, 1]]
    assert keep.tolist() == [True, True, True]
    assert class_level_labels(a, y, 3, certainty=c, min_class_count=3)[1].tolist() == [True, False, False]
    # one present vote against two "not visible" absences: certainty decides
    a1, y1, c1 = np.array([[1], [0], [0]], np.uint8), np.zeros(3, int), np.array([[4], [1], [1]], np.uint8)
    assert class_level_labels(a1, y1, 1, certainty=c1)[0].tolist() == [[1]]
    assert class_level_labels(a1, y1, 1)[0].tolist() == [[0]]
    with pytest.raises(ValueError, match="labels"):
        class_level_labels(a, np.array([0, 0, 5, 1]), 3)


# ------------------------------------------------------------------ bad input
def _replace_line(path: Path, number: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n")


def test_missing_files_are_all_listed(cub):
    (cub / "bounding_boxes.txt").unlink()
    (cub / "parts" / "part_locs.txt").unlink()
    with pytest.raises(CUBFormatError, match="missing file") as err:
        load_cub(cub, progress=False)
    assert "bounding_boxes.txt" in str(err.value) and "parts/part_locs.txt" in str(err.value)
    assert err.value.file == str(cub)


@pytest.mark.parametrize(
    ("rel", "line", "text", "message"),
    [
        ("images.txt", 3, "3 001.Black_footed_Albatross/x.jpg extra", "expected 2 columns, found 3"),
        ("images.txt", 4, "2 017.Cardinal/Cardinal_0001_17057.jpg", "image id 2 appears twice"),
        ("image_class_labels.txt", 2, "99 1", "image id 99 is not listed in images.txt"),
        ("image_class_labels.txt", 3, "2 4", "class id 4 is not in classes.txt"),
        ("train_test_split.txt", 5, "5 2", "is_training_image must be 0 or 1"),
        ("bounding_boxes.txt", 1, "1 1.0 2.0 3.0", "expected 5 columns, found 4"),
        ("bounding_boxes.txt", 2, "2 1.0 two 3.0 4.0", "y must be float"),
        ("parts/part_locs.txt", 16, "2 1 0.0 0.0 2", "visible must be 0 or 1"),
        ("parts/part_locs.txt", 17, "2 1 0.0 0.0 0", "part id 1 appears twice"),
        ("parts/part_locs.txt", 18, "2 16 0.0 0.0 0", "part id 16 is outside 1..15"),
        ("attributes/image_attribute_labels.txt", 5, "1 5 0 3", "expected 5 columns"),
        ("attributes/image_attribute_labels.txt", 6, "1 6 1 5 0.1", "certainty_id must be 1..4"),
        ("attributes/image_attribute_labels.txt", 9, "1 9 2 4 0.1", "is_present must be 0 or 1"),
        ("attributes/image_attribute_labels.txt", 10, "8 10 0 3 0.1", "image id 8 is not listed"),
        ("attributes/attributes.txt", 2, "2 has_bill_shape::spoon", "the vocabulary has 'has_bill_shape::dagger'"),
        ("parts/parts.txt", 7, "7 third eye", "part 7 is 'third eye'"),
        ("classes.txt", 2, "5 017.Cardinal", "class ids must be 1..3"),
        # NaN, inf and far off-image coordinates: the loader used to accept them
        ("parts/part_locs.txt", 1, "1 1 nan 5.0 1", "x must be a finite number, found 'nan'"),
        ("parts/part_locs.txt", 2, "1 2 0.0 inf 0", "y must be a finite number, found 'inf'"),
        (
            "parts/part_locs.txt",
            1,
            "1 1 20.0 5.0 1",
            "visible part 1 of image id 1 at (20, 5) lies more than 0.5 x its side outside its image (13 x 10 px",
        ),
        ("parts/part_locs.txt", 7, "1 7 3.5 -5.5 1", "visible part 7 of image id 1 at (3.5, -5.5) lies more than"),
        ("bounding_boxes.txt", 3, "3 NaN 1.0 2.0 3.0", "x must be a finite number"),
        (
            "bounding_boxes.txt",
            4,
            "4 1.0 1.0 -2.0 3.0",
            "width and height must be >= 0 and the box must reach the image",
        ),
        ("bounding_boxes.txt", 5, "5 -9.0 1.0 8.0 3.0", "the box must reach the image, found -9 1 8 3"),
        (
            "attributes/class_attribute_labels_continuous.txt",
            2,
            " ".join(["nan"] * 312),
            "percentage must be a finite number",
        ),
        (
            "attributes/class_attribute_labels_continuous.txt",
            3,
            " ".join(["101.0"] * 312),
            "percentages must lie in 0..100, found 101..101",
        ),
    ],
)
def test_bad_lines_name_file_and_line(cub, rel, line, text, message):
    _replace_line(cub / rel, line, text)
    with pytest.raises(CUBFormatError) as err:
        load_cub(cub, progress=False)
    assert message in str(err.value)
    assert err.value.file == rel and err.value.line == line
    assert f"{rel}, line {line}:" in str(err.value)


def test_missing_pairs_and_images_are_named(cub):
    path = cub / "attributes" / "image_attribute_labels.txt"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")  # drop (image 7, attribute 312)
    with pytest.raises(CUBFormatError, match=r"\(7, 312\)") as err:
        load_cub(cub, progress=False)
    assert err.value.file == "attributes/image_attribute_labels.txt"
    _replace_line(cub / "train_test_split.txt", 7, "")
    with pytest.raises(CUBFormatError, match=r"image ids \[7\]") as err:
        load_cub(cub, progress=False)
    assert err.value.file == "train_test_split.txt"


def test_continuous_file_must_have_one_line_per_class(cub):
    path = cub / "attributes" / "class_attribute_labels_continuous.txt"
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")
    with pytest.raises(CUBFormatError, match="expected 3 lines"):
        load_cub(cub, progress=False)


def test_unreadable_and_missing_images_are_named(cub):
    bad = cub / "images" / FILES[4]
    bad.write_bytes(b"not a jpeg at all")
    with pytest.raises(CUBFormatError, match="unreadable image") as err:
        load_cub(cub, progress=False)
    assert err.value.file == str(bad)
    bad.unlink()
    with pytest.raises(CUBFormatError, match="missing") as err:
        load_cub(cub, progress=False)
    assert FILES[4] in str(err.value)


def test_partial_segmentations_folder_is_an_error(cub):
    seg = cub / "segmentations" / FILES[1]
    seg = seg.with_suffix(".png")
    seg.parent.mkdir(parents=True)
    Image.new("L", IMAGE_SIZE[1]).save(seg)
    with pytest.raises(CUBFormatError, match="6 image"):
        load_cub(cub, progress=False)


# ------------------------------------------------------------------ round trip
def make_dataset_dict(with_extras: bool):
    import datasets

    from concept_grounding.schema import cub_features

    rng = np.random.default_rng(0)
    names = ["017.Cardinal", "073.Blue_Jay"]
    rows = []
    for k in range(5):
        label = k % 2
        size = (16 + k, 12)
        img = Image.fromarray(rng.integers(0, 255, (12, size[0], 3), dtype=np.uint8))
        attributes = (rng.random(312) < 0.3).astype(np.uint8)
        rows.append(
            {
                "image_id": 10 + k,
                "file_name": f"{names[label]}/{names[label].split('.')[1]}_{k:04d}_{k}.png",
                "image": img,
                "label": label,
                "attributes": attributes,
                "certainty": rng.integers(1, 5, 312).astype(np.uint8),
                "class_attributes": np.zeros(312, np.uint8),
                "part_xy": (rng.random((15, 2)) * 11.7).astype(np.float32),  # on the 12 px high image
                "part_visible": rng.random(15) < 0.7,
                "bbox": np.array([1.25, 2.5, 10.0, 8.125], np.float32),
                "mask": Image.fromarray((rng.random((12, size[0])) < 0.5).astype(np.uint8) * 255)
                if with_extras
                else None,
                "part_map": Image.fromarray(rng.integers(0, 16, (12, size[0]), dtype=np.uint8))
                if with_extras
                else None,
                "is_train": k < 3,
            }
        )
    feats = cub_features(names)
    return datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list([r for r in rows if r["is_train"]], features=feats),
            "test": datasets.Dataset.from_list([r for r in rows if not r["is_train"]], features=feats),
        }
    )


COLUMNS = ("image_id", "file_name", "label", "attributes", "certainty", "part_visible", "is_train")


@pytest.mark.parametrize("with_extras", [False, True])
def test_write_then_load_round_trips(tmp_path, with_extras):
    dd = make_dataset_dict(with_extras)
    root = write_cub(dd, tmp_path / "CUB_200_2011", progress=False)
    assert not list(root.rglob(".*.tmp-*"))  # atomic writes leave no temp files
    back = load_cub(root, min_class_count=None, progress=False)
    for split in ("train", "test"):
        a, b = dd[split], back[split]
        assert b.features == a.features
        for col in COLUMNS:
            assert b[col] == a[col], col
        np.testing.assert_allclose(np.asarray(b["part_xy"]), np.asarray(a["part_xy"]), rtol=0, atol=0)
        np.testing.assert_array_equal(np.asarray(b["bbox"]), np.asarray(a["bbox"]))
        for ra, rb in zip(a, b):
            np.testing.assert_array_equal(np.asarray(ra["image"]), np.asarray(rb["image"]))
            for col in ("mask", "part_map"):
                if with_extras:
                    np.testing.assert_array_equal(np.asarray(ra[col]), np.asarray(rb[col]))
                else:
                    assert rb[col] is None
    # class-level labels = CBM vote over the training rows; continuous file = 100 x class mean
    train = dd["train"]
    want, _ = class_level_labels(
        np.asarray(train["attributes"]), np.asarray(train["label"]), 2,
        certainty=np.asarray(train["certainty"]), min_class_count=None,
    )  # fmt: skip
    for r in back["test"]:
        assert r["class_attributes"] == want[r["label"]].tolist()
    t = read_cub_tables(root)
    allrows = [r for s in dd.values() for r in s]
    for c in range(2):
        mean = np.mean([r["attributes"] for r in allrows if r["label"] == c], axis=0)
        np.testing.assert_allclose(t.class_attributes_continuous[c], 100 * mean, atol=1e-4)


def test_write_cub_rejects_duplicate_ids(tmp_path):
    import datasets

    dd = make_dataset_dict(False)
    dup = datasets.DatasetDict({"train": dd["train"], "test": dd["train"]})
    with pytest.raises(ValueError, match="image_id must be unique"):
        write_cub(dup, tmp_path / "x", progress=False)


def test_jpeg_images_are_copied_byte_for_byte(cub, tmp_path):
    dd = load_cub(cub, min_class_count=None, progress=False)
    out = write_cub(dd, tmp_path / "copy", progress=False)
    for name in FILES.values():
        assert (out / "images" / name).read_bytes() == (cub / "images" / name).read_bytes()
    again = read_cub_tables(out)
    ref = read_cub_tables(cub)
    for field in ("attributes", "certainty", "labels", "is_train", "part_xy", "part_visible", "bbox"):
        np.testing.assert_array_equal(getattr(again, field), getattr(ref, field))


def test_world_export_round_trips(tmp_path):
    try:
        from concept_grounding.world import BirdWorld, WorldConfig
    except ImportError:
        pytest.skip("concept_grounding.world is not there yet")
    dd = BirdWorld(WorldConfig(image_size=64)).to_dataset_dict(2, 1)
    back = load_cub(write_cub(dd, tmp_path / "CUB_200_2011", progress=False), min_class_count=None, progress=False)
    for split in dd:
        for col in COLUMNS:
            assert back[split][col] == dd[split][col], col
        np.testing.assert_allclose(np.asarray(back[split]["part_xy"]), np.asarray(dd[split]["part_xy"]), atol=1e-4)
        for ra, rb in zip(dd[split], back[split]):
            if str(ra["file_name"]).lower().endswith(".png"):
                np.testing.assert_array_equal(np.asarray(ra["image"]), np.asarray(rb["image"]))
            for col in ("mask", "part_map"):
                if ra[col] is None:
                    assert rb[col] is None
                else:
                    np.testing.assert_array_equal(np.asarray(ra[col]), np.asarray(rb[col]))


def test_off_image_coordinates_of_invisible_parts_are_kept(cub):
    """Only visible parts must lie on the image (real CUB stores invisible ones as 0 0 0)."""
    _replace_line(cub / "parts/part_locs.txt", 2, "1 2 99.0 99.0 0")
    tables = read_cub_tables(cub)
    assert tables.part_xy[0, 1].tolist() == [99.0, 99.0] and not tables.part_visible[0, 1]


def test_visible_parts_just_past_the_border_are_clipped_onto_it_with_one_counting_warning(cub):
    """Real CUB's part_locs.txt has visible centres a pixel or two off the image:
    they load, clipped onto the border, and one warning counts them."""
    _replace_line(cub / "parts/part_locs.txt", 1, "1 1 14.0 5.0 1")  # image 1 is 13 x 10 px: one past the right
    _replace_line(cub / "parts/part_locs.txt", 7, "1 7 3.5 -0.5 1")  # half a pixel above the top
    with pytest.warns(DatasetWarning) as seen:
        dd = load_cub(cub, progress=False)
    parts = [str(w.message) for w in seen if "part" in str(w.message)]
    assert parts == [
        "parts/part_locs.txt: 2 visible part centre(s) past their image's border clipped onto it, e.g. line(s) [1, 7]"
    ]
    row = dd["train"][0]
    assert row["part_xy"][0] == [13.0, 5.0] and row["part_xy"][6] == [3.5, 0.0]
    assert row["part_visible"][0] and row["part_visible"][6]


def test_off_image_check_without_image_headers_clips_only_negatives(cub):
    _replace_line(cub / "parts/part_locs.txt", 1, "1 1 14.0 5.0 1")
    assert read_cub_tables(cub, check_images=False).part_xy[0, 0, 0] == 14.0  # image size unknown: not checked
    _replace_line(cub / "parts/part_locs.txt", 1, "1 1 -1.0 5.0 1")
    with pytest.warns(DatasetWarning, match="1 visible part centre"):
        assert read_cub_tables(cub, check_images=False).part_xy[0, 0].tolist() == [0.0, 5.0]


def test_boxes_and_percentages_slightly_off_are_repaired_with_counting_warnings(cub):
    _replace_line(cub / "bounding_boxes.txt", 1, "1 -1.5 -2.0 8.0 6.0")
    _replace_line(cub / "bounding_boxes.txt", 2, "2 -0.5 1.0 8.0 6.0")
    _replace_line(cub / "attributes/class_attribute_labels_continuous.txt", 2, " ".join(["100.2"] * 312))
    with pytest.warns(DatasetWarning) as seen:
        t = read_cub_tables(cub)
    messages = [str(w.message) for w in seen]
    assert (
        "bounding_boxes.txt: 2 box(es) starting left of or above the image cut at its edge, e.g. line(s) [1, 2]"
        in messages
    )
    assert any(
        m.startswith("attributes/class_attribute_labels_continuous.txt: 1 line(s) with percentages") for m in messages
    )
    np.testing.assert_array_equal(t.bbox[:2], [[0.0, 0.0, 6.5, 4.0], [0.0, 1.0, 7.5, 6.0]])
    assert t.class_attributes_continuous[1].max() == 100.0


@pytest.mark.parametrize("rel", ["images.txt", "attributes/image_attribute_labels.txt", "classes.txt"])
def test_non_utf8_files_name_the_file_and_line(cub, rel):
    path = cub / rel
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2] + b" \xff\xfe"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CUBFormatError, match="not UTF-8 text") as err:
        load_cub(cub, progress=False)
    assert err.value.file == rel and err.value.line == 3
