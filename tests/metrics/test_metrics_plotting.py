"""The PNG helpers draw real figures from metric outputs."""

import io

import numpy as np
import pytest
from PIL import Image

from concept_grounding.metrics import concept_global_importance, sub_accuracy
from concept_grounding.plotting import cgim_histograms, clm_hit_map, sub_bars, verdict_sheet

PNG = b"\x89PNG\r\n\x1a\n"


def _png_size(data: bytes) -> tuple[int, int]:
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_cgim_histograms(tmp_path):
    rng = np.random.default_rng(0)
    out = concept_global_importance(
        rng.normal(size=(8, 4)),
        (rng.random((8, 4)) < 0.5).astype(float),
        rng.normal(size=(12, 8)),
        np.arange(12) % 4,
        np.arange(12) % 4,
    )
    path = cgim_histograms(out, tmp_path / "cgim.png", title="test")
    data = path.read_bytes()
    assert data.startswith(PNG) and _png_size(data) == (800, 690)
    with pytest.raises(ValueError, match="concept_global_importance"):
        cgim_histograms({}, tmp_path / "x.png")


def test_sub_bars(tmp_path):
    names = ["has_bill_shape::dagger", "has_bill_shape::cone", "has_crown_color::blue", "has_crown_color::brown"]
    out = sub_accuracy(
        np.array([[0.9, 0.2, 0.1, 0.1], [0.1, 0.1, 0.8, 0.7]]),
        [names[0], names[2]],
        [[names[1]], [names[3]]],
        concept_names=names,
        reference_classes=["017.Cardinal", "073.Blue_Jay"],
    )
    for level in ("attribute", "group", "class"):
        data = sub_bars(out, None, level=level)
        assert data.startswith(PNG)
    assert sub_bars(out, tmp_path / "sub.png").is_file()
    with pytest.raises(ValueError, match="level must be one of"):
        sub_bars(out, None, level="part")


def test_clm_hit_map_hit_and_miss(tmp_path):
    fmap = np.zeros((4, 4))
    fmap[0, 0] = 1.0
    hit = clm_hit_map(fmap, [2.0, 2.0], None, image_size=(32, 32), alpha=1, title=None)
    miss = clm_hit_map(fmap, [[30.0, 30.0], [2.0, 2.0]], None, image_size=(32, 32), part_visible=[True, False])
    assert hit.startswith(PNG) and miss.startswith(PNG) and hit != miss
    image = np.full((32, 32, 3), 200, np.uint8)
    assert clm_hit_map(fmap, [2.0, 2.0], tmp_path / "clm.png", image=image).is_file()
    with pytest.raises(ValueError, match="part_visible must have 2"):
        clm_hit_map(fmap, [[1.0, 1.0], [2.0, 2.0]], None, part_visible=[True])


def _pixels_near(png: bytes, rgb: tuple[int, int, int], tol: int = 40) -> int:
    arr = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return int((np.abs(arr - np.array(rgb)).max(-1) <= tol).sum())


def test_verdict_sheet_colours_each_caption_by_its_verdict(tmp_path):
    bird = np.zeros((8, 8, 3), np.uint8)
    passing = verdict_sheet(
        [[bird, Image.fromarray(bird)]],
        [[("S+ found", True), ("species kept", True)]],
        ["Blue Jay + yellow crown color"],
        ["prompting only", "TDG reference"],
    )
    failing = verdict_sheet(
        [[bird, bird]],
        [[("S+ missing", False), ("species lost", False)]],
        ["Blue Jay + yellow crown color"],
        ["prompting only", "TDG reference"],
    )
    green, red = (0x1A, 0x7F, 0x37), (0xCF, 0x22, 0x2E)
    assert _pixels_near(passing, green) > 20 and _pixels_near(passing, red) == 0
    assert _pixels_near(failing, red) > 20 and _pixels_near(failing, green) == 0
    assert verdict_sheet([[bird]], [[("S+ found", True)]], ["a"], ["b"], tmp_path / "sheet.png", title="t").is_file()
    with pytest.raises(ValueError, match="one per column label"):
        verdict_sheet([[bird]], [[("S+", True)]], ["a"], ["b", "c"])
    with pytest.raises(ValueError, match="same number"):
        verdict_sheet([[bird]], [[("S+", True)]], ["a", "b"], ["c"])


def test_count_axes_tick_whole_numbers_only(monkeypatch):
    """A histogram of one reference bird (or one class) ticks 0, 1, never 0.2 birds."""
    import concept_grounding.curation.figures as figures
    import concept_grounding.plotting as plotting

    original, seen = plotting.count_axis, []

    def spy(ax, axis="y"):
        original(ax, axis)
        ax.figure.canvas.draw()
        seen.append(ax.get_yticks())

    monkeypatch.setattr(figures, "count_axis", spy)
    monkeypatch.setattr(plotting, "count_axis", spy)
    figures.faithfulness_figure([0.5])
    edges = np.linspace(-1, 1, 5)
    plotting.cgim_histograms({"histogram_counts": np.array([[[0, 1, 0, 0]], [[0, 0, 1, 0]]]), "histogram_edges": edges})
    assert len(seen) == 3 and all(float(t).is_integer() for ticks in seen for t in ticks)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    unpatched = FigureCanvasAgg(Figure(figsize=(2, 2))).figure.add_subplot(1, 1, 1)
    unpatched.bar([0], [1])
    unpatched.figure.canvas.draw()
    assert not all(float(t).is_integer() for t in unpatched.get_yticks())  # matplotlib's default: 0.2 steps
