"""bench/stored_lengths.py and bench/stored_noise.py: the H100 outputs of 2026-11-27 committed in
bench/measured/, analysed again, give the tables docs/benchmarks.md and docs/measurement.md
quote (the allowance by saves before and after, the false alarms and catches, and the spread
between processes taken apart)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MEASURED = REPO / "bench" / "measured"


def _load(name: str):
    sys.path.insert(0, str(REPO / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(
            f"gpuperf_bench_{name}", REPO / "bench" / f"{name}.py"
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(REPO / "bench"))


def _rows(file: str) -> dict[str, dict]:
    bench = _load("stored_lengths")
    document = json.loads((MEASURED / file).read_text())
    return {row["entry"]: row for row in bench.analyse(document)}


def _allowances(row: dict) -> list[float]:
    return [row["allowance_by_saves"][str(k)]["allowance"] for k in range(1, 6)]


def test_after_no_save_of_steady_code_pooled_a_neighbour_and_no_unchanged_run_failed():
    after = _rows("stored-lengths-h100-2026-11-27-after.json")
    mid, long = _allowances(after["mid"]), _allowances(after["long"])
    assert mid == sorted(mid, reverse=True)  # 3.57, 2.05, 1.65, 1.35, 1.14%
    assert mid[2] == pytest.approx(0.0165, abs=5e-5)
    assert long == [pytest.approx(0.01)] * 5  # the tolerance from the first save
    bases = {a["basis"] for r in after.values() for a in r["allowance_by_saves"].values()}
    assert "pooled" not in bases
    assert sum(r["unchanged"]["runs"] for r in after.values()) == 42
    assert sum(r["unchanged"]["failed"] for r in after.values()) == 0
    assert (after["mid"]["drop"]["failed"], after["mid"]["drop"]["runs"]) == (17, 20)


def test_before_the_fourth_save_of_steady_code_widened_the_28_us_band_by_pooling():
    before = _rows("stored-lengths-h100-2026-11-27-before.json")
    third, fourth = (
        before["mid"]["allowance_by_saves"]["3"],
        before["mid"]["allowance_by_saves"]["4"],
    )
    assert third["basis"] == "history" and fourth["basis"] == "pooled"
    assert fourth["allowance"] > 1.5 * third["allowance"]  # 1.50% -> 2.72%


def test_the_noise_decomposition_renders():
    bench = _load("stored_noise")
    document = json.loads((MEASURED / "stored-noise-h100-2026-11-27.json").read_text())
    rows = {row["length"]: row for row in bench.analyse(document)}
    assert set(rows) == {"7.8us", "28us", "210us"} and rows["28us"]["processes"] == 10
    # the spread between processes falls with the kernel's length (launch jitter)
    assert (
        rows["7.8us"]["between_process_sd"]
        > rows["28us"]["between_process_sd"]
        > rows["210us"]["between_process_sd"]
    )
    assert "between-process spread" in bench.render(document, markdown=True)


def test_the_minimum_sampling_time_and_the_8_df_prior_on_one_board():
    """The later before/after of docs/benchmarks.md (GPU-9e56b314, one call): the 27 us band
    after 3 saves falls from 1.68% to 1.47%, the first save's from 3.55% to 1.81%; no save of
    steady code raises a band; no unchanged run failed after confirmation."""
    before = _rows("stored-lengths-h100-2026-11-27-9e56b314-before.json")
    after = _rows("stored-lengths-h100-2026-11-27-9e56b314-after.json")
    mid_before, mid_after = _allowances(before["mid"]), _allowances(after["mid"])
    assert mid_before[2] == pytest.approx(0.0168, abs=1e-4)
    assert mid_after[2] == pytest.approx(0.0147, abs=1e-4) and mid_after[2] <= 0.015
    assert mid_after[0] == pytest.approx(0.0181, abs=1e-4)
    for row in after.values():
        allowances = _allowances(row)
        assert allowances == sorted(allowances, reverse=True), row["entry"]
    assert _allowances(after["short"])[2] == pytest.approx(0.0501, abs=1e-4)
    assert sum(r["unchanged"]["runs"] for r in after.values()) == 42
    assert sum(r["unchanged"]["failed"] for r in after.values()) == 0
    assert sum(r["unchanged"]["first"] for r in after.values()) == 1
    assert (after["mid"]["drop"]["failed"], after["mid"]["drop"]["runs"]) == (16, 20)
    assert (after["long"]["drop"]["failed"], after["long"]["drop"]["runs"]) == (20, 20)


def test_the_process_level_lies_outside_the_kernels_blocks():
    """bench/process_level.py on two boards (per-block %globaltimer slots): the launch's own
    span scatters by at most 0.12% between processes, the events around it by 0.85% or more."""
    bench = _load("process_level")
    for board in ("9e730550", "4cb518d3"):
        document = json.loads(
            (MEASURED / f"process-level-h100-2026-11-27-board-{board}.json").read_text()
        )
        table = bench.analyse(document)
        spans = [
            float(r[2].rstrip("%"))
            for r in table
            if r[1] == "in-kernel: span (globaltimer), trimmed"
        ]
        events = [float(r[2].rstrip("%")) for r in table if r[1] == "in-kernel: events, trimmed"]
        assert spans and max(spans) <= 0.12 and len(events) == 2 and min(events) >= 0.85, table
        assert "in-kernel: span (globaltimer)" in bench.render(document, markdown=True)


def test_a_second_board_keeps_the_27_us_band_under_one_and_a_half_percent():
    after = _rows("stored-lengths-h100-2026-11-27-425f09c8-after.json")
    mid = _allowances(after["mid"])
    assert mid == sorted(mid, reverse=True) and mid[2] == pytest.approx(0.0141, abs=1e-4)
    assert sum(r["unchanged"]["first"] for r in after.values()) == 0
    assert (after["mid"]["drop"]["failed"], after["mid"]["drop"]["runs"]) == (16, 20)
    # the 7.8 us entry's third save landed far out: the one case in which the band widens
    short = _allowances(after["short"])
    assert short[2] > short[1]


def test_an_empty_launch_of_the_same_shape_cancels_no_level_at_27_us():
    bench = _load("process_level")
    document = json.loads(
        (MEASURED / "process-level-h100-2026-11-27-board-425f09c8.json").read_text()
    )
    rows = {(r[0], r[1]): r for r in bench.analyse(document)}
    difference = rows[("27us", "plain - empty (of plain's time)")]
    plain = rows[("27us", "plain: events, trimmed")]
    assert float(difference[2].rstrip("%")) > float(plain[2].rstrip("%"))
    assert rows[("7.6us", "plain - empty (of plain's time)")][3] == "correlation +0.90"


def test_with_cold_graph_batches_every_must_show_of_issue_39_is_met():
    """The release's tree on GPU-29abafc0: 20-50 us at the 1% tolerance from the first save
    and every -2% caught; 7.5 us at most 3% after 3 saves; no false alarm; no band rises."""
    final = _rows("stored-lengths-h100-2026-11-27-29abafc0-final.json")
    mid, short = _allowances(final["mid"]), _allowances(final["short"])
    assert 20 < final["mid"]["time_us"] < 50 and final["short"]["time_us"] <= 10
    assert mid[2] <= 0.015 and short[2] <= 0.03
    assert final["mid"]["drop"]["failed"] >= 0.95 * final["mid"]["drop"]["runs"] > 0
    assert sum(r["unchanged"]["runs"] for r in final.values()) >= 40
    assert sum(r["unchanged"]["first"] + r["unchanged"]["failed"] for r in final.values()) == 0
    for row in final.values():
        allowances = _allowances(row)
        assert allowances == sorted(allowances, reverse=True), row["entry"]
