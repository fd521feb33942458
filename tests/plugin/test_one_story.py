"""One story everywhere: the same basis and allowance for the same entry in the terminal
table, the failure text, the JSON report, the baseline file and the history CLI (given the
run's report, at the run's level), on the simulated device.

A user once saw the table say `allow ±13.0% prior` after four saves while the file said
`spread_basis = "history"` and the history CLI printed a third figure (issue 39).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TWO_TESTS = """
def test_add(gpu_bench):
    add(gpu_bench)


def test_add_again(gpu_bench):
    add(gpu_bench, name="again")
"""


@pytest.mark.slow
def test_the_table_the_failure_the_json_the_file_and_the_history_cli_agree(gp):
    gp.test_file(TWO_TESTS)
    for seed in ("1", "2", "3", "4"):
        gp.monkeypatch.setenv("GPUPERF_SIM_SEED", seed)
        gp.run("--gpuperf-save").assert_outcomes(passed=2)
    gp.write_kernel(0.7185 * 0.7)  # 30% slower: beyond any allowance
    report = gp.path / "report.json"
    result = gp.run("--gpuperf", f"--gpuperf-json={report}")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()

    results = json.loads(report.read_text())["results"]
    row = next(r for r in results if r["measurement"]["name"] == "vector_add")
    check = row["verdict"]["baseline"]
    allowance, basis = check["allowance"], check["band"]["basis"]
    assert check["false_alarm_rate"] < 0.01  # the run's level: its budget over two tests
    assert basis == "prior"  # the simulated device's spread, known exactly

    # the terminal table's allowance cell
    assert re.search(rf"±{allowance:.1%} {basis}\b", out), out
    # the failure text
    assert f"allowance of -{allowance:.2%}" in out and f"basis {basis}:" in out, out
    # the file
    text = (gp.path / "baselines" / "mi300x-sim.toml").read_text()
    entry = next(e for e in tomllib.loads(text)["entry"] if e["name"] == "vector_add")
    assert entry["spread_basis"] == basis and len(entry["save"]) == 4
    # the history CLI, given the run's report: the run's level, the same figures
    command = [
        sys.executable,
        "-m",
        "pytest_gpuperf.commands",
        "history",
        "baselines/mi300x-sim.toml",
    ]
    command += ["--test", "test_add", "--name", "vector_add", "--reports", str(report)]
    history = subprocess.run(
        command,
        cwd=gp.path,
        capture_output=True,
        text=True,
    )
    assert history.returncode == 0, history.stderr
    assert f"(allowance {allowance:.2%}, basis {basis})" in history.stdout, history.stdout
