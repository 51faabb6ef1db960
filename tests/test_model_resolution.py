"""One resolver for every model argument: each kind of bad ``--model`` reads the
same one line from every command that takes a model, before any model is loaded."""

from __future__ import annotations

import pytest

from concept_grounding.cli import main
from concept_grounding.errors import ModelUnavailableError, UsageError
from concept_grounding.hub import resolve_model_spec

#: each kind of bad model argument -> the message after ``<option>: ``
BAD = {
    "./no/such/folder": "no such folder or file './no/such/folder'; pass an existing folder or a Hub model id like "
    "'org/name'",
    "nope.py:build": "no such file 'nope.py' (of the factory 'nope.py:build')",
    "not a valid id": "'not a valid id' is neither an existing folder nor a valid Hub id ('org/name')",
    "someone/missing-model": "model 'someone/missing-model' is not in the local Hugging Face cache and "
    "HF_HUB_OFFLINE=1 forbids downloading it; download it where there is network (`hf download "
    "someone/missing-model`) and copy the Hugging Face cache (HF_HOME) here, or pass a local "
    "folder",
}
#: every command that takes a model: (its option, arguments besides it)
COMMANDS = {
    "sub": ("--model", []),
    "analyse": ("--model", []),
    "explain": ("--model", []),
    "covar": ("--model", []),
    "bench": ("--model", []),
    "cci-bench": ("--models", []),
    "diagnose": ("--models", ["--images", "{tmp}"]),
}


@pytest.fixture
def offline(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


@pytest.mark.parametrize("bad", list(BAD))
def test_each_bad_model_reads_the_same_from_every_command(bad, offline, tmp_path, capsys):
    lines = {}
    for command, (option, extra) in COMMANDS.items():
        rest = [a.format(tmp=tmp_path) for a in extra]
        assert main([command, option, bad, "--out", str(tmp_path / command), *rest]) == 2, command
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, (command, err)
        lines[command] = err[0]
    expected = {c: f"concept-grounding: error: {o}: {BAD[bad]}" for c, (o, _) in COMMANDS.items()}
    assert lines == expected
    assert not any((tmp_path / c).exists() for c in COMMANDS)  # refused before any work wrote anything


def test_the_library_reads_the_same(offline, tmp_path):
    from concept_grounding.evaluation import load_model
    from concept_grounding.models.clip import load_named_clip

    for bad, message in BAD.items():
        for load in (load_model, load_named_clip):
            with pytest.raises(UsageError) as err:
                load(bad)
            assert str(err.value) == f"--model: {message}", load


def test_the_resolver_tells_the_kinds_apart(tmp_path, offline):
    (tmp_path / "factory.py").write_text("def build():\n    return None\n")
    folder = resolve_model_spec(str(tmp_path))
    assert (folder.kind, folder.target) == ("folder", str(tmp_path.resolve()))
    factory = resolve_model_spec(f"{tmp_path / 'factory.py'}:build")
    assert (factory.kind, factory.target) == ("factory", f"{(tmp_path / 'factory.py').resolve()}:build")
    assert resolve_model_spec("concept_grounding.testing:tiny_open_clip").kind == "factory"
    with pytest.raises(ModelUnavailableError, match="^--model: no module 'no_such_module_x'"):
        resolve_model_spec("no_such_module_x:build")
    with pytest.raises(UsageError, match="is a 'file.py:factory' .*; this takes a local folder or file or a CLIP name"):
        resolve_model_spec(f"{tmp_path / 'factory.py'}:build", accept=("folder", "name"))
    with pytest.raises(ModelUnavailableError, match="names no weights"):
        resolve_model_spec("ViT-B-32")


FACTORY = """
import torch


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 32)), "sub"
"""


def test_evaluate_sub_wraps_moves_and_names_a_model_argument_once(tmp_path, monkeypatch):
    """The walk of a ``--model`` through ``evaluate_sub``: one resolution, one wrap, one move,
    one name (it was wrapped twice, moved twice and named twice)."""
    from concept_grounding import hub
    from concept_grounding.evaluation import adapters, evaluate_sub, load_sub_source, loading

    (tmp_path / "tiny.py").write_text(FACTORY)
    calls = {"resolve": 0, "wrap": 0, "move": 0}

    def counted(name, real):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(hub, "_check_factory", counted("resolve", hub._check_factory))
    monkeypatch.setattr(loading, "as_sub_model", counted("wrap", loading.as_sub_model))
    monkeypatch.setattr(adapters.BinaryConceptModel, "to", counted("move", adapters.BinaryConceptModel.to))
    spec = resolve_model_spec(f"{tmp_path / 'tiny.py'}:build")  # the command's early check
    sub = load_sub_source(image_size=32, classes=("017.Cardinal",))
    result = evaluate_sub(spec, sub.select(range(6)), device="cpu", normalize=False, image_size=32, progress=False)
    assert calls == {"resolve": 1, "wrap": 1, "move": 1}
    assert result.model == f"{tmp_path / 'tiny.py'}:build" and result.num_images == 6


#: a Hub model of any library (family "hub"): a factory is not one of its kinds, so it reads as a bad id
HUB_BAD = {**BAD, "nope.py:build": "'nope.py:build' is neither an existing folder nor a valid Hub id ('org/name')"}
#: the other model arguments, resolved as Hub models: what runs, and the option it names
HUB_COMMANDS = {
    "Flux pipeline": (["generate", "--model", "{bad}", "--out", "{tmp}/generate"], "--model"),
    "VLM judge": (
        ["filter", "--validate-on-world", "--scorer", "vlm", "--vlm-model", "{bad}", "--out", "{tmp}/filter"],
        "--vlm-model",
    ),
    "detector": (["covar", "--detector", "{bad}", "--segmenter", "someone/sam", "--out", "{tmp}/covar"], "--detector"),
    "segmenter": (["covar", "--detector", "{tmp}", "--segmenter", "{bad}", "--out", "{tmp}/covar"], "--segmenter"),
}


@pytest.mark.parametrize("family", list(HUB_COMMANDS))
def test_every_hub_model_argument_is_one_line_within_seconds(family, offline, tmp_path, capsys):
    """A Flux name, a VLM, a detector and a segmenter go through the same resolver: each bad
    argument is one line naming the flag, offline, before any model library loads."""
    import time

    argv, option = HUB_COMMANDS[family]
    for bad, message in HUB_BAD.items():
        start = time.monotonic()
        assert main([a.format(bad=bad, tmp=tmp_path) for a in argv]) == 2, bad
        assert time.monotonic() - start < 10, bad
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"concept-grounding: error: {option}: {message}"], (family, err)
    assert not any(p.is_dir() for p in tmp_path.iterdir())  # nothing written


def test_the_library_resolves_hub_models_the_same_way(offline, tmp_path):
    """The classifier, the grounded segmenter and a named Flux read the resolver's line too."""
    from concept_grounding.cci.segment import GroundedSegmenter
    from concept_grounding.curation.candidates import load_classifier
    from concept_grounding.tdg.sources import PretrainedFlux

    loaders = {
        "--classifier": lambda bad: load_classifier(bad, ["017.Cardinal"]),
        "--detector": lambda bad: GroundedSegmenter.from_pretrained(bad, str(tmp_path)),
        "--segmenter": lambda bad: GroundedSegmenter.from_pretrained(str(tmp_path), bad),
        "--model": lambda bad: PretrainedFlux(bad).resolve(),
    }
    for option, load in loaders.items():
        for bad, message in HUB_BAD.items():
            with pytest.raises(UsageError) as err:
                load(bad)
            assert str(err.value) == f"{option}: {message}", (option, bad)


def test_hub_families_tell_models_and_datasets_apart(offline, tmp_path):
    assert resolve_model_spec(str(tmp_path), "--vlm-model", family="hub").target == str(tmp_path.resolve())
    with pytest.raises(
        ModelUnavailableError, match="^--sub: dataset 'someone/sub' is not in the local .* --repo-type dataset"
    ):
        resolve_model_spec("someone/sub", "--sub", family="dataset")
    with pytest.raises(ModelUnavailableError, match="a Hub dataset id like 'org/name'$"):
        resolve_model_spec("./gone/sub", "--sub", family="dataset")
    (tmp_path / "f.py").write_text("def build():\n    return None\n")
    factory = f"{tmp_path / 'f.py'}:build"  # a factory only where the caller takes one
    assert resolve_model_spec(factory, family="hub", accept=("folder", "factory", "name")).kind == "factory"
    with pytest.raises(UsageError, match="is a local folder or file; this takes a Hub model id$"):
        resolve_model_spec(str(tmp_path), "--x", family="hub", accept=("name",))
