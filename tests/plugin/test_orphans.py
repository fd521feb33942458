"""Baseline hygiene: entries no test produced are listed at the end of a run and can be
pruned; a renamed kernel's old entry is named, not silently kept."""

from __future__ import annotations

import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

NAMED = """
def test_add(gpu_bench):
    add(gpu_bench, name="{name}")

def test_other(gpu_bench):
    add(gpu_bench)
"""


def entry_keys(gp) -> list[tuple[str, str]]:
    document = tomllib.loads((gp.path / "baselines" / "mi300x-sim.toml").read_text())
    return sorted((e["id"], e["name"]) for e in document["entry"])


def test_a_renamed_measurement_leaves_an_orphan_that_is_listed_then_pruned(gp):
    gp.test_file(NAMED.format(name="naive"))
    gp.run("--gpuperf-save").assert_outcomes(passed=2)
    gp.test_file(NAMED.format(name="tiled"))  # the kernel was renamed
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "gpuperf: 1 baseline entry no test of this run produced (a renamed or removed*"
            "--gpuperf-prune removes them",
            "gpuperf:   orphan: test_perf.py::test_add [[]naive, cold] in baselines/mi300x-sim.toml"
            " (not measured by its test)",
        ]
    )
    pruned = gp.run("--gpuperf", "--gpuperf-prune")
    pruned.stdout.fnmatch_lines(
        ["gpuperf: pruned 1 orphaned baseline entry from baselines/mi300x-sim.toml"]
    )
    assert entry_keys(gp) == [("test_perf.py::test_other", "vector_add")]


def test_a_removed_test_is_an_orphan_but_a_deselected_one_is_not(gp):
    gp.test_file(NAMED.format(name="naive"))
    gp.run("--gpuperf-save").assert_outcomes(passed=2)
    deselected = gp.run("--gpuperf", "-k", "other")
    assert "no test of this run produced" not in deselected.stdout.str()
    gp.test_file(NAMED.format(name="naive").split("def test_other")[0])  # test_other removed
    result = gp.run("--gpuperf")
    result.stdout.fnmatch_lines(
        ["*orphan: test_perf.py::test_other [[]vector_add, cold]*(test not collected)"]
    )


def test_orphans_of_files_not_collected_are_left_alone(gp):
    gp.test_file(NAMED.format(name="naive"))
    gp.run("--gpuperf-save").assert_outcomes(passed=2)
    gp.test_file("def test_alone(gpu_bench):\n    add(gpu_bench)\n", name="test_second")
    result = gp.run("--gpuperf", "--gpuperf-prune", "test_second.py")
    assert "no test of this run produced" not in result.stdout.str()
    assert len(entry_keys(gp)) == 2


def test_counts_agree_between_the_table_and_the_notes(gp):
    gp.test_file(NAMED.format(name="naive"))
    result = gp.run("--gpuperf")
    result.stdout.fnmatch_lines(
        ["*2 of 2 measurements have no baseline for mi300x-sim*", "2 measurements in 2 tests: 2 ok"]
    )


def test_an_orphans_test_id_reaches_the_terminal_escaped(gp):
    """A test id in a baseline file is whatever the file says: printed raw, ESC]0;...BEL
    retitled the terminal, ESC[2J cleared it and a carriage return overwrote the line."""
    gp.test_file(NAMED.format(name="naive"))
    gp.run("--gpuperf-save").assert_outcomes(passed=2)
    path = gp.path / "baselines" / "mi300x-sim.toml"
    forged = 'id = "test_perf.py::test_other\\u001b]0;owned\\u0007\\u001b[2J\\r"'
    path.write_text(path.read_text().replace('id = "test_perf.py::test_other"', forged))
    result = gp.run("--gpuperf")
    out = result.stdout.str()
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\r" not in out
    result.stdout.fnmatch_lines(
        ["*orphan: test_perf.py::test_other\\x1b]0;owned\\x07\\x1b[[]2J\\r [[]vector_add, cold]*"]
    )


CASES = """
@pytest.mark.parametrize("n", [1, 2, 3])
def test_p(gpu_bench, n):
    add(gpu_bench)
    assert n != int(__import__("os").environ.get("FAIL_CASE", "0"))

@pytest.mark.slow
def test_other(gpu_bench):
    add(gpu_bench)
"""
ALL_CASES = [
    ("test_perf.py::test_other", "vector_add"),
    ("test_perf.py::test_p[1]", "vector_add"),
    ("test_perf.py::test_p[2]", "vector_add"),
    ("test_perf.py::test_p[3]", "vector_add"),
]


@pytest.mark.parametrize(
    "selection",
    [
        ("test_perf.py::test_p[1]",),  # the `update:` line of a failing case, as printed
        ("test_perf.py::test_p",),
        ("-k", "test_p and 1"),
        ("-m", "slow", "-o", "markers=slow: a slow test"),
        ("--deselect", "test_perf.py::test_p[2]"),
        ("--gpuperf-shard=1/2",),
        ("-x",),  # FAIL_CASE=1: the first case fails, -x stops the run there
    ],
    ids=["node-id", "function", "k", "m", "deselect", "shard", "x"],
)
def test_prune_never_deletes_a_test_the_run_left_out(gp, monkeypatch, selection):
    """A printed `update:` line names one parametrized case: run as printed, its siblings were
    listed as orphans ("test not collected") and the --gpuperf-prune the same output
    recommends deleted their entries. A test a selection leaves out is not gone."""
    gp.test_file(CASES)
    gp.run("--gpuperf-save", "-o", "markers=slow: a slow test").assert_outcomes(passed=4)
    assert entry_keys(gp) == ALL_CASES
    if selection == ("-x",):
        monkeypatch.setenv("FAIL_CASE", "1")
    listed = gp.run("--gpuperf", *selection)
    assert "not collected" not in listed.stdout.str()
    pruned = gp.run("--gpuperf", "--gpuperf-prune", *selection)
    assert "pruned" not in pruned.stdout.str()
    assert entry_keys(gp) == ALL_CASES


def test_a_test_removed_from_a_suite_run_whole_is_still_pruned(gp):
    gp.test_file(CASES)
    gp.run("--gpuperf-save", "-o", "markers=slow: a slow test").assert_outcomes(passed=4)
    gp.test_file(CASES.replace("[1, 2, 3]", "[1, 2]"))  # case 3 removed
    kept = gp.run("--gpuperf", "--gpuperf-prune", "test_perf.py::test_p[1]")
    kept.stdout.fnmatch_lines(["*--gpuperf-prune: this run selected tests (node ids)*kept*"])
    assert len(entry_keys(gp)) == 4
    pruned = gp.run("--gpuperf", "--gpuperf-prune", "-o", "markers=slow: a slow test")
    pruned.stdout.fnmatch_lines(["gpuperf: pruned 1 orphaned baseline entry from *"])
    assert ("test_perf.py::test_p[3]", "vector_add") not in entry_keys(gp)
    assert len(entry_keys(gp)) == 3


def test_tests_a_conftest_drops_silently_are_not_orphans(gp):
    gp.test_file(CASES)
    gp.run("--gpuperf-save", "-o", "markers=slow: a slow test").assert_outcomes(passed=4)
    gp.pytester.makeconftest(
        gp.path.joinpath("conftest.py").read_text()
        + "\n\ndef pytest_collection_modifyitems(items):\n"
        + "    items[:] = [i for i in items if 'test_other' in i.nodeid]\n"
    )
    result = gp.run("--gpuperf", "--gpuperf-prune", "-o", "markers=slow: a slow test")
    result.assert_outcomes(passed=1)
    assert entry_keys(gp) == ALL_CASES
