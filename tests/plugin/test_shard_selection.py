"""--gpuperf-shard=K/N in a pytest run: which tests run, what the header, summary and JSON
say, the whole suite's budget in every shard, pytest-xdist inside a shard, bad values."""

from __future__ import annotations

import json
import re

import pytest

TESTS = """
@pytest.mark.parametrize("size", range(6))
def test_measures(gpu_bench, size):
    add(gpu_bench)


def test_plain_one():
    pass


def test_plain_two():
    pass
"""


def _run_all(gp, *options):
    reports = []
    for k in (1, 2, 3):
        result = gp.run(
            "--gpuperf", f"--gpuperf-shard={k}/3", f"--gpuperf-json=s{k}.json", *options
        )
        reports.append((result, json.loads((gp.path / f"s{k}.json").read_text())))
    return reports


def test_three_shards_run_every_test_once_at_the_whole_suites_budget(gp):
    gp.test_file(TESTS)
    reports = _run_all(gp)
    ran = []
    for result, document in reports:
        result.assert_outcomes(passed=len(document["shard"]["tests"]))
        ran += document["shard"]["tests"]
        assert document["suite"]["checks"] == 6  # the suite's, not the shard's 2
        assert document["shard"]["suite_tests"] == 6 and document["shard"]["suite_other"] == 2
        assert document["shard"]["basis"] == "count"  # no baselines: by test count
        assert len(document["shard"]["measuring"]) == 2
        assert {r["test_id"] for r in document["results"]} == set(document["shard"]["measuring"])
        index = document["shard"]["index"]
        result.stdout.fnmatch_lines(
            [
                f"gpuperf: measure and gate, *, shard {index}/3, *",
                f"gpuperf: shard {index}/3: 2 of 6 measuring tests*(no recorded costs in "
                "mi300x-sim.toml: balanced by test count)",
                "*gpuperf — SIMULATED DEVICE*",
                f"gpuperf: shard {index}/3: 2 of 6 measuring tests*",
            ]
        )
    assert sorted(ran) == sorted(set(ran)) and len(ran) == 8


def test_recorded_costs_steer_the_plan(gp):
    gp.test_file(TESTS)
    gp.run("--gpuperf-save").assert_outcomes(passed=8)  # every test gets a recorded cost
    reports = _run_all(gp)
    plans = [document["shard"] for _, document in reports]
    assert all(plan["basis"] == "baseline" and plan["costed"] == 6 for plan in plans)
    assert {plan["digest"] for plan in plans} == {plans[0]["digest"]}
    reports[0][0].stdout.fnmatch_lines(
        [
            "gpuperf: shard 1/3: * of 6 measuring tests*, planned cost * ms of * ms (recorded "
            "time × samples in mi300x-sim.toml*"
        ]
    )


@pytest.mark.slow
def test_a_shard_under_xdist_reports_its_plan_from_the_controller(gp):
    gp.test_file(TESTS)
    result = gp.run_subprocess(
        "--gpuperf", "-n", "2", "--gpuperf-shard=2/3", "--gpuperf-json=x.json"
    )
    result.assert_outcomes(passed=3)
    document = json.loads((gp.path / "x.json").read_text())
    assert document["shard"]["index"] == 2 and document["shard"]["tests_failed"] == 0
    # the controller saw every test's outcome; the places came with the workers' plan
    shard = document["shard"]
    assert list(shard["outcomes"]) == shard["tests"] and len(shard["tests"]) == 3
    assert all(o == {"outcome": "passed", "message": ""} for o in shard["outcomes"].values())
    assert shard["positions"] == sorted(shard["positions"]) and len(shard["positions"]) == 3
    assert document["suite"]["checks"] == 6
    result.stdout.fnmatch_lines(["gpuperf: shard 2/3: 2 of 6 measuring tests (+1 not measuring)*"])


@pytest.mark.parametrize("value", ["0/3", "4/3", "two/3", "3"])
def test_a_bad_shard_is_a_usage_error_naming_the_option(gp, value):
    gp.test_file(TESTS)
    result = gp.run("--gpuperf", f"--gpuperf-shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: pytest-gpuperf: --gpuperf-shard: expected K/N with 1 <= K <= N *{value!r}"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_shard_count_beyond_any_ci_matrix_is_refused_at_once(gp):
    """N = 100000000 planned 100 million shard loads: 71 s and 2.4 GB, then MemoryError."""
    gp.test_file(TESTS)
    result = gp.run("--gpuperf", "--gpuperf-shard=1/100000000")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: pytest-gpuperf: --gpuperf-shard: at most 256 shards (one CI runner each*"]
    )
    # the most a matrix runs is allowed: 8 tests leave shard 256 none (pytest's exit 5)
    assert gp.run("--gpuperf", "--gpuperf-shard=256/256").ret == pytest.ExitCode.NO_TESTS_COLLECTED


SLOW = """

@pytest.mark.min_bw(0.99)
def test_below_its_floor(gpu_bench):
    add(gpu_bench)


def test_broken():
    assert False
"""


def test_a_shard_whose_test_failed_fails_the_merge(gp, capsys, monkeypatch):
    from pytest_gpuperf.commands.merge.__main__ import main

    gp.test_file(TESTS + SLOW)
    for k in (1, 2):
        gp.run("--gpuperf", f"--gpuperf-shard={k}/2", f"--gpuperf-json=s{k}.json")
    summary = gp.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    reports = [str(gp.path / "s1.json"), str(gp.path / "s2.json")]
    code = main(
        [
            *reports,
            "--junit",
            str(gp.path / "j.xml"),
            "--markdown",
            str(gp.path / "m.md"),
            "--json",
            str(gp.path / "merged.json"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "1 test failed the gate: test_perf.py::test_below_its_floor" in out
    # the plain test that failed is named, with pytest's line for it (it was "1 other test
    # failed")
    assert "test test_perf.py::test_broken failed: assert False" in out and "FAILED" in out
    xml = (gp.path / "j.xml").read_text()
    assert 'failures="3"' in xml  # the floor's failure, test_broken's and the run's
    assert xml.count("<failure ") == 3
    assert 'name="test_below_its_floor [vector_add, cold]"' in xml
    # every test of both shards once, in the suite's collection order, measuring or not
    names = re.findall(r'<testcase classname="test_perf" name="([^"]+)"', xml)
    assert names == [
        *(f"test_measures[{size}] [vector_add, cold]" for size in range(6)),
        "test_plain_one",
        "test_plain_two",
        "test_below_its_floor [vector_add, cold]",
        "test_broken",
    ]
    merged = json.loads((gp.path / "merged.json").read_text())
    assert [test["test_id"].split("::")[1] for test in merged["merge"]["tests"]] == [
        *(f"test_measures[{size}]" for size in range(6)),
        "test_plain_one",
        "test_plain_two",
        "test_below_its_floor",
        "test_broken",
    ]
    broken = merged["merge"]["tests"][-1]
    assert broken == {
        "test_id": "test_perf.py::test_broken",
        "shard": broken["shard"],
        "outcome": "failed",
        "message": "assert False",
        "measuring": False,
        "measurements": 0,
    }
    assert summary.read_text() == (gp.path / "m.md").read_text()  # the job summary too
    assert "#### Failures" in summary.read_text()


@pytest.mark.parametrize(
    ("second", "words"),
    [
        (("--gpuperf-suite-alarm=0.05",), "shards disagree on the suite false-alarm target"),
        (
            ("--deselect", "test_perf.py::test_measures[5]"),
            "shards disagree on the suite size (measuring tests): 1/2: 6; 2/2: 5",
        ),
        (
            ("--gpuperf-device=mi325x",),
            "shards disagree on the device key: 1/2: mi300x-sim; 2/2: mi325x-sim",
        ),
    ],
)
def test_shards_of_different_runs_fail_the_merge(gp, capsys, second, words):
    """Two runners that did not run the same thing: another budget, another selection
    (another checkout's tests), another device model."""
    from pytest_gpuperf.commands.merge.__main__ import main

    gp.test_file(TESTS)
    gp.run("--gpuperf", "--gpuperf-shard=1/2", "--gpuperf-json=s1.json")
    gp.run("--gpuperf", "--gpuperf-shard=2/2", "--gpuperf-json=s2.json", *second)
    code = main(
        [str(gp.path / "s1.json"), str(gp.path / "s2.json"), "--markdown", str(gp.path / "m.md")]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert f"gpuperf: FAILED: {words}" in out
    assert words in (gp.path / "m.md").read_text()  # the summary's errors say it too


def test_shards_run_without_gpuperf_merge_on_their_outcomes_alone(gp, capsys):
    """A smoke run (no --gpuperf) measures nothing: its measuring tests without a measurement
    are not a lost result, and a shard that measured beside one that did not is not one run."""
    from pytest_gpuperf.commands.merge.__main__ import main

    gp.test_file(TESTS)
    for k in (1, 2):
        gp.run(f"--gpuperf-shard={k}/2", f"--gpuperf-json=s{k}.json")
    reports = [str(gp.path / "s1.json"), str(gp.path / "s2.json")]
    assert main(reports) == 0, capsys.readouterr().out
    assert "merged 2 shards: 8 tests (6 measuring in the suite, 0 measured" in (
        capsys.readouterr().out
    )
    gp.run("--gpuperf", "--gpuperf-shard=2/2", "--gpuperf-json=s2.json")
    assert main(reports) == 1
    assert "shards disagree on whether they measured (--gpuperf): 1/2: False; 2/2: True" in (
        capsys.readouterr().out
    )
