"""benchmarks/bench_learners.py's FLUX.1-dev-size mode runs every method through the learners'
own code at a tiny width on the CPU (the GPU run's code path) and writes its figures."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_flux_dev_size_smoke_runs_every_method(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_learners", ROOT / "benchmarks" / "bench_learners.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "dev.json"
    assert (
        bench.main(
            [
                "--flux-dev-size",
                "--width-divisor",
                "24",
                "--device",
                "cpu",
                "--size",
                "64",
                "--text-tokens",
                "8",
                "--steps",
                "1",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    figures = json.loads(out.read_text())
    assert set(figures["methods"]) == {"textual_inversion", "dreambooth", "lora", "custom_diffusion"}
    assert figures["tokens"] == 16 and figures["width_divisor"] == 24
    trained = {m: f["trained_parameters"] for m, f in figures["methods"].items()}
    # TI trains one row per encoder (CLIP 768/24 + T5 4096/24 wide); DreamBooth every transformer weight
    assert trained["textual_inversion"] == 768 // 24 + 4096 // 24
    assert trained["dreambooth"] == figures["parameters"]
    assert trained["textual_inversion"] < trained["custom_diffusion"] < trained["dreambooth"]
    assert 0 < trained["lora"] < trained["dreambooth"]
    assert all(f["seconds_per_step"] > 0 for f in figures["methods"].values())
    assert "s/step" in capsys.readouterr().out
