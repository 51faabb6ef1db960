"""One resolver for every model argument: each kind of bad ``--model`` reads the
same one line from every command that takes a model, before any model is loaded."""

from __future__ import annotations

import pytest
from test_docs_commands import config_of

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


#: every command that takes a model x the shipped names it loads: (argv, where the config keeps the model)
SHIPPED_WALK = {
    ("sub", "world-clip"): ["sub", "--model", "world-clip"],
    ("sub", "composition-clip"): ["sub", "--model", "composition-clip"],
    ("sub", "world-cbm"): ["sub", "--model", "world-cbm"],
    ("analyse", "world-posthoc-cbm"): ["analyse", "--model", "world-posthoc-cbm"],
    ("bench", "world-clip"): ["bench", "--model", "world-clip"],
    ("bench", "composition-clip"): ["bench", "--model", "composition-clip"],
    ("explain", "world-clip"): ["explain", "--model", "world-clip"],
    ("explain", "composition-clip"): ["explain", "--model", "composition-clip"],
    ("covar", "world-clip"): ["covar", "--model", "world-clip"],
    ("covar", "composition-clip"): ["covar", "--model", "composition-clip"],
    ("cci-bench", "world-clip composition-clip"): ["cci-bench", "--models", "world-clip", "composition-clip"],
    ("diagnose", "world-clip composition-clip"): [
        "diagnose",
        "--models",
        "world-clip",
        "composition-clip",
        "--images",
        "{tmp}",
    ],
    ("generate", "world"): ["generate", "--model", "world"],
    ("learn", "world"): ["learn", "--model", "world", "--method", "lora", "--images", "{tmp}/images"],
    ("conceptbed", "world"): ["conceptbed", "--model", "world"],
    ("filter", "world-judge"): ["filter", "--scorer", "world-judge", "--in", "{tmp}"],
    ("candidates", "world-judge"): ["candidates", "classes", "--classifier", "world-judge"],
}


@pytest.mark.parametrize("pair", list(SHIPPED_WALK), ids=" ".join)
def test_every_shipped_model_name_resolves_in_every_command_that_takes_a_model(pair, offline, tmp_path, monkeypatch):
    """Each shipped name reaches its command's config through the one resolver, offline, in seconds."""
    import time

    from PIL import Image

    (tmp_path / "images").mkdir()
    for i in range(8):  # a concept's training images (learn reads them before its model)
        Image.new("RGB", (32, 32), (i * 30, 0, 0)).save(tmp_path / "images" / f"{i}.png")
    start = time.monotonic()
    argv = [a.format(tmp=tmp_path) for a in SHIPPED_WALK[pair]] + ["--out", str(tmp_path / "out")]
    config = config_of(argv, monkeypatch)
    assert config is not None
    assert time.monotonic() - start < 30, pair
    assert not (tmp_path / "out").exists()


def test_the_walk_covers_every_shipped_name():
    from concept_grounding.shipped_models import SHIPPED_MODELS

    walked = {name for _, names in SHIPPED_WALK for name in names.split()}
    assert walked == set(SHIPPED_MODELS) - {"composition-judge"}  # no option names the composition judge


def test_each_loader_of_a_shipped_model_reads_the_folder_its_name_resolves_to():
    """The modules that load a shipped model by its folder agree with the resolver's table."""
    from concept_grounding.cci.loading import SHIPPED_WORLD_CLIP
    from concept_grounding.conceptbed.composition_clip import COMPOSITION_CLIP_DIR
    from concept_grounding.judge.composition import COMPOSITION_JUDGE_DIR
    from concept_grounding.judge.model import WORLD_JUDGE_DIR
    from concept_grounding.shipped_models import SHIPPED_MODELS
    from concept_grounding.space.tab_concepts import SHIPPED_POSTHOC
    from concept_grounding.space.tab_explain import SHIPPED_CLIP
    from concept_grounding.space.tab_sub import SHIPPED_MODEL
    from concept_grounding.worldflux.loader import WORLD_FLUX_DIR

    folders = {
        "world-clip": [SHIPPED_WORLD_CLIP, SHIPPED_CLIP],
        "composition-clip": [COMPOSITION_CLIP_DIR],
        "world-cbm": [SHIPPED_MODEL],
        "world-posthoc-cbm": [SHIPPED_POSTHOC],
        "world-judge": [WORLD_JUDGE_DIR],
        "composition-judge": [COMPOSITION_JUDGE_DIR],
        "world": [WORLD_FLUX_DIR],
    }
    assert set(folders) == set(SHIPPED_MODELS)
    for name, paths in folders.items():
        assert all(path.resolve() == SHIPPED_MODELS[name].path for path in paths), name


def test_a_shipped_name_of_another_kind_is_one_line_naming_what_the_option_takes(offline, tmp_path, capsys):
    from concept_grounding.shipped_models import SHIPPED_MODELS

    assert {m.kind for m in SHIPPED_MODELS.values()} == {"clip", "concept-model", "judge", "flux"}
    assert all(m.path.is_dir() and any(m.path.iterdir()) for m in SHIPPED_MODELS.values())
    assert main(["sub", "--model", "world-judge", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "concept-grounding: error: --model: 'world-judge' is the world judge (species and attributes), a judge; the "
        "shipped models this takes: composition-clip, world-cbm, world-clip, world-posthoc-cbm"
    ]
    assert main(["cci-bench", "--models", "world-cbm", "--out", str(tmp_path / "o")]) == 2
    assert (
        "--models: 'world-cbm' is the Space's concept bottleneck model, a concept-model; the shipped models this "
        "takes: composition-clip, world-clip" in capsys.readouterr().err
    )


@pytest.mark.slow
def test_sub_scores_the_shipped_world_clip_by_its_name(offline, tmp_path):
    """``sub --model world-clip`` (the name ``explain`` defaults to) runs end to end on the world's SUB export."""
    assert main(["sub", "--model", "world-clip", "--no-progress", "--out", str(tmp_path / "sub")]) == 0
    assert (tmp_path / "sub" / "report.md").read_text().startswith("# SUB accuracy of world-clip\n")
