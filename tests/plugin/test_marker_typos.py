"""A misspelt marker of ours sets nothing: `@pytest.mark.min_bww(0.9)` passed at 45% with
pytest's generic "unknown mark" warning. Under --gpuperf, an unknown marker within edit
distance 2 of `min_bw` or `gpuperf` fails its test with one line naming the right one; a
marker the ini registers is another plugin's and is left alone."""

from __future__ import annotations

import pytest

from pytest_gpuperf.config.parsing import edit_distance, misspelt_marker

TYPO = """
@pytest.mark.{marker}
def test_typo(gpu_bench):
    add(gpu_bench)

def test_fine(gpu_bench):
    add(gpu_bench)
"""


@pytest.mark.parametrize(
    ("marker", "ours"),
    [("min_bww(0.9)", "min_bw"), ("minbw(0.9)", "min_bw"), ("gpu_perf(strict=True)", "gpuperf")],
)
def test_a_misspelt_marker_fails_its_test_naming_the_right_one(gp, marker, ours):
    gp.test_file(TYPO.format(marker=marker))
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1, errors=1)  # at setup, as any bad marker of ours
    name = marker.split("(")[0]
    line = (
        f"pytest-gpuperf: test_perf.py::test_typo: unknown marker '{name}': did you mean "
        f"'{ours}'? A misspelt marker sets nothing (register '{name}' in the ini's markers if "
        "it is another plugin's; --strict-markers makes any unknown marker an error)"
    )
    failure = result.stdout.str().split(" ERROR at setup of test_typo ")[1].split("=====")[0]
    assert [text for text in failure.splitlines() if text.strip("_ ")] == [line]


def test_a_registered_marker_is_another_plugins_and_a_smoke_run_says_nothing(gp):
    gp.test_file(TYPO.format(marker="min_bww(0.9)"))
    registered = gp.run("--gpuperf", "-o", "markers=min_bww: another plugin's")
    registered.assert_outcomes(passed=2)
    smoke = gp.run()  # without --gpuperf no floor is checked: pytest's own warning is enough
    smoke.assert_outcomes(passed=2)


def test_what_counts_as_a_typo():
    known = {"parametrize", "skip", "slow", "min_bw", "gpuperf"}
    assert misspelt_marker("min_bww", known) == "min_bw"
    assert misspelt_marker("Min_BW", known) == "min_bw"
    assert misspelt_marker("gpuprf", known) == "gpuperf"
    for fine in ("min_bw", "gpuperf", "slow", "skip", "parametrize", "gpu", "memory_bound"):
        assert misspelt_marker(fine, known) == "", fine
    assert misspelt_marker("min_bww", known | {"min_bww"}) == ""
    assert edit_distance("min_bw", "min_bww") == 1 and edit_distance("kitten", "sitting") == 3
