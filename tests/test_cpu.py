"""CPU threads: the count chosen from the free cores (affinity, quota, other processes' load), the
passive wait policy, the command line applying both before torch starts, and pinned blocks."""

import os
import subprocess
import sys

import pytest

from concept_grounding import cpu
from concept_grounding.cli import main

_NO_VARS = (cpu.THREADS_ENV, "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", *cpu.WAIT_POLICY)


def _stat(busy: int, idle: int) -> str:
    """A /proc/stat with two CPUs, each with ``busy`` user ticks and ``idle`` idle ticks."""
    line = "{name} {busy} 0 0 {idle} 0 0 0 0 0 0"
    return "\n".join(
        [line.format(name="cpu", busy=2 * busy, idle=2 * idle)]
        + [line.format(name=f"cpu{i}", busy=busy, idle=idle) for i in (0, 1)]
        + ["ctxt 1", ""]
    )


@pytest.mark.parametrize(("ticks", "expected"), [((100, 0), 2.0), ((50, 50), 1.0), ((0, 100), 0.0)])
def test_busy_cores_reads_the_other_processes_ticks_over_the_sample(tmp_path, monkeypatch, ticks, expected):
    stat = tmp_path / "stat"
    stat.write_text(_stat(1000, 1000))
    monkeypatch.setattr(cpu, "_affinity", lambda: {0, 1})
    monkeypatch.setattr(cpu.time, "sleep", lambda s: stat.write_text(_stat(1000 + ticks[0], 1000 + ticks[1])))
    assert cpu.busy_cores(0.1, stat) == pytest.approx(expected, abs=0.05)
    assert cpu.busy_cores(0.1, tmp_path / "missing") == 0.0


def test_busy_cores_sees_a_spinning_process():
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert cpu.busy_cores(0.5) >= 0.7
    finally:
        spin.kill()
        spin.wait()


@pytest.mark.parametrize(
    ("allowed", "busy", "expected"), [(2, 0.0, 2), (2, 0.3, 2), (2, 1.0, 1), (2, 5.0, 1), (4, 1.4, 3)]
)
def test_auto_takes_the_allowed_cores_less_the_busy_ones(monkeypatch, allowed, busy, expected):
    monkeypatch.setattr(cpu, "allowed_cores", lambda: allowed)
    monkeypatch.setattr(cpu, "busy_cores", lambda: busy)
    cpu._free_cores.cache_clear()
    try:
        choice = cpu.choose_threads({})
    finally:
        cpu._free_cores.cache_clear()
    assert choice.threads == expected and f"of {allowed} allowed cores free" in choice.reason


def test_quota_caps_the_allowed_cores(tmp_path, monkeypatch):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu.cgroup_cores(tmp_path) == 0.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpu.cgroup_cores(tmp_path) is None
    monkeypatch.setattr(cpu, "cgroup_cores", lambda: 1.2)
    monkeypatch.setattr(cpu, "_affinity", lambda: {0, 1, 2, 3})
    assert cpu.allowed_cores() == 2


def test_configure_sets_the_wait_policy_and_counts_unless_set():
    env = {cpu.THREADS_ENV: "3", "MKL_NUM_THREADS": "2", "OMP_WAIT_POLICY": "ACTIVE"}
    assert cpu.configure_threads(env).threads == 3
    assert env == {
        cpu.THREADS_ENV: "3",
        "OMP_NUM_THREADS": "3",
        "MKL_NUM_THREADS": "2",
        "OPENBLAS_NUM_THREADS": "3",
        "OMP_WAIT_POLICY": "ACTIVE",
        "KMP_BLOCKTIME": "0",
    }
    off = {cpu.THREADS_ENV: "off"}
    assert cpu.configure_threads(off).threads is None and off == {cpu.THREADS_ENV: "off"}


def test_a_fresh_process_starts_torch_with_the_chosen_count_and_passive_threads():
    env = {k: v for k, v in os.environ.items() if k not in _NO_VARS} | {cpu.THREADS_ENV: "1"}
    code = (
        "import os; from concept_grounding.cpu import configure_threads; configure_threads(); import torch; "
        "print(torch.get_num_threads(), os.environ['OMP_WAIT_POLICY'], os.environ['KMP_BLOCKTIME'])"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "PASSIVE", "0"]


def test_the_command_line_applies_it_before_the_command_runs(tmp_path, monkeypatch):
    import torch

    from concept_grounding.commands import world

    seen = {}
    monkeypatch.setattr(
        world,
        "run",
        lambda args: seen.update(policy=os.environ.get("OMP_WAIT_POLICY"), threads=torch.get_num_threads()) or 0,
    )
    for name in _NO_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(cpu.THREADS_ENV, "1")
    before = torch.get_num_threads()
    try:
        assert main(["world", "--out", str(tmp_path / "w")]) == 0
    finally:
        torch.set_num_threads(before)
    assert seen == {"policy": "PASSIVE", "threads": 1}


def test_a_bad_thread_count_is_one_line_naming_the_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cpu.THREADS_ENV, "0")
    assert main(["world", "--out", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CONCEPT_GROUNDING_THREADS: expected a thread count >= 1" in err
    assert not (tmp_path / "w").exists()


def test_limited_threads_pins_torch_and_blas_and_restores_them():
    import torch
    from threadpoolctl import threadpool_info

    before = torch.get_num_threads()
    with cpu.limited_threads(1):
        assert torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpool_info())
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads must be >= 1"), cpu.limited_threads(0):
        pass


def test_set_threads_reaches_a_torch_imported_later_and_child_processes():
    env = {k: v for k, v in os.environ.items() if k not in _NO_VARS}
    code = (
        "import os; from concept_grounding.cpu import set_threads; set_threads(1); import torch; "
        "print(torch.get_num_threads(), os.environ['OMP_NUM_THREADS'])"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "1"]
