"""The roofline's pieces without pytest: the dense compute peaks and their citations, a
measurement's place on the roofline, the declared work's checks, the floors min_flops and
min_roofline and the verdict they make, and the parsing of their marks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pytest_gpuperf.config.floors import MIN_FLOPS, MIN_ROOFLINE, MarkerArgs, floor_rule
from pytest_gpuperf.config.parsing import misspelt_marker
from pytest_gpuperf.config.settings import Settings, settings_for_test
from pytest_gpuperf.engine.roofline import (
    Work,
    attainable,
    attention_flops,
    declared_work,
    gemm_flops,
)
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.gate.recheck import recheck
from pytest_gpuperf.gate.roofline import (
    WorkFloors,
    check_flops_floor,
    check_roofline_floor,
    check_work_floors,
    failed_floor,
)
from pytest_gpuperf.record.checks import NO_BASELINE, BaselineCheck, FloorCheck
from pytest_gpuperf.record.verdict import FAIL, MARGINAL, PASS, Row
from pytest_gpuperf.runtime.compute_peaks import (
    COMPUTE_PEAKS,
    MATH_TYPES,
    peak_flops_per_s,
    peaks_of,
)
from pytest_gpuperf.runtime.devices import KNOWN_DEVICES
from pytest_gpuperf.simulate import kernel_models
from tests.records import measurement

T = 1e12
GEMM_8192 = 2 * 8192**3  # 1.1 TFLOP
BF16_MI300X = Work(GEMM_8192, "bf16", 1307.4 * T)


# -- the compute peaks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "math", "tflops"),
    [
        ("mi300x", "bf16", 1307.4),
        ("mi300x", "fp8", 2614.9),
        ("mi300x", "fp32", 163.4),
        ("mi325x", "bf16", 1307.4),
        ("mi250x", "bf16", 191.5),  # one GCD: half the card's 383
        ("h100-sxm", "bf16", 989.5),  # the data sheet's 1,979 with sparsity, halved
        ("h100-sxm", "fp32", 67.0),  # CUDA cores: fp32 has no tensor path (tf32 is its own)
        ("h100-sxm", "tf32", 494.5),
        ("h100-pcie", "fp8", 1513.0),
        ("h200", "fp8", 1979.0),
        ("a100-sxm-80gb", "bf16", 312.0),
        ("a100-pcie-40gb", "int8", 624.0),
        ("b200", "bf16", 2250.0),
        ("b200", "fp64", 37.0),
    ],
)
def test_dense_peaks_from_the_data_sheets(key, math, tflops):
    assert peak_flops_per_s(key, KNOWN_DEVICES[key].name, math) == pytest.approx(tflops * T)


def test_every_device_of_the_issue_has_its_peaks_and_every_entry_is_cited():
    for key in ("mi300x", "mi325x", "mi250x", "h100-sxm", "h100-pcie", "h200", "b200"):
        assert {"bf16", "fp16", "fp32", "fp64"} <= set(peaks_of(key)), key
    assert all(key.startswith("a100") for key in COMPUTE_PEAKS if "a100" in key)
    for key, (peaks, source) in COMPUTE_PEAKS.items():
        assert key in KNOWN_DEVICES, key  # a peak is for a device the table knows
        assert set(peaks) <= set(MATH_TYPES) and all(v > 1e12 for v in peaks.values())
        assert "data sheet" in source or "specifications" in source, key
        # dense: a type's peak is never above fp8's, and bf16 and fp16 agree
        assert peaks.get("fp16") == peaks.get("bf16")


def test_the_mi300x_ridge_is_247_flop_per_byte_for_bf16_and_493_for_fp8():
    spec = KNOWN_DEVICES["mi300x"]
    assert peaks_of("mi300x")["bf16"] / spec.peak_bps == pytest.approx(246.7, abs=0.05)
    assert peaks_of("mi300x")["fp8"] / spec.peak_bps == pytest.approx(493.4, abs=0.05)


@pytest.mark.parametrize(
    ("key", "math", "words"),
    [
        (
            "a100-sxm-80gb",
            "fp8",
            "no fp8 peak known for NVIDIA A100 SXM4 80GB (a100-sxm-80gb): the device table "
            "has fp64, fp32, tf32, bf16, fp16, int8 there",
        ),
        ("mi250x", "tf32", "no tf32 peak known for AMD Instinct MI250X (one GCD) (mi250x)"),
        ("mi100", "bf16", "the device table has no compute peaks for it"),
        ("h100-sxm", "bf32", "unknown math type 'bf32'; valid types: fp64, fp32, tf32, bf16"),
    ],
)
def test_a_type_without_a_peak_is_stated_never_guessed(key, math, words):
    with pytest.raises(ConfigError) as refused:
        peak_flops_per_s(key, KNOWN_DEVICES[key].name, math)
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_the_simulators_math_types_are_the_tables():
    assert kernel_models.MATH_TYPES == MATH_TYPES


# -- the roofline of a measurement --------------------------------------------------------------


def test_a_compute_bound_gemm_is_judged_by_its_compute_roof():
    # 8192^3 bf16 in 1.2 ms, 400 MB declared: intensity far above the ridge
    m = measurement(time_s=1.2e-3, bytes_moved=3 * 2 * 8192**2, rel_ci=0.01, work=BF16_MI300X)
    roofline = m.roofline
    assert roofline is not None and roofline.bound == "compute"
    assert roofline.intensity == pytest.approx(GEMM_8192 / (3 * 2 * 8192**2))
    assert roofline.ridge == pytest.approx(1307.4e12 / 5.3e12)
    assert roofline.flops_per_s == pytest.approx(GEMM_8192 / 1.2e-3)
    assert roofline.attainable_flops_per_s == 1307.4e12
    assert roofline.compute_efficiency == pytest.approx(roofline.flops_per_s / 1307.4e12)
    assert roofline.roofline_efficiency == pytest.approx(roofline.compute_efficiency)
    low, high = roofline.compute_efficiency_ci  # the slow end of the time gives the low end
    assert low < roofline.compute_efficiency < high
    assert m.efficiency < 0.07  # 6% of peak bandwidth: what a bandwidth floor would judge


def test_below_the_ridge_the_roofline_efficiency_is_the_bandwidth_efficiency():
    work = Work(flops=10**9, math="bf16", peak_flops_per_s=1307.4e12)
    m = measurement(0.6, bytes_moved=10**8, rel_ci=0.005, work=work)  # 10 FLOP/B
    roofline = m.roofline
    assert roofline is not None and roofline.bound == "memory"
    assert roofline.attainable_flops_per_s == pytest.approx(10 * 5.3e12)
    assert roofline.roofline_efficiency == pytest.approx(m.efficiency)
    assert roofline.roofline_efficiency_ci == pytest.approx(m.efficiency_ci)


def test_attainable_is_the_lower_roof():
    assert attainable(1.0, 100.0, 10.0) == 10.0 and attainable(100.0, 100.0, 10.0) == 100.0


def test_a_measurement_without_work_has_no_roofline():
    assert measurement(0.8, time_s=1e-4).roofline is None


# -- declared work -----------------------------------------------------------------------------


def test_the_common_shapes():
    assert gemm_flops(8192, 8192, 8192) == GEMM_8192
    assert gemm_flops(np.int64(2), 3, 4, batch=5) == 240
    assert attention_flops(2, 16, 4096, 4096, 128) == 4 * 2 * 16 * 4096 * 4096 * 128
    assert attention_flops(2, 16, 4096, 4096, 128, causal=True) == 2 * 2 * 16 * 4096**2 * 128


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: gemm_flops(0, 1, 1), "gemm_flops: m must be positive, got 0"),
        (lambda: gemm_flops(1.5, 1, 1), "gemm_flops: m must be a whole number, got 1.5"),
        (lambda: gemm_flops(True, 1, 1), "gemm_flops: m must be a whole number, got True"),
        (lambda: attention_flops(1, 1, 1, 1, 1, causal=1), "causal must be True or False"),
    ],
)
def test_the_shapes_refuse_what_is_not_a_dimension(call, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        call()


def _declare(flops, math, key="mi300x"):
    name = KNOWN_DEVICES[key].name
    return declared_work(flops, math, device_key=key, device_name=name, label="t.py::g [gemm]")


def test_a_declaration_is_checked_and_carries_the_types_peak():
    assert _declare(None, None) is None
    work = _declare(np.int64(GEMM_8192), "bf16")
    assert work == Work(GEMM_8192, "bf16", 1307.4e12) and type(work.flops) is int


@pytest.mark.parametrize(
    ("flops", "math", "key", "words"),
    [
        (-5, "bf16", "mi300x", "flops= must be a positive whole number of floating-point "),
        (0, "bf16", "mi300x", "flops= must be a positive whole number"),
        (2.5, "bf16", "mi300x", "flops= got the float 2.5; a FLOP count is a whole number"),
        (2.0, "bf16", "mi300x", "(use int(2.0) if it is a count)"),
        (True, "bf16", "mi300x", "flops= got True, not a FLOP count"),
        ("many", "bf16", "mi300x", "flops= takes a whole number of operations, got str"),
        (10, None, "mi300x", "flops= needs math=, the type the kernel computes in"),
        (None, "bf16", "mi300x", "math='bf16' without flops="),
        (10, "bfloat16", "mi300x", "math=: unknown math type 'bfloat16'; valid types: fp64,"),
        (10, "fp8", "a100-sxm-80gb", "math='fp8': no fp8 peak known for NVIDIA A100 SXM4 80GB"),
    ],
)
def test_a_declaration_that_cannot_be_right_is_one_line(flops, math, key, words):
    with pytest.raises(ConfigError) as refused:
        _declare(flops, math, key)
    line = str(refused.value)
    assert line.startswith("t.py::g [gemm]: ") and words in line and "\n" not in line, line


# -- the floors and the verdict ----------------------------------------------------------------


def _gemm(efficiency: float, rel_ci: float = 0.002):
    """A compute-bound bf16 GEMM on the MI300X at `efficiency` of its compute roof."""
    time_s = GEMM_8192 / (efficiency * 1307.4e12)
    return measurement(time_s=time_s, bytes_moved=3 * 2 * 8192**2, rel_ci=rel_ci, work=BF16_MI300X)


def _baseline() -> BaselineCheck:
    return BaselineCheck(outcome=NO_BASELINE)


@pytest.mark.parametrize(
    ("efficiency", "rel_ci", "status", "straddles"),
    [(0.75, 0.002, PASS, False), (0.55, 0.002, FAIL, False), (0.601, 0.01, MARGINAL, True)],
)
def test_min_flops_is_decided_by_the_floors_rule(efficiency, rel_ci, status, straddles):
    check = check_flops_floor(_gemm(efficiency, rel_ci), 0.6)
    assert (check.status, check.straddles, check.origin) == (status, straddles, MIN_FLOPS)
    assert check.efficiency == pytest.approx(efficiency)


def test_min_roofline_floors_the_roof_that_binds():
    work = Work(flops=10**9, math="bf16", peak_flops_per_s=1307.4e12)
    memory_bound = measurement(0.5, bytes_moved=10**8, rel_ci=0.001, work=work)
    assert check_roofline_floor(memory_bound, 0.6).status == FAIL
    assert check_roofline_floor(memory_bound, 0.4).status == PASS
    assert check_flops_floor(memory_bound, 0.4).status == FAIL  # 2.5% of the compute peak


def test_a_missed_roofline_floor_fails_the_verdict_blocks_the_save_and_is_never_accepted():
    m = _gemm(0.5)
    flops, roofline = check_work_floors(m, WorkFloors(flops=0.6, roofline=0.4))
    assert flops is not None and flops.status == FAIL
    assert roofline is not None and roofline.status == PASS
    verdict = decide(baseline=_baseline(), flops_floor=flops, roofline_floor=roofline)
    assert verdict.status == FAIL and verdict.failed_checks == ("min_flops",)
    assert failed_floor(None, flops, roofline) is flops  # what keeps it from being saved
    marginal = check_flops_floor(_gemm(0.601, 0.01), 0.6)
    assert decide(baseline=_baseline(), flops_floor=marginal).status == MARGINAL
    floor_only = decide(baseline=_baseline(), roofline_floor=roofline)
    assert floor_only.status == PASS and floor_only.floors == (roofline,)


def test_the_merge_decides_a_roofline_floor_again_from_the_numbers():
    m = _gemm(0.5)
    forged = FloorCheck(
        floor=0.6, status=PASS, efficiency=0.9, efficiency_ci=(0.9, 0.9), origin=MIN_FLOPS
    )
    verdict = decide(baseline=_baseline(), flops_floor=forged)
    row, why = recheck(Row("t.py::test_gemm", m, verdict, "passed"))
    assert row.verdict.status == FAIL and row.verdict.failed_checks == ("min_flops",)
    assert "the report says pass, its numbers say fail" in why and "min_flops 50.00%" in why


def test_a_measurement_without_work_gets_no_roofline_floor():
    assert check_work_floors(measurement(0.8, time_s=1e-4), WorkFloors(flops=0.5)) == (None, None)


# -- the marks ---------------------------------------------------------------------------------


def test_the_marks_parse_as_min_bw_does_and_the_most_specific_applies():
    settings = settings_for_test(
        Settings(),
        "t.py::test_gemm",
        min_flops=[MarkerArgs((0.7,), {"name": "gemm"}), MarkerArgs((0.5,), {})],
        min_roofline=[MarkerArgs((0.8,), {"device": "h200"})],
    )
    rule = settings.floor_for("gemm", "mi300x", "cold", MIN_FLOPS)
    assert rule is not None and (rule.value, rule.origin) == (0.7, "min_flops(name='gemm')")
    other = settings.floor_for("other", "mi300x", "cold", MIN_FLOPS)
    assert other is not None and other.value == 0.5
    assert settings.floor_for("gemm", "mi300x", "cold", MIN_ROOFLINE) is None
    assert settings.floor_for("gemm", "h200", "cold", MIN_ROOFLINE) is not None
    assert settings.floor_for("gemm", "mi300x", "cold") is None  # min_bw: none given


@pytest.mark.parametrize(
    ("mark", "args", "words"),
    [
        (MIN_FLOPS, (60,), "must be in (0, 1] (a percentage? did you mean 0.6?)"),
        (MIN_FLOPS, ("fast",), "the fraction of the device's dense peak FLOP/s for the declared"),
        (MIN_ROOFLINE, (1.5,), "a fraction of the roof that binds at the kernel's arithmetic"),
        (MIN_ROOFLINE, (), "@pytest.mark.min_roofline takes one positional fraction"),
    ],
)
def test_a_bad_mark_names_the_test_and_the_mark(mark, args, words):
    with pytest.raises(ConfigError) as refused:
        floor_rule("t.py::test_gemm", MarkerArgs(args, {}), mark)
    assert str(refused.value).startswith(f"t.py::test_gemm: @pytest.mark.{mark}")
    assert words in str(refused.value)


def test_a_misspelt_roofline_mark_is_named():
    assert misspelt_marker("min_flop", set()) == "min_flops"
    assert misspelt_marker("min_rooflin", set()) == "min_roofline"
    assert misspelt_marker("min_flops", set()) == ""


def test_work_floors_say_whether_any_applies():
    assert not WorkFloors().any and WorkFloors(roofline=0.5).any
    assert dataclasses.replace(WorkFloors(), flops=0.2).any
