"""benchmarks/bench_learner_step.py times the learners' LoRA step against the peft + diffusers reference
loop in one run and prints their ratio."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_step_benchmark_prints_and_writes_the_ratio(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_learner_step", ROOT / "benchmarks" / "bench_learner_step.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "step.json"
    argv = ["--layers", "1", "--side", "8", "--batch", "1", "--rank", "2", "--steps", "1", "--rounds", "1"]
    assert bench.main([*argv, "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    sec = figures["seconds_per_step"]
    assert sec["project"] > 0 and sec["reference"] > 0
    assert abs(figures["ratio"] - sec["project"] / sec["reference"]) < 1e-12
    assert "ratio" in capsys.readouterr().out
