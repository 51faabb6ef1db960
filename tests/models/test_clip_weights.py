"""No silent random weights: every CLIP-loading path refuses an open_clip
architecture without a weights tag, in one line naming the option, before building anything."""

from __future__ import annotations

import pytest

pytest.importorskip("open_clip")

import open_clip

from concept_grounding.cli import main
from concept_grounding.errors import ModelUnavailableError
from concept_grounding.hub import RANDOM_WEIGHTS, require_open_clip_weights, resolve_clip


@pytest.fixture
def built(monkeypatch):
    """Record every open_clip model build instead of building it (a ViT-B-32 takes seconds)."""
    calls: list[tuple[str, str | None]] = []

    def fake_create(name, pretrained=None, device="cpu", **_):
        calls.append((name, pretrained))
        raise RuntimeError("built")

    monkeypatch.setattr(open_clip, "create_model_and_transforms", fake_create)
    monkeypatch.setattr(open_clip, "create_model", fake_create)
    return calls


def test_require_weights_refuses_an_architecture_without_a_tag():
    with pytest.raises(ModelUnavailableError) as err:
        require_open_clip_weights("ViT-B-32", None)
    message = str(err.value)
    assert message.startswith("pretrained=: ") and "\n" not in message
    assert "openai" in message and "'random'" in message  # the architecture's own tags, and the way out
    assert require_open_clip_weights("ViT-B-32", "openai") == "openai"
    assert require_open_clip_weights("ViT-B-32", RANDOM_WEIGHTS) is None
    assert require_open_clip_weights("hf-hub:org/clip", None) is None  # the repository carries its weights


def test_load_clip_refuses_before_building(built):
    from concept_grounding.models.clip import load_clip

    with pytest.raises(ModelUnavailableError, match="names no weights"):
        load_clip("ViT-B-32")
    assert built == []
    for tag, passed in (("openai", "openai"), (RANDOM_WEIGHTS, None)):
        with pytest.raises(RuntimeError, match="built"):
            load_clip("ViT-B-32", pretrained=tag)
        assert built[-1] == ("ViT-B-32", passed)


def test_resolve_clip_names_the_option():
    with pytest.raises(ModelUnavailableError) as err:
        resolve_clip("ViT-B-32", "--model", None, "--pretrained")
    assert str(err.value).startswith("--pretrained: open_clip architecture 'ViT-B-32' names no weights")
    assert resolve_clip("ViT-B-32", "--model", RANDOM_WEIGHTS) == "ViT-B-32"


def test_sub_model_loader_refuses(built):
    from concept_grounding.evaluation import load_model

    with pytest.raises(ModelUnavailableError, match="pretrained="):
        load_model("ViT-B-32")
    assert built == []


@pytest.mark.parametrize(
    "argv",
    [
        ["sub", "--model", "ViT-B-32"],
        ["bench", "--model", "ViT-B-32"],
        ["explain", "--model", "ViT-B-32"],
        ["covar", "--model", "ViT-B-32"],
    ],
)
def test_commands_refuse_in_one_line(argv, built, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--pretrained" in err and "names no weights" in err
    assert built == [] and not (tmp_path / "out").exists()
