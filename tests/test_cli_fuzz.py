"""Fuzz table: bad invocations of every command exit 2 with one line naming the argument or file.

Each row is ``(argv, text the error must contain)``. ``{name}`` in an argument is a
path from the ``paths`` fixture (missing files, a non-UTF-8 file, an empty folder, a
broken CUB folder, a generated folder made with other settings, ...). Rows run
in-process through :func:`concept_grounding.cli.main` (fast); a few also run as real
subprocesses to check the process's exit status and that no traceback is printed.
The Hub is never contacted: the module runs with ``HF_HUB_OFFLINE`` and an empty cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from concept_grounding.cli import main

G = ["generate", "--out", "{out}", "--tiny"]
F = ["filter", "--out", "{out}"]
E = ["explain", "--out", "{out}"]
C = ["covar", "--out", "{out}"]
W = ["world", "--out", "{out}"]
B = ["bench", "--out", "{out}"]
D = ["demo", "--out", "{out}"]

#: (argv, text the error line must contain)
CASES: list[tuple[list[str], str]] = [
    # ---- generate: values refused at parse time
    (G + ["--steps", "0"], "argument --steps: must be an integer >= 1, got '0'"),
    (G + ["--steps", "-3"], "argument --steps"),
    (G + ["--steps", "abc"], "argument --steps"),
    (G + ["--steps", "2.5"], "argument --steps"),
    (G + ["--guidance-scale", "nan"], "argument --guidance-scale: must be a number in [0, inf), got 'nan'"),
    (G + ["--guidance-scale", "inf"], "argument --guidance-scale"),
    (G + ["--guidance-scale", "-1"], "argument --guidance-scale"),
    (G + ["--size", "7"], "argument --size: must be a multiple of 16"),
    (G + ["--size", "0"], "argument --size"),
    (G + ["--size", "-64"], "argument --size"),
    (G + ["--size", "1000"], "argument --size"),
    (G + ["--images-per-pairing", "0"], "argument --images-per-pairing"),
    (G + ["--images-per-pairing", "-1"], "argument --images-per-pairing"),
    (G + ["--batch-size", "0"], "argument --batch-size"),
    (G + ["--max-images", "0"], "argument --max-images"),
    (G + ["--t-min", "1.5"], "argument --t-min"),
    (G + ["--t-max", "-0.1"], "argument --t-max"),
    (G + ["--k", "0"], "argument --k"),
    (G + ["--k", "nan"], "argument --k"),
    (G + ["--classes", "Blue Jey"], "argument --classes: unknown CUB class 'Blue Jey' (did you mean 'Blue Jay'"),
    (G + ["--classes", "Dodo"], "argument --classes: unknown CUB class 'Dodo'"),
    (G + ["--attributes", "has_crown_color::plaid"], "argument --attributes: unknown CUB attribute"),
    (G + ["--attributes", "crown"], "argument --attributes"),
    (G + ["--method", "diffusion"], "argument --method"),
    (G + ["--dtype", "float8"], "argument --dtype"),
    (G + ["--cache", "sea"], "argument --cache: unknown cache 'sea'; choose from first-block"),
    (G + ["--cache", "first-blok"], "argument --cache: unknown cache 'first-blok' (did you mean 'first-block'"),
    (G + ["--cache", "first-block:thresh=0.2"], "argument --cache: FirstBlockCacheConfig has no option 'thresh'"),
    (G + ["--cache", "first-block:0.2"], "argument --cache: expected option=value"),
    (
        G + ["--cache", "faster:is_guidance_distilled=false"],
        "argument --cache: faster: is_guidance_distilled must stay True",
    ),
    (G + ["--pairings", "{missing}"], "argument --pairings: no such file"),
    (G + ["--pairings", "{empty_dir}"], "argument --pairings: not a file"),
    (G + ["--cub-root", "{missing}"], "argument --cub-root: no such folder"),
    (G + ["--cub-root", "{text_file}"], "argument --cub-root: not a folder"),
    (G + ["--cub-root", "{empty_dir}", "--pairings", "{pairs_ok}"], "argument --pairings: not allowed with"),
    (["generate", "--tiny"], "the following arguments are required: --out"),
    (G + ["--seed", "x"], "argument --seed"),
    (G + ["--stepz", "3"], "unrecognized arguments: --stepz"),
    (["generate", "--out", "{text_file}", "--tiny"], "argument --out: exists and is not a folder"),
    # ---- generate: found while loading, before the model
    (G + ["--pairings", "{latin1}"], "latin1.txt, line 2: not UTF-8 text"),
    (G + ["--pairings", "{pairs_three}"], "pairs_three.txt, line 1: expected 'class,attribute'"),
    (G + ["--pairings", "{pairs_bad_class}"], "pairs_bad_class.txt, line 2: unknown CUB class 'Blue Jey'"),
    (G + ["--pairings", "{pairs_bad_attr}"], "pairs_bad_attr.txt, line 1: unknown CUB attribute"),
    (G + ["--pairings", "{pairs_bad_json}"], "pairs_bad_json.txt, line 1: expected a JSON object"),
    (G + ["--t-min", "0.9", "--t-max", "0.2"], "--t-min/--t-max: --t-min 0.9 is above --t-max 0.2"),
    (G + ["--classes", "001.Black_footed_Albatross"], "--classes: ['001.Black_footed_Albatross'] not among"),
    (G + ["--classes", "Blue Jay", "--attributes", "has_crown_color::black"], "no (class, attribute) pairing"),
    (["generate", "--out", "{out}", "--model", "{missing}/flux"], "--model: no such folder or file"),
    (
        ["generate", "--out", "{out}", "--model", "someone/not-cached-flux"],
        "--model: model 'someone/not-cached-flux' is not in the local Hugging Face cache",
    ),
    (["generate", "--out", "{out}", "--model", "not a model id"], "--model: 'not a model id' is neither"),
    (
        [
            "generate",
            "--out",
            "{resumed}",
            "--tiny",
            "--seed",
            "1",
            "--classes",
            "Cardinal",
            "--attributes",
            "has_crown_color::black",
            "--images-per-pairing",
            "1",
            "--steps",
            "2",
            "--size",
            "32",
        ],
        "Differing: seed (--seed): 5 in the folder, 1 now; rerun with the folder's settings",
    ),
    (
        [
            "generate",
            "--out",
            "{resumed}",
            "--tiny",
            "--seed",
            "5",
            "--classes",
            "Cardinal",
            "--attributes",
            "has_crown_color::black",
            "--images-per-pairing",
            "1",
            "--steps",
            "2",
            "--size",
            "32",
            "--cache",
            "text-kv",
        ],
        'Differing: cache (--cache): null in the folder, {{"name": "text-kv"}} now',
    ),
    (G + ["--out", "{old_parts}"], "holds generated images but no manifest"),
    (G + ["--cub-root", "{broken_cub}"], "missing file(s)"),
    # ---- filter
    (F + ["--in", "{missing}"], "argument --in: no such folder"),
    (F + ["--in", "{text_file}"], "argument --in: not a folder"),
    (F + ["--in", "{empty_dir}"], "--in: "),
    (F + ["--in", "{gen_ok}", "--keep-fraction", "0"], "argument --keep-fraction: must be a number in (0, 1]"),
    (F + ["--in", "{gen_ok}", "--keep-fraction", "1.5"], "argument --keep-fraction"),
    (F + ["--in", "{gen_ok}", "--keep-fraction", "nan"], "argument --keep-fraction"),
    (F + ["--in", "{gen_ok}", "--keep-fraction", "-0.1"], "argument --keep-fraction"),
    (F + ["--in", "{gen_ok}", "--scorer", "gpt"], "argument --scorer"),
    (F + ["--in", "{meta_bad_json}"], "metadata.jsonl, line 2: not valid JSON"),
    (F + ["--in", "{meta_latin1}"], "metadata.jsonl, line 1: not UTF-8 text"),
    (F + ["--in", "{meta_missing_key}"], "metadata.jsonl, line 1: row lacks ['target_attribute']"),
    (F + ["--in", "{meta_missing_image}"], "metadata.jsonl, line 1: image 'gone.png' not found"),
    (F + ["--in", "{meta_empty}"], "metadata.jsonl: lists no images"),
    (F + ["--in", "{gen_ok}", "--scorer", "oracle"], "--oracle: must be a saved concept model folder"),
    (F + ["--in", "{gen_ok}", "--scorer", "oracle", "--oracle", "no_such_module_xyz:fn"], "--oracle: cannot import"),
    (F + ["--in", "{gen_ok}", "--scorer", "oracle", "--oracle", "os:no_such_function"], "--oracle: cannot import"),
    (F + ["--in", "{gen_ok}", "--vlm-model", "{missing}/vlm"], "--vlm-model: no such folder or file"),
    (F + ["--in", "{gen_ok}", "--vlm-model", "someone/not-cached-vlm"], "--vlm-model: model 'someone/not-cached-vlm'"),
    (F + ["--in", "{gen_ok}", "--scorer", "clip", "--clip-model", "ViT-Q-99"], "--clip-model: unknown open_clip"),
    (
        F + ["--in", "{gen_ok}", "--scorer", "clip", "--clip-pretrained", "nosuchtag"],
        "--clip-pretrained: open_clip has no weights 'nosuchtag'",
    ),
    (F + ["--in", "{gen_ok}", "--scorer", "clip"], "--clip-model: model 'timm/"),
    (["filter", "--in", "{gen_ok}"], "the following arguments are required: --out"),
    # ---- explain
    (E + ["--num", "0"], "argument --num"),
    (E + ["--size", "7"], "argument --size: must be a multiple of 8 that is >= 32"),
    (E + ["--size", "36"], "argument --size"),
    (E + ["--size", "16"], "argument --size"),
    (E + ["--clusters", "0"], "argument --clusters"),
    (E + ["--images", "{missing}"], "argument --images: no such file"),
    (E + ["--images", "{text_file}", "--texts", "a bird"], "--images: {text_file}: not an image PIL can read"),
    (E + ["--images", "{png}"], "--texts: give one text per image"),
    (E + ["--texts", "a", "b", "c"], "--texts: 3 texts for 4 images"),
    (E + ["--method", "slow"], "argument --method"),
    (E + ["--model", "{missing}/clip"], "--model: no such folder or file"),
    (E + ["--model", "someone/not-cached-clip"], "--model: model 'someone/not-cached-clip'"),
    # ---- covar
    (C + ["--threshold", "2"], "argument --threshold: must be a number in [0, 1], got '2'"),
    (C + ["--threshold", "-0.5"], "argument --threshold"),
    (C + ["--threshold", "nan"], "argument --threshold"),
    (C + ["--judge-threshold", "1.5"], "argument --judge-threshold"),
    (C + ["--objects", "0"], "argument --objects"),
    (C + ["--backgrounds", "-1"], "argument --backgrounds"),
    (C + ["--clusters", "0"], "argument --clusters"),
    (C + ["--steps", "0"], "argument --steps"),
    (C + ["--size", "20"], "argument --size"),
    (C + ["--inpaint-size", "100"], "argument --inpaint-size: must be a multiple of 8"),
    (C + ["--inpaint-steps", "0"], "argument --inpaint-steps"),
    (C + ["--judge", "magic"], "argument --judge"),
    (C + ["--model", "{missing}/clip"], "--model: no such folder or file"),
    (C + ["--inpaint-model", "{missing}/sd"], "--inpaint-model: no such folder or file"),
    (C + ["--inpaint-model", "someone/not-cached-inpaint"], "--inpaint-model: model 'someone/not-cached-inpaint'"),
    # ---- world
    (W + ["--size", "16"], "argument --size: must be an integer >= 32"),
    (W + ["--size", "big"], "argument --size"),
    (W + ["--train-per-class", "-1"], "argument --train-per-class"),
    (W + ["--deviation-rate", "1.5"], "argument --deviation-rate"),
    (W + ["--classes", "Blue Jey"], "argument --classes: unknown CUB class 'Blue Jey'"),
    (W + ["--per-pairing", "0"], "argument --per-pairing"),
    (W + ["--format", "png"], "argument --format"),
    (["world", "--size", "64"], "the following arguments are required: --out"),
    # ---- bench
    (B + ["--size", "8"], "argument --size"),
    (B + ["--image-size", "8"], "argument --image-size"),  # the deprecated spelling keeps the validator
    (B + ["--epochs", "0"], "argument --epochs"),
    (B + ["--models", "CBM (nope)"], "argument --models: unknown model variant 'CBM (nope)'"),
    (B + ["--concepts", "some"], "argument --concepts"),
    (B + ["--cub-root", "{missing}"], "argument --cub-root: no such folder"),
    (B + ["--cub-root", "{empty_dir}"], "--sub: --cub-root needs a SUB source"),
    (B + ["--sub", "{empty_dir}"], "not a SUB copy we can read"),
    (B + ["--classes", "Dodo"], "argument --classes"),
    (B + ["--classes", "017.Cardinal"], "--classes: a bench run needs at least 2 different classes"),
    (B + ["--classes", "017.Cardinal", "017.Cardinal"], "--classes: a bench run needs at least 2"),
    (B + ["--concept-loss-weight", "nan"], "argument --concept-loss-weight"),
    (B + ["--min-class-count", "-1"], "argument --min-class-count"),
    (B + ["--model", "{missing}/clip"], "--model: no such folder or file"),
    (B + ["--cub-root", "{empty_dir}", "--sub", "{missing}/sub"], "--sub: no such folder or file"),
    (B + ["--cub-root", "{empty_dir}", "--sub", "someone/not-cached-sub"], "--sub: dataset 'someone/not-cached-sub'"),
    # ---- space
    (["space", "--port", "99999"], "argument --port: must be an integer in [0, 65535], got '99999'"),
    (["space", "--port", "-1"], "argument --port"),
    # ---- demo and the top level
    (D + ["--stages", "world,nope"], "--stages: unknown stage(s) ['nope']"),
    (D + ["--size", "8"], "argument --size"),
    (D + ["--train-per-class", "0"], "argument --train-per-class"),
    ([], "the following arguments are required: COMMAND"),
    (["frobnicate"], "argument COMMAND: invalid choice: 'frobnicate'"),
    (["--debug"], "the following arguments are required: COMMAND"),
]

#: rows also run as real processes (exit status, no traceback), picked by their expected text
SUBPROCESS_CASES = [
    i
    for i, (_, expected) in enumerate(CASES)
    if expected.startswith(
        ("argument --steps: must", "latin1.txt", "Differing: seed", "--model: model 'someone/not-cached-flux'")
    )
]


def _write(path, text: str | bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> dict[str, str]:
    from PIL import Image

    from concept_grounding.tdg.generate_config import GenerateConfig
    from concept_grounding.tdg.plan import plan_jobs, plan_pairings
    from concept_grounding.tdg.resume import MANIFEST_FILE, PARTS_DIR, generation_manifest
    from concept_grounding.tdg.sources import FluxModel
    from concept_grounding.tdg.tiny import TINY_MODEL
    from concept_grounding.world import BirdWorld

    root = tmp_path_factory.mktemp("fuzz")
    p = {
        "out": root / "out",
        "missing": root / "does-not-exist",
        "empty_dir": root / "empty",
        "text_file": _write(root / "notes.txt", "just some text\n"),
        "latin1": _write(
            root / "latin1.txt", "Blue Jay,has_crown_color::yellow\nCaf\xe9,has_crown_color::black\n".encode("latin-1")
        ),
        "pairs_ok": _write(root / "pairs_ok.txt", "Blue Jay,has_crown_color::yellow\n"),
        "pairs_three": _write(root / "pairs_three.txt", "Blue Jay,has_crown_color::yellow,extra\n"),
        "pairs_bad_class": _write(root / "pairs_bad_class.txt", "# ok\nBlue Jey,has_crown_color::yellow\n"),
        "pairs_bad_attr": _write(root / "pairs_bad_attr.txt", "Blue Jay,has_crown_color::plaid\n"),
        "pairs_bad_json": _write(root / "pairs_bad_json.txt", '{"reference_class": "Blue Jay"}\n'),
        "png": root / "bird.png",
        "broken_cub": _write(root / "broken_cub" / "images.txt", "1 a.jpg\n").parent,
        "old_parts": _write(root / "old" / PARTS_DIR / "x.json", "{}").parent.parent,
    }
    p["empty_dir"].mkdir()
    Image.new("RGB", (8, 8)).save(p["png"])
    # a generated folder whose manifest differs from the row's settings in the seed only
    resumed = root / "resumed"
    world = BirdWorld()
    pairings = [
        q
        for q in plan_pairings(world.class_names, world.class_attributes, ["has_crown_color::black"])
        if q.reference_class == "017.Cardinal"
    ]
    settings = GenerateConfig(out=resumed, seed=5, num_inference_steps=2, size=32, batch_size=4)
    manifest = generation_manifest(
        plan_jobs(pairings, 1, 5), settings, FluxModel(TINY_MODEL, "float32", 32, 32, load=None)
    )
    _write(resumed / MANIFEST_FILE, json.dumps(manifest))
    p["resumed"] = resumed
    # image folders for filter
    row = {"file_name": "a.png", "reference_class": "073.Blue_Jay", "target_attribute": "has_crown_color::black"}
    for name, metadata in {
        "gen_ok": json.dumps(row) + "\n",
        "meta_bad_json": json.dumps(row) + "\n{not json\n",
        "meta_latin1": "caf\xe9\n".encode("latin-1"),
        "meta_missing_key": json.dumps({k: v for k, v in row.items() if k != "target_attribute"}) + "\n",
        "meta_missing_image": json.dumps({**row, "file_name": "gone.png"}) + "\n",
        "meta_empty": "\n",
    }.items():
        folder = root / name
        _write(folder / "metadata.jsonl", metadata)
        Image.new("RGB", (8, 8)).save(folder / "a.png")
        p[name] = folder
    return {k: str(v) for k, v in p.items()}


@pytest.fixture(autouse=True)
def offline_hub(monkeypatch, tmp_path):
    """No network: offline mode and an empty Hugging Face cache."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("CONCEPT_GROUNDING_DEBUG", raising=False)


def _argv(row: list[str], paths: dict[str, str]) -> list[str]:
    return [a.format(**paths) for a in row]


def test_the_table_is_large_enough():
    assert len(CASES) >= 100 and len(SUBPROCESS_CASES) == 4
    assert len({" ".join(argv) for argv, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_invocation_is_a_one_line_error(index, paths, capsys):
    row, expected = CASES[index]
    code = main(_argv(row, paths))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("concept-grounding: error: ")]
    assert len(errors) == 1, err
    assert expected.format(**paths) in errors[0], err


@pytest.mark.slow  # a fresh interpreter per row
@pytest.mark.parametrize("index", SUBPROCESS_CASES)
def test_bad_invocation_in_a_real_process(index, paths, tmp_path):
    row, expected = CASES[index]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf-cache")}
    env.pop("CONCEPT_GROUNDING_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "concept_grounding.cli", *_argv(row, paths)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert expected.format(**paths) in done.stderr
