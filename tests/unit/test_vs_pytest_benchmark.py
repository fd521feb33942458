"""bench/vs_pytest_benchmark.py: its scoring (pairs of separate processes for
pytest-benchmark, the gate's own test outcomes for gpu_bench), the README's table as rendered
from the committed H100 run, and one trial through real pytest processes on the simulated
device (the path the GPU run takes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "vs_pytest_benchmark.py"
H100_RUN = REPO / "docs" / "measurements" / "vs-pytest-benchmark-h100-2026-11-25.json"


def _load():
    return load_script("vs_pytest_benchmark")


def _record(role: str, index: int, pb_s: float, failed: bool) -> dict:
    bench = {"median_s": pb_s, "min_s": pb_s, "rounds": 10}
    gate = {"time_s": 1e-4, "test_outcome": "failed" if failed else "passed"}
    gate.update(state="regressed" if failed else "pass", ratio=1.03 if failed else 1.0)
    return {
        "role": role,
        "index": index,
        "pytest_benchmark": {"large": bench, "small": bench},
        "gpu_bench": {"large": gate, "small": gate},
    }


def test_scoring_counts_pairs_for_pytest_benchmark_and_outcomes_for_gpu_bench():
    vs = _load()
    records = [
        # trial 0: the unchanged head 2% slower (a false alarm at 1%), the +3% head 4% slower
        _record("base", 0, 100e-6, False),
        _record("same", 1, 102e-6, False),
        _record("more", 2, 104e-6, True),
        # trial 1: nothing moved past 1%, and gpu_bench missed nothing
        _record("base", 3, 100e-6, False),
        _record("same", 4, 100.5e-6, False),
        _record("more", 5, 100.5e-6, True),
    ]
    scored = vs.score(records)["large"]
    assert scored["pb_0.01"] == {"alarms": 1, "detections": 1, "of": 2}
    assert scored["pb_0.03"] == {"alarms": 0, "detections": 1, "of": 2}
    gate = scored["gpu_bench"]
    assert (gate["alarms"], gate["unchanged"], gate["detections"], gate["more"]) == (0, 4, 2, 2)
    # an incomplete trial (a process that failed) is not paired
    broken = [*records[:2], {"role": "more", "index": 2, "error": "boom"}]
    assert vs.score(broken)["large"]["pb_0.01"]["of"] == 0


def test_the_readme_table_is_the_committed_h100_run():
    vs = _load()
    document = json.loads(H100_RUN.read_text())
    assert document["device"].startswith("NVIDIA H100") and document["trials"] >= 4
    readme = (REPO / "README.md").read_text()
    block = readme.split(vs.BEGIN, 1)[1].split(vs.END, 1)[0].strip()
    assert block == vs.render(document).strip()


@pytest.mark.slow
def test_one_trial_through_separate_pytest_processes_on_the_simulated_device(tmp_path):
    out = tmp_path / "vs.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--backend", "sim", "--trials", "1", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    document = json.loads(out.read_text())
    assert document["trials"] == 1 and "SIMULATED" in document["device"]
    roles = [r["role"] for r in document["records"] if "error" not in r]
    assert roles == ["base", "same", "more"]
    for size in ("large", "small"):
        gate = document["scored"][size]["gpu_bench"]
        assert gate["unchanged"] == 2 and gate["more"] == 1
        assert gate["detections"] == 1  # +3% traffic on the simulated device: caught
    assert "| gpu_bench, `--gpuperf-compare` |" in done.stdout
