"""Noise by level and drift across saves through pytest, on the simulated device.

Each simulated GPU has its own board id (a UUID): saves made on GPU 0 and a run on GPU 1 of
`--gpuperf-sim-gpus=1,1` take the gate's between-board path, as a CI runner other than the
one that saved would. A drift is injected per commit by the kernel's `gpuperf-sim:` directive
(each commit edits the code, so each re-save starts a new history and the old level goes to
the entry's trail) on a quiet simulated device ($GPUPERF_SIM_RUN_SPREAD).
"""

from __future__ import annotations

import json
import subprocess
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from pytest_gpuperf.simulate.backend import simulated_uuid
from tests.git_repo import git

ONE_TEST = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


def _baseline(gp) -> dict:
    text = (gp.path / "baselines" / "mi300x-sim.toml").read_text()
    return tomllib.loads(text)["entry"][0]


def _report(gp, *args: str) -> dict:
    out = gp.path / "report.json"
    gp.run("--gpuperf", *args, f"--gpuperf-json={out}")
    return json.loads(out.read_text())["results"][0]["verdict"]["baseline"]


def test_saves_record_their_board_and_a_run_on_another_board_adds_the_between_board_spread(gp):
    gp.test_file(ONE_TEST)
    two = "--gpuperf-sim-gpus=1,1"
    for seed in ("1", "2", "3"):
        gp.monkeypatch.setenv("GPUPERF_SIM_SEED", seed)
        gp.run("--gpuperf-save", two, "--gpuperf-gpu=0").assert_outcomes(passed=1)
    entry = _baseline(gp)
    board = simulated_uuid("AMD Instinct MI300X", 0)
    assert {save["board"] for save in entry["save"]} == {board}
    assert all(save["host"] for save in entry["save"])

    seen = _report(gp, two, "--gpuperf-gpu=0")
    assert seen["band"]["board_status"] == "seen" and seen["band"]["between_sigma"] == 0.0
    unseen = _report(gp, two, "--gpuperf-gpu=1")
    band = unseen["band"]
    assert band["board_status"] == "unseen" and band["between_sigma"] > 0
    assert unseen["baseline"]["board"] == simulated_uuid("AMD Instinct MI300X", 1)
    assert unseen["allowance"] > seen["allowance"]  # the board's own level is noise too

    result = gp.run("--gpuperf", two, "--gpuperf-gpu=1", "-v")
    text = result.stdout.str()
    assert "+board" in text  # the table's allowance column says the board term is in it
    history = subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf.commands", "history", "baselines/mi300x-sim.toml"],
        cwd=gp.path,
        capture_output=True,
        text=True,
    )
    assert history.returncode == 0, history.stderr
    assert "judged on a board the baseline has not seen: between-board +-" in history.stdout
    assert "1 board" in history.stdout


def test_a_run_on_an_unseen_board_that_regressed_says_so_in_its_failure(gp):
    gp.test_file(ONE_TEST)
    two = "--gpuperf-sim-gpus=1,0.8"  # GPU 1 is 20% slow: beyond any allowance
    gp.run("--gpuperf-save", two, "--gpuperf-gpu=0").assert_outcomes(passed=1)
    result = gp.run("--gpuperf", two, "--gpuperf-gpu=1")
    result.assert_outcomes(failed=1)
    assert "judged on a board the baseline has not seen: between-board +-" in result.stdout.str()


def _commit_kernel(gp, k: int, efficiency: float) -> None:
    """Commit k: the code changes (a new code object) and the directive sets its speed."""
    path = gp.write_kernel(efficiency)
    path.write_text(path.read_text().replace("a[i] + b[i];", f"a[i] + b[i] + 0.0f * {k};"))
    git(gp.path, "add", "-A")
    git(gp.path, "commit", "-qm", f"commit {k}")


def test_a_drift_across_re_saves_is_reported_and_fails_under_strict(gp):
    """Five commits, each 1% slower and each re-saved: every step is within the allowance of
    the run that follows it, the whole -4% is not."""
    gp.monkeypatch.setenv("GPUPERF_SIM_RUN_SPREAD", "0.002")
    gp.test_file(ONE_TEST)
    (gp.path / ".gitignore").write_text(".locks/\n__pycache__/\nreport.json\n")
    git(gp.path, "init", "-q")
    levels = [0.7 * 0.99**k for k in range(5)]
    for k, efficiency in enumerate(levels):
        _commit_kernel(gp, k, efficiency)
        for seed in ("1", "2"):
            gp.monkeypatch.setenv("GPUPERF_SIM_SEED", seed)
            gp.run("--gpuperf-save").assert_outcomes(passed=1)
        entry = _baseline(gp)
        assert len(entry["save"]) == 2 and len(entry.get("replaced", [])) == k
    trail = entry["replaced"]
    assert [r["saves"] for r in trail] == [2, 2, 2, 2]
    assert all(len(r["commit"]) == 40 for r in trail)

    plain = gp.run("--gpuperf")
    plain.assert_outcomes(passed=1)  # the last step alone is within the allowance
    text = plain.stdout.str()
    assert "drift across saves: -" in text and "each step within its allowance" in text
    first_commit = trail[0]["commit"][:12]
    assert first_commit in text

    strict = gp.run("--gpuperf", "--gpuperf-strict")
    strict.assert_outcomes(failed=1)
    assert "drifted across saves" in strict.stdout.str()
    verdict = _report(gp)
    assert verdict["drift"]["gradual"] is True and verdict["drift"]["change"] < -0.02


def test_a_bad_simulated_run_spread_is_one_clear_line(gp):
    gp.monkeypatch.setenv("GPUPERF_SIM_RUN_SPREAD", "lots")
    gp.test_file(ONE_TEST)
    result = gp.run("--gpuperf")
    assert (
        "$GPUPERF_SIM_RUN_SPREAD='lots' is not a number"
        in result.stdout.str() + result.stderr.str()
    )
    assert result.ret != 0
