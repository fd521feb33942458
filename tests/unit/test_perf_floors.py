"""The perf suite's H100 floors against the H100 run they were derived from
(tests/perf/measured/h100-sxm.json): loose enough that the measured kernels pass with room for
another board's spread, tight enough that a real slowdown at HBM-bound sizes fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
MEASURED = json.loads((REPO / "tests" / "perf" / "measured" / "h100-sxm.json").read_text())
MIN_HEADROOM = 1.07  # measured / floor: the +/-7% MI300X run spread, at every size
MAX_HEADROOM = 1.20  # at HBM-bound sizes: a 20% slowdown must fail on the floor alone
HBM_BOUND_BYTES = 200e6  # four times the H100's 50 MB L2


perf = load_script("perf_conftest", REPO / "tests" / "perf" / "conftest.py")
ROWS = MEASURED["rows"]


def _floor(row):
    return perf.floor_for(row["kernel"], row["bytes"], "h100-sxm", MEASURED["peak_bps"])


def test_the_measurement_is_the_h100_the_floors_name():
    assert MEASURED["device"] == "h100-sxm"
    assert MEASURED["backend"] == "cuda"
    assert MEASURED["peak_bps"] == pytest.approx(3.35e12)


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"{row['id']}-{row['cache']}")
def test_every_measured_row_clears_its_floor_with_room(row):
    floor = _floor(row)
    if floor is None:
        assert row["efficiency"] < 0.1, "a launch-bound size, yet the kernel streamed well"
        return
    assert row["efficiency"] >= MIN_HEADROOM * floor, (
        f"{row['id']} ({row['cache']}): measured {row['efficiency']:.3f}, floor {floor:.3f} "
        f"leaves less than {MIN_HEADROOM - 1:.0%} headroom"
    )


@pytest.mark.parametrize(
    "row",
    [row for row in ROWS if row["bytes"] >= HBM_BOUND_BYTES],
    ids=lambda row: f"{row['id']}-{row['cache']}",
)
def test_a_large_slowdown_at_hbm_bound_sizes_fails_the_floor(row):
    floor = _floor(row)
    assert floor is not None
    assert row["efficiency"] <= MAX_HEADROOM * floor, (
        f"{row['id']} ({row['cache']}): measured {row['efficiency']:.3f}, floor {floor:.3f}: "
        f"a {MAX_HEADROOM - 1:.0%} slowdown would still pass"
    )


def test_every_floored_kernel_was_measured_on_the_h100():
    measured = {row["kernel"] for row in ROWS}
    unmeasured = {kernel for kernel in perf.FLOORS if kernel not in measured}
    assert unmeasured == set(), f"floors without an H100 row: {sorted(unmeasured)}"


def test_an_unknown_device_gets_the_lowest_floor_in_the_table():
    assert perf.floor_for("vector_add", 10**10, None, 1e12) == pytest.approx(
        min(perf.FLOORS["vector_add"].values()), abs=0.002
    )
