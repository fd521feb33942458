"""A pytest-xdist worker that dies (SIGKILL, the OOM killer, a driver's segfault) never writes
the saves it planned; its rows reached the controller saying "saved". The controller reads
each file back under its lock and says "saved" only of what is there: the dead worker's rows
say "not saved: worker crashed" in the terminal, the JSON and the Markdown, and the summary
lists them. Run for real: one worker kills itself with SIGKILL after measuring three tests.
"""

from __future__ import annotations

import json

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

CRASHING = """
import os, signal

def test_a(gpu_bench):
    add(gpu_bench)

def test_b(gpu_bench):
    add(gpu_bench)

def test_c(gpu_bench):
    add(gpu_bench)

def test_z_kills_its_worker():
    if not os.path.exists("killed"):  # once: xdist runs this test again on the new worker
        open("killed", "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
"""

FINE = """
def test_d(gpu_bench):
    add(gpu_bench)

def test_e(gpu_bench):
    add(gpu_bench)
"""


@pytest.mark.slow
def test_the_rows_of_a_crashed_worker_say_not_saved(gp):
    gp.test_file(CRASHING, name="test_crash")
    gp.test_file(FINE, name="test_fine")
    gp.baseline("mi300x-sim", [{"id": "tests/test_old.py::test_kept", "efficiency": 0.5}])
    result = gp.run_subprocess(
        "-n",
        "2",
        "--dist=loadfile",
        "--gpuperf-save",
        "--gpuperf-json=report.json",
        "--gpuperf-markdown=summary.md",
    )
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    assert "crashed while running 'test_crash.py::test_z_kills_its_worker'" in output
    assert "INTERNALERROR" not in output
    saved = tomllib.loads((gp.path / "baselines" / "mi300x-sim.toml").read_text())
    in_file = sorted(entry["id"] for entry in saved["entry"])
    assert in_file == [
        "test_fine.py::test_d",
        "test_fine.py::test_e",
        "tests/test_old.py::test_kept",
    ]
    result.stdout.fnmatch_lines(
        [
            "gpuperf: saved 2 measurements to baselines/mi300x-sim.toml",
            "gpuperf: NOT saved: 3 measurements to baselines/mi300x-sim.toml (worker crashed)",
            "gpuperf:   not saved: test_crash.py::test_a ?vector_add?: worker crashed (gw*",
            "gpuperf:   not saved: test_crash.py::test_b ?vector_add?: worker crashed (gw*",
            "gpuperf:   not saved: test_crash.py::test_c ?vector_add?: worker crashed (gw*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "gpuperf: ERROR: 3 measurements not saved: worker crashed (gw*) before saving "
            "(listed above)"
        ]
    )
    rows = {r["test_id"]: r for r in json.loads((gp.path / "report.json").read_text())["results"]}
    for test_id, row in rows.items():
        save = row["verdict"]["save"]
        if test_id.startswith("test_crash.py"):
            assert save["saved"] is False and save["why_not"] == "crashed", row
            assert save["error"].startswith("worker crashed (gw"), save
        else:
            assert save["saved"] is True, row
    markdown = (gp.path / "summary.md").read_text()
    assert markdown.count("NOT saved") == 3
    problems = json.loads((gp.path / "report.json").read_text())["problems"]
    assert any(p.startswith("3 measurements not saved: worker crashed (gw") for p in problems)
    assert "not saved: worker crashed (gw" in markdown
