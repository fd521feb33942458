"""Every option and ini value that sets a rate or a level has a range
(pytest_gpuperf/config/ranges.py);
outside it the run stops before any test with exit 4 naming the range, and no allowance the
gate computes is ever infinite or NaN (a budget of 1e-17 once made every allowance infinite,
and a 60% slowdown passed)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.config import ranges
from pytest_gpuperf.gate.noise import stored_band

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""

# (flag, ini key, its range, values outside it)
RATE_OPTIONS = [
    ("--gpuperf-suite-alarm", "gpuperf_suite_alarm", ranges.SUITE_ALARM, ["1e-17", "0.6", "1"]),
    ("--gpuperf-tolerance", "gpuperf_tolerance", ranges.TOLERANCE, ["5", "0.9", "-0.01", "nan"]),
    (
        "--gpuperf-compare-threshold",
        "gpuperf_compare_threshold",
        ranges.COMPARE_THRESHOLD,
        ["0.75", "inf"],
    ),
    (
        "--gpuperf-compare-code-spread",
        "gpuperf_compare_code_spread",
        ranges.CODE_SPREAD,
        ["0.6", "-1"],
    ),
    ("--gpuperf-gpu-margin", "gpuperf_gpu_margin", ranges.GPU_MARGIN, ["0.51"]),
]


@pytest.mark.parametrize(("flag", "ini", "allowed", "bad"), RATE_OPTIONS)
def test_a_rate_outside_its_range_stops_the_run_naming_the_range(gp, flag, ini, allowed, bad):
    gp.test_file(PLAIN)
    for value in bad:
        result = gp.run("--gpuperf", f"{flag}={value}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, value
        result.stderr.fnmatch_lines(
            [f"*{flag}*must be in {_literal(allowed.text)}, got '{value}'*"]
        )
        assert "Traceback" not in result.stderr.str()
    gp.pytester.makeini(f"[pytest]\n{ini} = {bad[0]}\n")
    result = gp.run("--gpuperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{ini} (ini)*must be in {_literal(allowed.text)}*"])


@pytest.mark.parametrize(("flag", "ini", "allowed", "bad"), RATE_OPTIONS)
def test_both_ends_of_a_range_are_accepted(gp, flag, ini, allowed, bad):
    gp.test_file(PLAIN)
    for value in (allowed.low, allowed.high):
        gp.run("--gpuperf", f"{flag}={value:g}").assert_outcomes(passed=1)


def test_a_tiny_suite_budget_cannot_disarm_the_gate(gp):
    """The issue's case: --gpuperf-suite-alarm=1e-17 with a 60% slowdown passed, exit 0."""
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    gp.write_kernel(efficiency=0.2)
    result = gp.run("--gpuperf", "--gpuperf-suite-alarm=1e-17")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-suite-alarm*must be in [[]0.0001, 0.5]*1e-17*"])
    at_the_edge = gp.run("--gpuperf", f"--gpuperf-suite-alarm={ranges.SUITE_ALARM.low}")
    at_the_edge.assert_outcomes(failed=1)


def _literal(text: str) -> str:
    """`text` for fnmatch_lines, whose [ ] are character classes."""
    return text.replace("[", "[[]")


def _ref(saves: int = 1) -> BaselineRef:
    return BaselineRef(
        efficiency=0.8,
        efficiency_ci=(0.79, 0.81),
        run_spread=0.02,
        bandwidth_bps=1e12,
        time_s=1e-3,
        cache="cold",
        source="measured",
        provenance="",
        path="baselines/h100-sxm.toml",
        saves=saves,
        backend="cuda",
    )


@pytest.mark.parametrize("rate", [1e-17, 1e-12, ranges.SUITE_ALARM.low / 100_000, 0.25])
@pytest.mark.parametrize("saves", [1, 2, 5])
def test_no_allowance_is_infinite_or_nan_at_any_level_a_run_can_reach(rate, saves):
    band = stored_band(_ref(saves), 0.004, false_alarm_rate=rate)
    assert math.isfinite(band.noise) and band.noise > 0
    assert math.isfinite(band.quantile)
    if rate >= ranges.SUITE_ALARM.low / 1000:  # a run of 1,000 tests at the smallest budget
        assert band.noise < 0.5


def test_a_band_that_would_not_be_finite_is_refused():
    with pytest.raises(ValueError, match="false-alarm rate"):
        stored_band(_ref(), 0.004, false_alarm_rate=0.0)
    broken = dataclasses.replace(_ref(saves=3), history_sd=math.nan)
    with pytest.raises(ValueError, match="came out nan"):
        stored_band(broken, 0.004, false_alarm_rate=0.01)
