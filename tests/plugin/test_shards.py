"""The perf suite split over three runners and merged: `--gpuperf-shard=K/N` in three separate
pytest processes on the SIMULATED device, then `gpuperf merge`.

The runs are the repository's own tests/perf in subprocesses rooted at the repository (as a
CI runner's checkout), each with its own lock folder (its own machine) and its own copy of
the baseline directory (its own checkout). One unsharded run beside them is the reference:
the merged report holds each of its tests exactly once, judged at the same suite budget, and
the baselines the shards saved merge into the file the unsharded save wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.baseline import BaselineStore

# End to end through separate processes: the slow tier (`-m slow`; CI runs it).
# One xdist worker runs the module (`--dist loadgroup`): its module fixture is built once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shards")]

REPO = Path(__file__).resolve().parents[2]
SHARDS = 3
DEVICE = "mi300x-sim"


def _env(tmp_path: Path, name: str) -> dict[str, str]:
    env = dict(
        os.environ, GPUPERF_SIM_SEED="4321", GPUPERF_LOCK_DIR=str(tmp_path / f"locks-{name}")
    )
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("GITHUB_STEP_SUMMARY", None)
    return env


def _pytest(tmp_path: Path, name: str, *options: str) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "tests/perf",
        "-q",
        "-p",
        "no:cacheprovider",
        "--gpuperf-backend=sim",
        f"--gpuperf-json={tmp_path / f'{name}.json'}",
        *options,
    ]
    return subprocess.Popen(
        command,
        cwd=REPO,
        env=_env(tmp_path, name),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> str:
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output
    return output


def merge(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf.commands", "merge", *map(str, args)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """base/: one unsharded save (every test has a recorded cost); then, at once, an
    unsharded save into full/ and the three shards' saves into shard-K/, each a copy of base/
    (each runner its own checkout)."""
    where = tmp_path_factory.mktemp("shards")
    _finish(_pytest(where, "first", "--gpuperf-save", f"--gpuperf-baseline-dir={where / 'base'}"))
    for name in ["full", *(f"shard-{k}" for k in range(1, SHARDS + 1))]:
        shutil.copytree(where / "base", where / name)
    processes = [
        _pytest(where, "full", "--gpuperf-save", f"--gpuperf-baseline-dir={where / 'full'}")
    ]
    processes += [
        _pytest(
            where,
            f"shard-{k}",
            "--gpuperf-save",
            f"--gpuperf-shard={k}/{SHARDS}",
            f"--gpuperf-baseline-dir={where / f'shard-{k}'}",
        )
        for k in range(1, SHARDS + 1)
    ]
    for process in processes:
        _finish(process)
    return where


def _keys(document: dict) -> list[tuple[str, str, str]]:
    return sorted(
        (r["test_id"], r["measurement"]["name"], r["measurement"]["cache"])
        for r in document["results"]
    )


def _shard_reports(runs: Path) -> list[Path]:
    return [runs / f"shard-{k}.json" for k in range(1, SHARDS + 1)]


def test_the_merged_report_holds_every_test_once_at_the_unsharded_suite_budget(runs, tmp_path):
    full = json.loads((runs / "full.json").read_text())
    shards = [json.loads(path.read_text()) for path in _shard_reports(runs)]
    # every shard judged its tests at the whole suite's budget, not its own share's
    for shard in shards:
        assert shard["suite"]["checks"] == full["suite"]["checks"] == 18
        assert shard["suite"]["per_test_rate"] == full["suite"]["per_test_rate"]
        assert len(shard["shard"]["measuring"]) < 18
    out = tmp_path / "merged"
    done = merge(
        *_shard_reports(runs),
        "--json",
        out / "merged.json",
        "--markdown",
        out / "merged.md",
        "--junit",
        out / "merged.xml",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    merged = json.loads((out / "merged.json").read_text())
    assert _keys(merged) == _keys(full)
    assert len(set(_keys(merged))) == len(merged["results"]) == 20  # each exactly once
    assert merged["suite"] == full["suite"] | {
        k: merged["suite"][k] for k in ("ab", "stored", "confirmations", "confirmed", "unconfirmed")
    }
    assert merged["suite"]["checks"] == full["suite"]["checks"]
    assert merged["suite"]["per_test_rate"] == full["suite"]["per_test_rate"]
    assert merged["suite"]["stored_rate"] == full["suite"]["stored_rate"]
    assert merged["merge"]["verdict"] == "passed" and merged["merge"]["reasons"] == []
    assert merged["summary"]["tests"] == full["summary"]["tests"]
    # the tests' kernel files (what bisect reads) come through the merge, each test once
    assert merged["rootdir"] == full["rootdir"] != ""
    assert sorted(t["test_id"] for t in merged["tests"]) == sorted(
        t["test_id"] for t in full["tests"]
    )
    assert {t["test_id"]: t["kernel_files"] for t in merged["tests"]} == {
        t["test_id"]: t["kernel_files"] for t in full["tests"]
    }
    # every test once, in the order of the unsharded run (its results follow collection)
    tests = merged["merge"]["tests"]
    assert [t["test_id"] for t in tests if t["measuring"]] == list(
        dict.fromkeys(r["test_id"] for r in full["results"])
    )
    assert [r["test_id"] for r in merged["results"]] == [r["test_id"] for r in full["results"]]
    assert len(tests) == sum(len(s["shard"]["tests"]) for s in shards)
    assert all(t["outcome"] == "passed" for t in tests)
    assert (
        f"merged 3 shards: {len(tests)} tests (18 measuring in the suite, 18 measured, "
        f"20 measurements): {len(tests)} passed: PASSED"
    ) in done.stdout
    markdown = (out / "merged.md").read_text()
    assert markdown.startswith("<!-- pytest-gpuperf -->") and "#### Shards" in markdown
    assert "SIMULATED" in markdown
    xml = (out / "merged.xml").read_text()
    # a test case per measurement, and one per test without a measurement
    plain = sum(1 for t in tests if not t["measurements"])
    assert xml.count("<testcase ") == 20 + plain and 'failures="0"' in xml
    # judged again against the baseline files the shards were judged against (their copies'
    # levels recomputed from the files: the same verdicts)
    against_files = merge(*_shard_reports(runs), "--baseline-dir", runs / "base")
    assert against_files.returncode == 0, against_files.stdout + against_files.stderr
    assert "does not hold" not in against_files.stdout


def test_the_shards_planned_costs_are_within_20_percent(runs):
    plans = [json.loads(path.read_text())["shard"] for path in _shard_reports(runs)]
    assert {plan["digest"] for plan in plans} == {plans[0]["digest"]}  # one plan, three runners
    assert all(plan["basis"] == "baseline" and plan["costed"] == 18 for plan in plans)
    costs = plans[0]["planned_cost_s"]
    # what each shard ran is its part of that plan, and the parts cover the suite once
    ran = [set(plan["measuring"]) for plan in plans]
    assert sum(map(len, ran)) == len(set().union(*ran)) == 18
    base = BaselineStore(runs / "base").load(DEVICE)
    recorded = {}
    for entry in base.entries.values():
        save = entry.saves[-1]
        recorded[entry.test_id] = recorded.get(entry.test_id, 0.0) + save.time_s * save.samples
    # Within 20%, unless one test costs more than an even share: no split does better than a
    # shard of that test alone (LPT gives it one), and the others share the rest evenly. (The
    # simulated rotate measurement samples until its two buffer sets' placements, drawn by
    # allocation number, agree: 10 samples or 2000 as the suite's allocations fall.)
    largest = max(recorded.values())
    if largest > sum(costs) / SHARDS:
        assert max(costs) == pytest.approx(largest, rel=1e-9), (costs, largest)
        rest = sorted(costs)[:-1]
        assert max(rest) <= 1.2 * min(rest), costs
    else:
        assert max(costs) <= 1.2 * min(costs), costs
    for plan in plans:
        mine = sum(recorded[test] for test in plan["measuring"])
        assert mine == pytest.approx(costs[plan["index"] - 1], rel=1e-9)


def test_a_missing_shard_fails_the_merge(runs, tmp_path):
    reports = _shard_reports(runs)
    done = merge(reports[0], reports[2], "--json", tmp_path / "merged.json")
    assert done.returncode == 1
    assert "shard 2/3 is missing: no report for it" in done.stdout
    assert "FAILED" in done.stdout and "Traceback" not in done.stdout + done.stderr
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert merged["merge"]["verdict"] == "failed"
    assert any("shard 2/3 is missing" in problem for problem in merged["problems"])


@pytest.mark.parametrize(
    ("field", "change", "words"),
    [
        (("commit", "id"), "0" * 40, "shards disagree on the commit"),
        (("shard", "device_key"), "h100-sxm", "shards disagree on the device key"),
        (("shard", "suite_tests"), 16, "shards disagree on the suite size"),
    ],
)
def test_a_disagreeing_shard_fails_the_merge(runs, tmp_path, field, change, words):
    reports = _shard_reports(runs)
    other = json.loads(reports[1].read_text())
    other[field[0]][field[1]] = change
    (tmp_path / "shard-2.json").write_text(json.dumps(other))
    done = merge(reports[0], tmp_path / "shard-2.json", reports[2], "--junit", tmp_path / "j.xml")
    assert done.returncode == 1, done.stdout
    assert words in done.stdout
    assert 'name="run"' in (tmp_path / "j.xml").read_text()  # the CI test view says why


def test_a_shard_given_twice_or_an_overlap_fails_the_merge(runs):
    reports = _shard_reports(runs)
    done = merge(reports[0], reports[0], reports[1], reports[2])
    assert done.returncode == 1
    assert "shard 1/3 given 2 times" in done.stdout


def test_baselines_saved_by_the_shards_merge_into_the_unsharded_save(runs, tmp_path):
    out = tmp_path / "baselines"
    shutil.copytree(runs / "base", out)  # the merge job's checkout: the shards' common base
    done = merge("--baselines", *(runs / f"shard-{k}" for k in range(1, SHARDS + 1)), "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{out / (DEVICE + '.toml')}: 20 entries written" in done.stdout
    merged = BaselineStore(out).load(DEVICE).entries
    unsharded = BaselineStore(runs / "full").load(DEVICE).entries
    base = BaselineStore(runs / "base").load(DEVICE).entries
    assert list(merged) == list(unsharded)  # the same entries
    for key, entry in merged.items():
        reference = unsharded[key]
        assert len(entry.saves) == len(reference.saves)  # the same histories
        # what both kept of the base's history is the base's, save for save
        kept = len(entry.saves) - 1
        assert entry.saves[:kept] == reference.saves[:kept] == base[key].saves[-kept:][:kept]
        new, ref = entry.saves[-1], reference.saves[-1]
        assert (new.fingerprint, new.commit, new.backend) == (
            ref.fingerprint,
            ref.commit,
            ref.backend,
        )
        assert new.when >= base[key].saves[-1].when


def test_conflicting_baselines_are_refused_with_file_and_line(runs, tmp_path):
    out = tmp_path / "baselines"
    shutil.copytree(runs / "base", out)
    before = (out / f"{DEVICE}.toml").read_bytes()
    # the unsharded save and shard 1 both saved shard 1's tests: neither continues the other
    done = merge("--baselines", runs / "shard-1", runs / "full", "--out", out)
    assert done.returncode == 1
    line = done.stderr.splitlines()[0]
    assert line.startswith("gpuperf: conflict: conflicting entries for test ")
    assert f"{runs / 'shard-1' / (DEVICE + '.toml')}:" in line
    assert f"{runs / 'full' / (DEVICE + '.toml')}:" in line
    assert "nothing merged" in done.stderr and "Traceback" not in done.stderr
    assert (out / f"{DEVICE}.toml").read_bytes() == before  # nothing written
    assert sorted(p.name for p in out.iterdir()) == sorted(
        p.name for p in (runs / "base").iterdir()
    )
