"""The photos layout, the stamps' fetch and unpacking, and their known answers (no model here)."""

from __future__ import annotations

import io
import json
import lzma
import tarfile

import numpy as np
import pytest
from PIL import Image

from concept_grounding.photos.export import compose
from concept_grounding.photos.stamps import ANIMALS, COPYRIGHT, STAMPS, _ar_members, unpack_deb


def _ar(members: dict[str, bytes]) -> bytes:
    out = b"!<arch>\n"
    for name, data in members.items():
        out += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode() + data
        out += b"\n" if len(data) % 2 else b""
    return out


def _fake_deb(tmp_path, files: dict[str, bytes]):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    deb = tmp_path / "x.deb"
    deb.write_bytes(
        _ar(
            {
                "debian-binary": b"2.0\n",
                "control.tar.xz": lzma.compress(b""),
                "data.tar.xz": lzma.compress(raw.getvalue()),
            }
        )
    )
    return deb


def test_a_deb_is_unpacked_in_python_keeping_only_the_animals_and_the_copyright(tmp_path):
    deb = _fake_deb(
        tmp_path,
        {
            ANIMALS + "birds/owl.png": b"odd-length",
            ANIMALS + "birds/owl.ogg": b"x",
            "usr/share/tuxpaint/stamps/food/apple.png": b"y",
            COPYRIGHT: b"GPL-2",
        },
    )
    assert set(_ar_members(deb.read_bytes())) == {"debian-binary", "control.tar.xz", "data.tar.xz"}
    assert unpack_deb(deb, tmp_path / "out") == 1
    files = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert files == ["animals/birds/owl.png", "copyright"]
    assert (tmp_path / "out/animals/birds/owl.png").read_bytes() == b"odd-length"
    with pytest.raises(ValueError, match="ar archive"):
        unpack_deb(tmp_path / "out" / "copyright", tmp_path / "bad")


def test_compose_places_the_cut_out_exactly_where_its_mask_says():
    stamp = np.zeros((40, 60, 4), np.uint8)
    stamp[10:30, 5:55] = (255, 0, 0, 255)  # an opaque red box inside a transparent margin
    background = Image.new("RGB", (300, 200), (0, 0, 255))
    image, mask = compose(Image.fromarray(stamp), background, np.random.default_rng(0), size=256)
    assert image.shape == (256, 256, 3) and mask.shape == (256, 256)
    ys, xs = np.nonzero(mask)
    assert ys.min() >= 16 and ys.max() < 240 and xs.min() >= 16 and xs.max() < 240  # inside the centre 224
    assert 0.45 * 224 - 1 <= xs.max() - xs.min() + 1 <= 0.8 * 224 + 1  # the longer side's scale
    assert (np.abs(image[mask].astype(int) - (255, 0, 0)).max(1) <= 2).mean() > 0.95
    assert (image[~mask] == (0, 0, 255)).all()


def test_every_catalogued_class_is_the_imagenet_class_its_stamp_names():
    from concept_grounding.models.imagenet import imagenet_names

    names = imagenet_names()
    by_stamp = {s.name: names[s.imagenet] for s in STAMPS}
    assert by_stamp["pink_flamingo"] == "flamingo" and by_stamp["magellanic_penguin"] == "king penguin"
    assert by_stamp["tiger_sumatran"] == "tiger" and by_stamp["koala"] == "koala"
    birds = {s.imagenet for s in STAMPS if s.group == "bird"}
    assert birds <= set(range(7, 25)) | set(range(80, 101)) | set(range(127, 147))  # ImageNet's bird classes


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    from concept_grounding.errors import UsageError
    from concept_grounding.photos.export import PhotosConfig, run_photos

    out = tmp_path_factory.mktemp("photos")
    try:
        result = run_photos(PhotosConfig(per_stamp=1, groups=("bird", "reptile"), progress=False, out=out))
    except UsageError as err:  # offline: the stamps cannot be fetched
        pytest.skip(f"Tux Paint's stamps cannot be fetched here: {err}")
    result.save(out)
    return result


def test_the_export_is_an_image_folder_with_masks_and_a_counteranimals_split(photos):
    from concept_grounding.cci.diagnose_job import read_subsets
    from concept_grounding.cci.layouts import read_image_folder

    out = photos.out
    data = read_image_folder(out / "images", out / "images" / "class_names.txt")
    assert len(data.paths) == 2 * 21 and len(data.class_names) == 16  # 20 birds + the iguana, easy + hard
    assert "king penguin" in data.class_names and all(m.is_file() for m in data.masks)
    subsets = read_subsets(out / "counteranimals", out / "counteranimals" / "class_names.txt")
    assert {k: len(v.paths) for k, v in subsets.items()} == {"easy": 21, "hard": 21}
    records = json.loads((out / "photos.json").read_text())["images"]
    usual = {"china", "grass", "gravel"}
    assert all((r["background"] in usual) == (r["subset"] == "easy") for r in records)
    assert all(0.01 < r["mask_share_crop"] < 0.7 for r in records)
    for path, mask in zip(data.paths[:3], data.masks[:3]):
        m = np.asarray(Image.open(mask)) > 127
        assert Image.open(path).size == m.shape[::-1] == (256, 256) and m.any()
    assert "GPL-2" in (out / "README.md").read_text()


def test_a_second_run_resumes_without_rewriting(photos):
    from concept_grounding.photos.export import run_photos

    first = sorted(p.stat().st_mtime_ns for p in (photos.out / "images").rglob("*.png"))
    again = run_photos(photos.config)
    assert sorted(p.stat().st_mtime_ns for p in (photos.out / "images").rglob("*.png")) == first
    assert again.records == photos.records


def test_no_network_is_one_line_saying_where_to_put_the_deb(tmp_path, monkeypatch):
    from concept_grounding.errors import UsageError
    from concept_grounding.photos import stamps

    def offline(folder, url=stamps.DEB_URL):
        raise OSError("Network is unreachable")

    monkeypatch.setattr(stamps, "_apt_download", lambda folder: None)
    monkeypatch.setattr(stamps, "_url_download", offline)
    with pytest.raises(UsageError) as err:
        stamps.fetch_stamps(tmp_path)
    message = str(err.value)
    assert "\n" not in message and "cannot fetch tuxpaint-stamps-default" in message
    assert stamps.DEB_URL in message and "CONCEPT_GROUNDING_CACHE" in message
    assert not stamps.stamps_dir(tmp_path).exists() and not list(tmp_path.glob(".fetch-*"))


def test_a_deb_that_fails_its_checksum_is_refused(tmp_path, monkeypatch):
    from concept_grounding.errors import UsageError
    from concept_grounding.photos import stamps

    def fake(folder, url=stamps.DEB_URL):
        return _fake_deb(folder, {stamps.COPYRIGHT: b"GPL-2"})

    monkeypatch.setattr(stamps, "_apt_download", lambda folder: None)
    monkeypatch.setattr(stamps, "_url_download", fake)
    with pytest.raises(UsageError, match="did not match its SHA-256"):
        stamps.fetch_stamps(tmp_path)


def test_the_photos_command_refuses_an_unknown_group_in_one_line(tmp_path, capsys):
    from concept_grounding.cli import main

    assert main(["photos", "--groups", "fish", "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "argument --groups: invalid choice: 'fish'" in err
    assert not (tmp_path / "p").exists()
