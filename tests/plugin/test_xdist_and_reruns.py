"""pytest-xdist, reruns and pytest's selections against the gate (issue 55 item 10): under
`-n 2` with `--gpuperf-save` and then the stored gate, with a rerun plugin, `-k`, `--deselect`
and `--lf`, the summary, the JSON report and the saved entries say what pytest's own outcome
says; and a strict run names the measuring tests its selection left unmeasured.

The rerun plugin is the inner conftest's (`gp.with_reruns()`, tests/plugin/conftest.py), which
does what pytest-rerunfailures does (a failed attempt's reports say "rerun", the test runs
again); it runs in the xdist workers.
"""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.slow  # separate processes (xdist workers, a cache provider)

TESTS = """
import conftest


def test_steady(gpu_bench):
    add(gpu_bench)


def test_flaky(gpu_bench):
    add(gpu_bench)
    assert conftest.RUNS[gpu_bench.test.test_id] == 1, "fails the first time"


def test_broken(gpu_bench):
    add(gpu_bench)
    assert False, "the output was wrong"


def test_plain():
    pass
"""

MEASURING = ["test_perf.py::test_steady", "test_perf.py::test_flaky", "test_perf.py::test_broken"]


def _outcomes(stdout: str) -> dict[str, int]:
    last = [line for line in stdout.splitlines() if line.startswith("=") and " in " in line][-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last)}


def _saved_ids(gp) -> list[str]:
    path = gp.path / "baselines" / "mi300x-sim.toml"
    return sorted(re.findall(r'^id = "([^"]+)"', path.read_text(), flags=re.M))


@pytest.fixture
def suite(gp):
    gp.with_reruns()
    gp.test_file(TESTS)
    return gp


def test_xdist_saves_and_gates_what_pytest_passed_with_reruns(suite):
    pytest.importorskip("xdist")
    saved = suite.run_subprocess("--gpuperf-save", "-n", "2", "--gpuperf-json=save.json")
    assert _outcomes(saved.stdout.str()) == {"failed": 1, "passed": 3, "rerun": 2}
    report = suite.report("save.json")
    rows = {row["test_id"]: row for row in report["results"]}
    assert sorted(rows) == sorted(MEASURING)  # one row a measurement: the last attempt's
    assert {test: row["test_outcome"] for test, row in rows.items()} == {
        "test_perf.py::test_steady": "passed",
        "test_perf.py::test_flaky": "passed",  # its rerun passed: pytest's final word
        "test_perf.py::test_broken": "failed",
    }
    assert rows["test_perf.py::test_broken"]["verdict"]["status"] == "unjudged"
    assert _saved_ids(suite) == ["test_perf.py::test_flaky", "test_perf.py::test_steady"]
    saved.stdout.fnmatch_lines(["gpuperf: saved 2 measurements to baselines/mi300x-sim.toml"])

    gated = suite.run_subprocess("--gpuperf", "-n", "2", "--gpuperf-json=gate.json")
    assert _outcomes(gated.stdout.str()) == {"failed": 1, "passed": 3, "rerun": 2}
    statuses = {r["test_id"]: r["verdict"]["status"] for r in suite.report("gate.json")["results"]}
    assert statuses == {
        "test_perf.py::test_steady": "pass",
        "test_perf.py::test_flaky": "pass",
        "test_perf.py::test_broken": "unjudged",
    }
    assert suite.report("gate.json")["summary"]["unjudged"] == 1


@pytest.mark.parametrize(
    "select",
    [["-k", "steady"], ["--deselect", "test_perf.py::test_flaky"]],
    ids=["k", "deselect"],
)
@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_a_strict_run_names_the_measuring_tests_its_selection_left_out(suite, select, xdist):
    """`--deselect` (in a pull request's addopts, say) or `-k` under --gpuperf-strict: the
    summary said nothing of the measuring tests the run did not measure."""
    if xdist:
        pytest.importorskip("xdist")
    result = suite.run_subprocess("--gpuperf", "--gpuperf-strict", *select, *xdist)
    left = [t for t in MEASURING if ("steady" not in t if select[0] == "-k" else "flaky" in t)]
    how = "-k" if select[0] == "-k" else "--deselect"
    noun = "measuring test" if len(left) == 1 else "measuring tests"
    result.stdout.fnmatch_lines(
        [
            "gpuperf: WARNING: --gpuperf-strict names what it did not measure: "
            f"{len(left)} {noun} left out by this run's selection ({how}): {', '.join(left)}"
        ]
    )
    quiet = suite.run_subprocess("--gpuperf", *select, *xdist)  # named under strict only
    assert "left out by this run's selection" not in quiet.stdout.str()


def test_last_failed_measures_saves_and_names_only_what_it_ran(suite):
    """--lf after a run with a failure: only that test runs; nothing else is saved, pruned
    or called an orphan, and a strict run names the measuring tests --lf left out."""
    # gp's arguments turn the cache provider off; these turn it back on
    first = suite.pytester.runpytest_subprocess(
        *suite.args("--gpuperf-save", "-p", "cacheprovider")
    )
    assert _outcomes(first.stdout.str())["failed"] == 1
    before = (suite.path / "baselines" / "mi300x-sim.toml").read_text()
    again = suite.pytester.runpytest_subprocess(
        *suite.args(
            "--gpuperf-save", "--gpuperf-prune", "--gpuperf-strict", "--lf", "-p",
            "cacheprovider", "--gpuperf-json=lf.json",
        )
    )  # fmt: skip
    ended = _outcomes(again.stdout.str())
    assert ended["failed"] == 1 and "passed" not in ended  # only the failed test ran
    (row,) = suite.report("lf.json")["results"]
    assert row["test_id"] == "test_perf.py::test_broken" and row["test_outcome"] == "failed"
    assert (suite.path / "baselines" / "mi300x-sim.toml").read_text() == before
    out = again.stdout.str()
    assert "orphan" not in out and "pruned" not in out
    again.stdout.fnmatch_lines(
        ["gpuperf: WARNING: --gpuperf-strict names what it did not measure: 2 measuring tests "
         "left out by this run's selection (--lf): test_perf.py::test_flaky, "
         "test_perf.py::test_steady"]
    )  # fmt: skip
    json.loads((suite.path / "lf.json").read_text())  # whole
