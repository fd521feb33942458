"""A hostile profiler on a real GPU (issue 55 item 9): the explain pass with GPUPERF_NCU naming
a script that hangs, floods 100 MB, exits non-zero, prints garbage, or leaves a grandchild
holding its output. The run stays within --gpuperf-explain-timeout plus a few seconds, the
pytest process's memory stays bounded, and every verdict is the one without the profiler.

The profiler is tests/fake_ncu.py in its hostile modes (its numbers, where it gives any, are
not a GPU's); the measurement, the A/B and its confirmation are the real device's, on
bench/explain_demo.py's repository (a head that reads 3% more fails its A/B). Skipped without
a CUDA GPU. On the GPU machine:

    PYTHONPATH=. python3 -m pytest tests/gpu/test_hostile_profiler_on_gpu.py -v -s

Each case prints the card, the run's wall time, the timeout and the pytest process's peak
RSS against the run without a profiler.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.explain_demo import make_project

REPO = Path(__file__).resolve().parents[2]
FAKE_NCU = REPO / "tests" / "fake_ncu.py"
TIMEOUT_S = 10  # --gpuperf-explain-timeout
SLACK_S = 20.0  # the profiled child's start, the kill of its process group, the reports
EXTRA_RSS_MB = 150  # the pass reads a bounded tail: 100 MB of output must not reach memory

# Appended to the project's conftest: the pytest process's peak RSS, for the parent to read
PEAK_RSS = """

import os
import resource


def pytest_unconfigure(config):
    path = os.environ.get("HOSTILE_PEAK_RSS")
    if path and not hasattr(config, "workerinput"):
        with open(path, "w") as out:
            out.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
"""

HOSTILE = {
    "hang": {"FAKE_NCU_MODE": "hang"},
    "flood-100MB": {"FAKE_NCU_MODE": "fail", "FAKE_NCU_FLOOD_MB": "100"},
    "exit-nonzero": {"FAKE_NCU_MODE": "fail"},
    "garbage": {"FAKE_NCU_MODE": "garbage"},
    "grandchild": {"FAKE_NCU_MODE": "ok", "FAKE_NCU_GRANDCHILD": "{pid_file}"},
}


def _run(root: Path, name: str, env_extra: dict[str, str], *options: str) -> dict:
    report = root.parent / f"{name}.json"
    rss = root.parent / f"{name}.rss"
    env = dict(os.environ, HOSTILE_PEAK_RSS=str(rss), **env_extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "-p",
         "no:cacheprovider", "--gpuperf", "--gpuperf-backend=cuda", "--gpuperf-compare=HEAD",
         "--gpuperf-budget=0.5", "-k", "read30", f"--gpuperf-json={report}", "-q", *options],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    wall_s = time.monotonic() - began
    output = done.stdout + done.stderr
    assert report.exists(), output[-4000:]
    document = json.loads(report.read_text())
    return {
        "output": output,
        "wall_s": wall_s,
        "rss_mb": int(rss.read_text()) / 1024 if rss.exists() else float("nan"),
        "results": document["results"],
        "device": (document.get("devices") or [{}])[0].get("name", "?"),
    }


def _verdicts(results: list[dict]) -> list[tuple]:
    return [
        (
            r["test_id"],
            r["verdict"]["status"],
            (r["verdict"].get("comparison") or {}).get("state"),
            (((r["verdict"].get("comparison") or {}).get("confirmation")) or {}).get("state"),
        )
        for r in results
    ]


@pytest.fixture(scope="module")
def project(cuda_backend, tmp_path_factory) -> tuple[Path, dict]:
    """The user's repository, and its run without a profiler (GPUPERF_NCU names none)."""
    root = tmp_path_factory.mktemp("hostile") / "project"
    make_project(root)
    with (root / "conftest.py").open("a") as conftest:
        conftest.write(PEAK_RSS)
    quiet = _run(root, "without", {"GPUPERF_NCU": "/nonexistent/ncu"})
    assert any(v[1] == "fail" for v in _verdicts(quiet["results"])), quiet["output"][-4000:]
    return root, quiet


@pytest.mark.gpu
@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE)
def test_a_hostile_profiler_costs_its_timeout_at_most_and_changes_no_verdict(
    project, tmp_path, hostile
):
    root, quiet = project
    pid_file = tmp_path / "grandchild.pid"
    env = {k: v.format(pid_file=pid_file) for k, v in hostile.items()}
    env["GPUPERF_NCU"] = str(FAKE_NCU)
    try:
        run = _run(
            root, tmp_path.name, env, "--gpuperf-explain",
            f"--gpuperf-explain-timeout={TIMEOUT_S}",
        )  # fmt: skip
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    print(
        f"\n{tmp_path.name}: {run['device']}: wall {run['wall_s']:.1f} s (without a profiler "
        f"{quiet['wall_s']:.1f} s, timeout {TIMEOUT_S} s), peak RSS {run['rss_mb']:.0f} MB "
        f"(without {quiet['rss_mb']:.0f} MB)"
    )
    assert "Traceback" not in run["output"], run["output"][-4000:]
    assert _verdicts(run["results"]) == _verdicts(quiet["results"])
    # each failing measurement is profiled once (one pass a test): its timeout at most
    profiled = sum(1 for r in run["results"] if r["verdict"]["status"] == "fail")
    assert run["wall_s"] <= quiet["wall_s"] + profiled * TIMEOUT_S + SLACK_S, run["wall_s"]
    assert run["rss_mb"] <= quiet["rss_mb"] + EXTRA_RSS_MB, (run["rss_mb"], quiet["rss_mb"])
    for result in run["results"]:
        traffic = (result["verdict"].get("explain") or {}).get("traffic")
        if result["verdict"]["status"] == "fail" and env["FAKE_NCU_MODE"] != "ok":
            assert traffic is not None and traffic["problem"], traffic  # said why, one line
