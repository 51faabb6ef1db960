"""The ``generate`` and ``filter`` jobs (``tdg.generate_job``, ``tdg.filter_job``): the functions
write exactly what the commands write, the commands only map arguments onto configs, cheap
checks come before the model, accelerate's shard is honoured, and the demo calls the jobs
without the command line."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from concept_grounding import demo_config
from concept_grounding.cli import main
from concept_grounding.commands import filter as filter_command
from concept_grounding.commands import generate as generate_command
from concept_grounding.errors import UsageError
from concept_grounding.tdg.filter_job import FilterConfig, read_generated_records, run_filter
from concept_grounding.tdg.generate_config import GenerateConfig
from concept_grounding.tdg.generate_job import run_generate
from concept_grounding.tdg.plan import Pairing
from concept_grounding.tdg.resume import MANIFEST_ARGUMENTS
from concept_grounding.tdg.sources import ClassTablePairings, FluxModel, PairingsFile, PretrainedFlux
from concept_grounding.tdg.tiny import TINY_MODEL, TinyFlux
from concept_grounding.worldflux.source import WorldFlux, world_pairings

#: two pairings x 2 images of the tiny Flux at 16 px, 2 steps
ARGS = [
    "--tiny",
    "--classes",
    "Cardinal",
    "Blue Jay",
    "--attributes",
    "has_breast_pattern::spotted",
    "--images-per-pairing",
    "2",
    "--steps",
    "2",
    "--size",
    "16",
    "--batch-size",
    "2",
    "--save-guides",
]


def _config(out: Path, **changes) -> GenerateConfig:
    config = GenerateConfig(
        out=out,
        model=TinyFlux(),
        pairings=world_pairings(),
        classes=("017.Cardinal", "073.Blue_Jay"),
        attributes=("has_breast_pattern::spotted",),
        images_per_pairing=2,
        num_inference_steps=2,
        size=16,
        batch_size=2,
        save_guides=True,
    )
    return replace(config, **changes)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _job_files(command_out: Path) -> dict[str, bytes]:
    """What the job wrote into a folder the command wrote: the command adds its contact sheet (drawn a layer
    above tdg), checked here once."""
    files = _files(command_out)
    assert files.pop(".contact_sheet.png").startswith(b"\x89PNG")
    return files


def _parse(command, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture(scope="module")
def by_command(tmp_path_factory):
    out = tmp_path_factory.mktemp("command") / "gen"
    assert main(["generate", "--out", str(out), *ARGS]) == 0
    return out


# ------------------------------------------------------------------------------ generate
def test_command_maps_its_arguments_onto_the_config(tmp_path):
    out = tmp_path / "gen"
    assert generate_command.config_from_args(_parse(generate_command, ["--out", str(out), *ARGS])) == _config(out)
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("017.Cardinal,has_crown_color::black\n")
    args = _parse(
        generate_command,
        [
            "--out",
            str(out),
            "--model",
            "someone/flux",
            "--dtype",
            "float16",
            "--pairings",
            str(pairs),
            "--t-max",
            "0.5",
        ],
    )
    config = generate_command.config_from_args(args)
    assert config.model == PretrainedFlux("someone/flux", "float16") and config.pairings == PairingsFile(pairs)
    assert config.classes is None and config.attributes is None and config.t_max == 0.5
    assert generate_command.config_from_args(_parse(generate_command, ["--out", str(out)])).model == WorldFlux()


def test_run_generate_writes_what_the_command_writes(by_command, tmp_path, capsys):
    result = run_generate(_config(tmp_path / "gen"))
    assert (result.written, result.planned, result.metadata) == (4, 4, tmp_path / "gen" / "metadata.jsonl")
    assert result.model.name == TINY_MODEL and result.model.dtype == "float32"
    assert _files(tmp_path / "gen") == _job_files(by_command)  # images, guides, sidecars, manifest, metadata
    assert len([f for f in _job_files(by_command) if f.endswith(".png") and not f.startswith(".guides")]) == 4
    # a second run resumes: nothing new, the same files
    assert run_generate(_config(tmp_path / "gen")).written == 0
    assert _files(tmp_path / "gen") == _job_files(by_command)


def test_resume_with_other_settings_names_the_arguments_before_loading(by_command, tmp_path):
    import shutil

    folder = tmp_path / "gen"
    shutil.copytree(by_command, folder)

    def never() -> None:
        raise AssertionError("the model must not load")

    class Spy:
        def resolve(self) -> FluxModel:
            return FluxModel(TINY_MODEL, "float32", 32, 32, never)

    with pytest.raises(UsageError, match=r"num_inference_steps \(--steps\): 2 in the folder, 3 now"):
        run_generate(_config(folder, model=Spy(), num_inference_steps=3))
    assert MANIFEST_ARGUMENTS["num_inference_steps"] == "--steps"
    assert _files(folder) == _files(by_command)  # nothing written


def test_cheap_checks_come_before_the_model_is_resolved(tmp_path):
    resolved = []

    class Spy:
        def resolve(self) -> FluxModel:
            resolved.append(1)
            raise AssertionError("resolved too early")

    with pytest.raises(UsageError, match=r"t_min/t_max: t_min=0.9 is above t_max=0.2"):  # the Python API names keywords
        run_generate(_config(tmp_path, model=Spy(), t_min=0.9, t_max=0.2))
    with pytest.raises(
        UsageError,
        match=r"classes: \['001.Black_footed_Albatross'\] not among the classes of "
        r"the bird world \(33 SUB classes\)",
    ):
        run_generate(_config(tmp_path, model=Spy(), classes=("001.Black_footed_Albatross",)))
    with pytest.raises(UsageError, match="no \\(class, attribute\\) pairing is left"):
        run_generate(
            _config(
                tmp_path,
                model=Spy(),
                classes=("073.Blue_Jay",),  # a Blue Jay has a black crown
                attributes=("has_crown_color::black",),
            )
        )
    assert resolved == [] and not any(tmp_path.iterdir())


def test_class_table_and_file_sources(tmp_path):
    table = type("Table", (), {"class_names": ["017.Cardinal"], "class_attributes": np.zeros((1, 312), np.uint8)})
    planned = ClassTablePairings(lambda: table, "a table of {num_classes} class").plan(["has_crown_color::black"])
    assert planned.pairings == [Pairing("017.Cardinal", "has_crown_color::black")]
    assert planned.description == "a table of 1 class" and list(planned.class_names) == ["017.Cardinal"]
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("073.Blue_Jay,has_crown_color::red\n017.Cardinal,has_crown_color::black\n")
    planned = PairingsFile(pairs).plan(None)
    assert [p.reference_class for p in planned.pairings] == ["073.Blue_Jay", "017.Cardinal"]
    assert planned.class_names == ["017.Cardinal", "073.Blue_Jay"]
    assert planned.description == f"the pairings file {pairs}"


def test_each_process_writes_its_shard_and_only_the_main_process_merges(by_command, tmp_path, monkeypatch):
    """Under ``accelerate launch`` the job takes its shard from ``PartialState``; two shards
    written one after the other give the single-process folder."""
    import accelerate

    class FakeState:
        index = 0

        def __init__(self, **kwargs) -> None:
            self.device, self.num_processes = "cpu", 2
            self.process_index = FakeState.index
            self.is_main_process = self.is_local_main_process = FakeState.index == 0

        def wait_for_everyone(self) -> None:
            pass

    monkeypatch.setattr(accelerate, "PartialState", FakeState)
    FakeState.index = 1
    second = run_generate(_config(tmp_path / "gen"))
    assert second.metadata is None and second.written == 2 and not (tmp_path / "gen" / "metadata.jsonl").exists()
    FakeState.index = 0
    first = run_generate(_config(tmp_path / "gen"))
    assert first.written == 2 and first.metadata is not None
    assert _files(tmp_path / "gen") == _job_files(by_command)


@pytest.mark.slow
def test_two_cpu_processes_under_torchrun_split_the_work_and_give_the_one_process_folder(by_command, tmp_path):
    """Without CUDA, ``PartialState`` must be made with ``cpu=True``: before, each process under
    ``torch.distributed.run`` thought it was alone and generated (and wrote) the whole plan."""
    import os
    import subprocess
    import sys

    out = tmp_path / "gen"
    launch = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "-m",
        "concept_grounding.cli",
        "generate",
        "--out",
        str(out),
        *ARGS,
    ]
    done = subprocess.run(
        launch, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("wrote 2 new images (4 planned)") == 1  # the main process prints; each wrote 2
    assert _files(out) == _files(by_command)  # the command's folder, the contact sheet too


# ------------------------------------------------------------------------------ filter
def test_run_filter_writes_what_the_command_writes(by_command, tmp_path, capsys):
    assert (
        main(
            [
                "filter",
                "--in",
                str(by_command),
                "--out",
                str(tmp_path / "command"),
                "--scorer",
                "tiny-clip",
                "--keep-fraction",
                "0.5",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    result = run_filter(FilterConfig(input=by_command, out=tmp_path / "job", scorer="tiny-clip", keep_fraction=0.5))
    assert _files(tmp_path / "job") == _files(tmp_path / "command")
    report = tmp_path / "command" / "filter_report.md"
    kept_line, next_line = printed.strip().splitlines()
    assert kept_line == f"kept {len(result.kept)} of 4 images; report: {report}"
    if result.kept:
        assert next_line.startswith(f"next: concept-grounding annotate --candidates {tmp_path / 'command'} --db ")
    else:  # nothing kept: the sheet to read, and the generated folder to annotate instead
        assert next_line.startswith(f"next: open {tmp_path / 'command' / 'filter_sheet.png'}   # nothing kept")
        assert f"annotate --candidates {by_command} --db " in next_line
    assert result.generated == 4 and result.report["total_generated"] == 4
    assert result.metadata.read_text().count("\n") == len(result.kept)


def test_filter_command_maps_its_arguments_onto_the_config(tmp_path):
    args = _parse(
        filter_command,
        [
            "--in",
            str(tmp_path),
            "--out",
            str(tmp_path / "o"),
            "--scorer",
            "clip",
            "--clip-model",
            "ViT-B-16",
            "--keep-fraction",
            "0.25",
        ],
    )
    config = filter_command.config_from_args(args)
    assert config == FilterConfig(
        input=tmp_path, out=tmp_path / "o", scorer="clip", clip_model="ViT-B-16", keep_fraction=0.25
    )  # judge_loader is not compared
    assert config.judge_loader is not None


def test_oracle_folder_goes_through_the_injected_loader(by_command, tmp_path):
    """A concept-model folder is loaded by ``judge_loader`` (tdg may not import ``judge``);
    the oracle's probabilities decide what is kept (known answer: target probability 0.9)."""
    from concept_grounding import load_vocabulary

    vocab = load_vocabulary()
    target = vocab.attribute_index("has_breast_pattern::spotted")
    folder = tmp_path / "model"
    folder.mkdir()
    loaded = []

    def loader(path: str):
        loaded.append(path)

        def predict(images):
            p = np.full((len(images), 312), 0.05)
            p[:, target] = 0.9
            return p

        return predict

    result = run_filter(
        FilterConfig(
            input=by_command,
            out=tmp_path / "out",
            scorer="oracle",
            oracle=str(folder),
            keep_fraction=0.5,
            judge_loader=loader,
        )
    )
    assert loaded == [str(folder)] and len(result.kept) == 2  # half of each pairing's 2 images
    others = len(vocab.groups["breast_pattern"]) - 1  # option scores: 0.9, 0.05 per other value, "Other" = prod(1 - p)
    expected = 0.9 / (0.9 + others * 0.05 + 0.1 * 0.95**others)
    assert [r["target_probability"] for r in result.kept] == pytest.approx([expected, expected])
    with pytest.raises(ValueError, match="judge_loader: needed"):
        run_filter(FilterConfig(input=by_command, out=tmp_path / "o2", scorer="oracle", oracle=str(folder)))


def test_records_are_checked_before_the_scorer_is_built(tmp_path):
    (tmp_path / "metadata.jsonl").write_text(
        '{"file_name": "gone.png", "reference_class": "017.Cardinal", "target_attribute": "has_crown_color::black"}\n'
    )
    with pytest.raises(UsageError, match="line 1: image 'gone.png' not found"):
        read_generated_records(tmp_path)
    with pytest.raises(UsageError, match="line 1: image 'gone.png' not found"):  # not the --oracle error
        run_filter(FilterConfig(input=tmp_path, out=tmp_path / "o", scorer="oracle"))
    with pytest.raises(ValueError, match="scorer must be one of"):
        FilterConfig(input=tmp_path, out=tmp_path, scorer="gpt")


# ------------------------------------------------------------------------------ demo
def test_demo_builds_the_configs_the_old_command_lines_gave(tmp_path):
    """The TDG stage's config equals what its former ``generate`` argv parsed to (the pairings are
    the demo's named constants: the Space's opening pairing first)."""
    for quick, per_pairing, steps in ((True, "1", "4"), (False, "4", "20")):
        args = argparse.Namespace(quick=quick, seed=3)
        argv = [
            "--out",
            str(tmp_path),
            "--save-guides",
            "--seed",
            "3",
            "--classes",
            *demo_config.TDG_CLASSES,
            "--attributes",
            *demo_config.TDG_ATTRIBUTES,
            "--images-per-pairing",
            per_pairing,
            "--steps",
            steps,
            "--size",
            "32",
        ]
        assert demo_config.generate_config(tmp_path, args) == generate_command.config_from_args(
            _parse(generate_command, argv)
        )
    tiny = demo_config.filter_config(tmp_path, tmp_path / "f", tmp_path / "no-bench-model")
    assert tiny == FilterConfig(input=tmp_path, out=tmp_path / "f", scorer="tiny-clip")
    oracle = demo_config.filter_config(tmp_path, tmp_path / "f", tmp_path)
    assert (oracle.scorer, oracle.oracle, oracle.judge_loader.__name__) == ("oracle", str(tmp_path), "attribute_judge")


def test_demo_does_not_import_the_command_line():
    import grimp

    graph = grimp.build_graph("concept_grounding", cache_dir=None)
    imported = {
        m
        for module in ("concept_grounding.demo", "concept_grounding.demo_stages", "concept_grounding.demo_config")
        for m in graph.find_modules_directly_imported_by(module)
    }
    assert "concept_grounding.tdg.generate_job" in imported and "concept_grounding.tdg.filter_job" in imported
    assert not {
        m
        for m in imported
        if m == "concept_grounding.cli"
        or (m.startswith("concept_grounding.commands.") and m != "concept_grounding.commands._types")
    }


def test_world_flux_settings_are_resolved_without_loading_and_match_the_loaded_pipeline():
    import sys

    model = WorldFlux().resolve()
    assert (model.name, model.dtype, model.default_size) == ("world", "float32", 32)
    assert model.extra == {"true_cfg_scale": 4.0, "negative_prompt": ""}
    pipe = model.load()
    assert "diffusers" in sys.modules and type(pipe).__name__ == "TiedDiffusionPipeline"
    assert model.max_sequence_length == pipe.tokenizer_2.model_max_length
    assert int(pipe.vae.config.sample_size) == model.default_size


class _Validation:
    """A scorer validation report as ``FilterConfig.validate`` returns it."""

    def to_dict(self) -> dict:
        return {"auroc": 1.0}

    def to_markdown(self) -> str:
        return "| AUROC |\n| --- |\n| 1.000 |"


def test_filter_validates_its_scorer_first_and_saves_the_validation(by_command, tmp_path):
    from concept_grounding.tdg.filter_job import filter_folder

    scored = []

    def validate(scorer):
        scored.append(scorer)
        return _Validation()

    config = FilterConfig(
        input=by_command, out=tmp_path / "f", scorer="tiny-clip", keep_fraction=0.5, validate=validate
    )
    result = run_filter(config)
    assert len(scored) == 1 and isinstance(result.validation, _Validation)
    assert (tmp_path / "f" / "scorer_validation.json").read_text().strip() == '{\n "auroc": 1.0\n}'
    assert (tmp_path / "f" / "filter_report.md").is_file() and result.generated == 4
    only = filter_folder(replace(config, input=None))  # validation only: nothing is filtered
    assert only.save(tmp_path / "v") == tmp_path / "v" / "scorer_validation.md"
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == ["scorer_validation.json", "scorer_validation.md"]
    with pytest.raises(UsageError, match="is required"):
        filter_folder(replace(config, input=None, validate=None))
