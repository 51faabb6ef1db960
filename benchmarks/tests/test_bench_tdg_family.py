"""benchmarks/bench_tdg_family.py runs on every family member and writes its figures (1 round, tiny sizes)."""

import importlib.util
import json
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def test_bench_tdg_family_times_every_member(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_tdg_family", ROOT / "benchmarks" / "bench_tdg_family.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    threads = torch.get_num_threads()
    try:
        assert bench.main(["--rounds", "1", "--size", "16", "--steps", "2", "--json", str(tmp_path / "f.json")]) == 0
    finally:
        torch.set_num_threads(threads)
    figures = json.loads((tmp_path / "f.json").read_text())
    assert list(figures) == ["FLUX.1", "FLUX.2 [dev]", "FLUX.2 [klein]"]
    for data in figures.values():
        assert set(data["ratios"]) == {"TDG / base", "A/A control", "TDG's own code / base"}
        assert 0 < data["ratios"]["TDG's own code / base"]["cpu"]["median"] < 1
    assert "target <= 1.02x" in capsys.readouterr().out


def test_klein_size_arm_runs_its_code_on_a_scaled_down_transformer(tmp_path):
    """The GPU arm (FLUX.2 [klein] 4B's transformer shape), smoke-run on the CPU 24x smaller:
    both configurations time a TDG pair against Flux2KleinPipeline batch-2 from prompt embeddings."""
    spec = importlib.util.spec_from_file_location("bench_tdg_family", ROOT / "benchmarks" / "bench_tdg_family.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert (bench.KLEIN_4B["num_layers"], bench.KLEIN_4B["num_single_layers"], bench.KLEIN_4B["in_channels"]) == (
        5,
        20,
        128,
    )
    threads = torch.get_num_threads()
    try:
        assert (
            bench.main(
                [
                    "--klein-size",
                    "--klein-scale",
                    "24",
                    "--device",
                    "cpu",
                    "--size",
                    "32",
                    "--steps",
                    "1",
                    "--rounds",
                    "1",
                    "--json",
                    str(tmp_path / "k.json"),
                ]
            )
            == 0
        )
    finally:
        torch.set_num_threads(threads)
    figures = json.loads((tmp_path / "k.json").read_text())
    assert (figures["size"], figures["steps"], figures["scale"]) == (32, 1, 24)
    assert {"plain", "cached"} <= set(figures) and "TDG / base" in figures["cached"]["ratios"]
