"""Under a launcher with 2 CPU processes (torch.distributed over gloo, through accelerate's
state), ``concept-grounding sub`` splits the SUB images across the processes and gathers the
scores: the numbers equal one process's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from concept_grounding.cli import main
from concept_grounding.evaluation.distributed import shard

MODEL = """
import torch


def build():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(8, 32))
    return net.eval(), None, "sub"
"""
ARGS = [
    "--size",
    "32",
    "--classes",
    "017.Cardinal",
    "073.Blue_Jay",
    "--no-progress",
    "--batch-size",
    "8",
    "--no-normalize",
    "--save-scores",
]


def test_shards_cover_every_row_once_in_order():
    for n in (0, 1, 7, 10, 11):
        for count in (1, 2, 3, 4):
            rows = [i for r in range(count) for i in shard(n, r, count)]
            assert rows == list(range(n))


@pytest.mark.slow
def test_two_cpu_processes_give_the_numbers_of_one(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent(MODEL))
    assert main(["sub", "--model", f"{model}:build", "--out", str(tmp_path / "one"), *ARGS]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launch = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "-m",
        "concept_grounding.cli",
        "sub",
        "--model",
        f"{model}:build",
        "--out",
        str(tmp_path / "two"),
        *ARGS,
    ]
    done = subprocess.run(launch, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    one = json.loads((tmp_path / "one" / "results.json").read_text())
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    assert one["processes"] == 1 and two["processes"] == 2
    for key in (
        "s_plus",
        "s_minus",
        "chance_s_plus",
        "chance_s_minus",
        "n_s_plus",
        "n_s_minus",
        "num_images",
        "by_group",
        "by_attribute",
        "by_class",
    ):
        assert one[key] == two[key], key
    np.testing.assert_allclose(
        np.load(tmp_path / "one" / "scores.npz")["scores"],
        np.load(tmp_path / "two" / "scores.npz")["scores"],
        atol=1e-6,
    )
