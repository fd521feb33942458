"""bench/stored_lengths.py, bench/stored_noise.py and bench/process_level.py: the analysis that
turns a run into the tables docs/benchmarks.md quotes, pinned on runs made up here with known
answers (the allowance by saves, false alarms and catches; the spread between processes taken
apart; what lies inside and outside a kernel's blocks; what a buffer set keeps). The GPU runs
the docs quote are raw runs, kept out of the repository (docs/benchmarks.md, "Raw runs")."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from tests.bench_scripts import load_script

BOARD = "GPU-00000000-0000-0000-0000-000000000000"


def _result(entry: str, **fields) -> dict:
    time_s = {"short": 7.8e-6, "mid": 28e-6, "long": 210e-6}[entry] * fields.pop("slower", 1.0)
    row = {
        "entry": entry,
        "test_id": f"test_lengths.py::test_scale[{entry}]",
        "time_s": time_s,
        "efficiency": 0.8 * 28e-6 / time_s,
        "board": BOARD,
        "delta": None,
        "allowance": None,
        "basis": "",
        "outcome": "no-baseline",
        "first_outcome": "no-baseline",
    }
    row.update(fields)
    return row


def _lengths_run(allowance_after: dict[str, list[float]]) -> dict:
    """Saves 1..k+1 of three entries (save k + 1 judged with `allowance_after[entry][k - 1]`,
    basis 'history' unless the allowance is 0.02: 'pooled'), then unchanged runs of which one
    fails its first round and none is confirmed, and drop runs of which 3 of 4 are caught."""
    runs: list[dict] = []
    saves = 1 + max(len(v) for v in allowance_after.values())
    for number in range(1, saves + 1):
        run = {"kind": "save", "number": number, "results": []}
        for entry, allowances in allowance_after.items():
            fields: dict = {"slower": 1 + 0.001 * number}
            if number > 1 and number - 2 < len(allowances):
                allowance = allowances[number - 2]
                fields.update(
                    allowance=allowance,
                    basis="pooled" if allowance == 0.02 else "history",
                    delta=0.0,
                    outcome="pass",
                    first_outcome="pass",
                )
            run["results"].append(_result(entry, **fields))
        runs.append(run)
    for index in range(3):
        run = {"kind": "unchanged", "number": index, "against": 3, "results": []}
        for entry in allowance_after:
            first = "regressed" if (entry, index) == ("mid", 0) else "pass"
            run["results"].append(
                _result(entry, delta=-0.001 * index, allowance=0.015, outcome="pass",
                        first_outcome=first)
            )  # fmt: skip
        runs.append(run)
    for index in range(4):
        run = {"kind": "drop", "number": index, "against": 3, "results": []}
        for entry in allowance_after:
            caught = index < 3
            run["results"].append(
                _result(entry, slower=1.02, delta=-0.02, allowance=0.015,
                        outcome="regressed" if caught else "within-noise",
                        first_outcome="regressed" if caught else "within-noise")
            )  # fmt: skip
        runs.append(run)
    runs.append({"kind": "drop", "number": 9, "error": "pytest exited 3"})  # no report
    return {
        "label": "synthetic", "backend": "cuda", "simulated": False,
        "started": "2026-01-01T00:00:00Z", "extra": 0.09, "wall_s": 1.0, "runs": runs,
    }  # fmt: skip


def test_stored_lengths_reads_the_allowance_after_k_saves_from_save_k_plus_one():
    bench = load_script("stored_lengths")
    document = _lengths_run(
        {"long": [0.01] * 4, "short": [0.05, 0.04, 0.03, 0.03], "mid": [0.015, 0.014, 0.02, 0.012]}
    )
    rows = {row["entry"]: row for row in bench.analyse(document)}
    assert [row["entry"] for row in bench.analyse(document)] == ["short", "mid", "long"]
    mid = rows["mid"]["allowance_by_saves"]
    # save 1 judged nothing; save k + 1's allowance is the band after k saves
    assert sorted(mid, key=int) == ["1", "2", "3", "4"]
    assert [mid[k]["allowance"] for k in "1234"] == [0.015, 0.014, 0.02, 0.012]
    assert mid["3"]["basis"] == "pooled" and mid["2"]["basis"] == "history"
    assert rows["mid"]["time_us"] == pytest.approx(28e-6 * 1.003 * 1e6)
    assert len(rows["long"]["save_efficiencies"]) == 5


def test_stored_lengths_counts_first_round_and_confirmed_alarms_and_catches_apart():
    bench = load_script("stored_lengths")
    rows = {
        r["entry"]: r for r in bench.analyse(_lengths_run({e: [0.01] for e in ("short", "mid")}))
    }
    assert rows["mid"]["unchanged"]["runs"] == 3
    # a first round that regressed and was not confirmed is a first-round alarm, not a failure
    assert (rows["mid"]["unchanged"]["first"], rows["mid"]["unchanged"]["failed"]) == (1, 0)
    assert (rows["short"]["unchanged"]["first"], rows["short"]["unchanged"]["failed"]) == (0, 0)
    assert (rows["mid"]["drop"]["failed"], rows["mid"]["drop"]["runs"]) == (3, 4)
    assert rows["mid"]["drop"]["deltas"] == [-0.02] * 4
    assert rows["mid"]["unchanged"]["allowances"] == [0.015]


def test_stored_lengths_renders_the_board_the_counts_and_a_run_without_a_report():
    bench = load_script("stored_lengths")
    document = _lengths_run({"mid": [0.03, 0.02]})
    text = bench.render(document, markdown=True)
    assert f"board {BOARD[:12]}" in text and "3 saves, 3 unchanged and 5 drop runs" in text
    assert "(1 made no report)" in text and "no report (drop 9): pytest exited 3" in text
    assert "| mid | 28.1 us |" in text and "3.00% history | 2.00% pooled |" in text
    assert "| mid | 3 | 1 / 0 |" in text and "3 of 4" in text
    assert not text.startswith("SIMULATED")
    assert bench.render({**document, "simulated": True}, markdown=False).startswith("SIMULATED")


LEVELS = {"7.8us": (7.8e-6, 0.012), "28us": (28e-6, 0.003), "210us": (210e-6, 0.0008)}


def _noise_run(processes: int = 12, seed: int = 5) -> dict:
    """Processes whose level (log time) moves by LEVELS' sigma, loads by a tenth of that and
    buffer sets by nothing: every cell of a process on the same (load, set) grid."""
    rng = random.Random(seed)
    out = []
    for index in range(processes):
        cells = []
        for length, (time_s, process_sd) in LEVELS.items():
            process = rng.gauss(0, process_sd)
            loads = [rng.gauss(0, process_sd / 10) for _ in range(2)]
            for load in range(2):
                for buffer_set in range(2):
                    level = time_s * math.exp(process + loads[load] + rng.gauss(0, 1e-5))
                    cells.append(
                        {
                            "length": length, "load": load, "set": buffer_set, "n": 100,
                            "median_s": level, "trimmed_s": level, "ticks": 9,
                            "ref_trimmed_s": 6e-6, "trimmed_se_s": level * 1e-4,
                            "sm_mhz": 1980.0 - 10 * (index % 2),
                        }
                    )  # fmt: skip
        out.append({"index": index, "cells": cells})
    out.append({"index": processes, "cells": []})  # a child that printed nothing
    return {
        "backend": "cuda", "simulated": False, "started": "2026-01-01T00:00:00Z", "loads": 2,
        "sets": 2, "budget_s": 0.3, "processes": out, "wall_s": 1.0,
    }  # fmt: skip


def test_stored_noise_takes_the_spread_apart_into_process_load_and_set():
    bench = load_script("stored_noise")
    document = _noise_run()
    rows = {row["length"]: row for row in bench.analyse(document)}
    assert set(rows) == set(LEVELS) and rows["28us"]["processes"] == 12
    for length, (time_s, process_sd) in LEVELS.items():
        row = rows[length]
        assert row["time_us"] == pytest.approx(time_s * 1e6, rel=3 * process_sd)
        # 12 processes: the sample sd lies within a factor 2 of the truth
        assert process_sd / 2 < row["between_process_sd"] < 2 * process_sd, length
        assert row["between_load_sd"] < row["between_process_sd"] / 3
        assert row["between_set_sd"] < process_sd / 20 and row["residual_sd"] < process_sd / 20
        assert row["cell_se"] == pytest.approx(1e-4)
        assert row["sm_mhz"] == (1970.0, 1980.0)
    # the ordering docs/measurement.md shows: the spread falls with the kernel's length
    assert (
        rows["7.8us"]["between_process_sd"]
        > rows["28us"]["between_process_sd"]
        > rows["210us"]["between_process_sd"]
    )
    text = bench.render(document, markdown=True)
    assert "13 processes x 2 loads x 2 buffer sets" in text and "| 28us |" in text


def test_stored_noise_skips_a_length_fewer_than_two_processes_measured():
    bench = load_script("stored_noise")
    document = _noise_run(processes=1)
    assert bench.analyse(document) == []


def _level_rows(correlated_empty: bool, processes: int = 10, seed: int = 3) -> dict:
    """process_level rows of one length: each process's level moves the events around its
    launches by 1% and the kernel's own span (globaltimer) by 0.1%. The empty launch of the
    same shape carries the process's shift in absolute time (correlated) or a shift of its own."""
    rng = random.Random(seed)
    rows = []
    for process in range(processes):
        shift_s = rng.gauss(0, 0.27e-6)  # 1% of 27 us, outside the blocks
        inside = 27e-6 * math.exp(rng.gauss(0, 0.001))
        empty_shift_s = shift_s if correlated_empty else rng.gauss(0, 0.27e-6)
        common = {"process": process, "length": "27us", "board": BOARD, "round": 0}
        for stream in range(2):
            for round_ in range(2):
                level = inside + shift_s + rng.gauss(0, 0.01e-6)
                rows.append({**common, "way": "stream", "stream": stream, "round": round_,
                             "trimmed_s": level, "median_s": level})  # fmt: skip
        rows.append({**common, "way": "plain", "trimmed_s": inside + shift_s})
        rows.append({**common, "way": "empty-same-grid", "trimmed_s": 4e-6 + empty_shift_s})
        rows.append({**common, "way": "in-kernel", "trimmed_s": inside + shift_s,
                     "inside_trimmed_s": inside, "sampled_s": 0.002})  # fmt: skip
    return {"title": "process level (synthetic)", "started": "2026-01-01T00:00:00Z",
            "rows": rows, "wall_s": 1.0}  # fmt: skip


def _sigma(table: list[list[str]], way: str) -> float:
    (row,) = [r for r in table if r[1] == way]
    return float(row[2].rstrip("%")) / 100


def test_process_level_separates_the_kernels_own_span_from_the_events_around_it():
    bench = load_script("process_level")
    table = bench.analyse(_level_rows(correlated_empty=True))
    span = _sigma(table, "in-kernel: span (globaltimer), trimmed")
    events = _sigma(table, "in-kernel: events, trimmed")
    assert 0.0004 < span < 0.002 and 0.005 < events < 0.02 and events > 5 * span
    assert _sigma(table, "stream 0 (all rounds)") > 5 * span
    (mean,) = [r for r in table if r[1] == "mean over 2 streams"]
    assert mean[3].startswith("within a process: streams ")
    (in_kernel,) = [r for r in table if r[1] == "in-kernel: events, trimmed"]
    assert in_kernel[3].endswith("2.0 ms of samples")


def test_process_level_says_whether_an_empty_launch_cancels_the_level():
    bench = load_script("process_level")
    shared = {(r[0], r[1]): r for r in bench.analyse(_level_rows(correlated_empty=True))}
    own = {(r[0], r[1]): r for r in bench.analyse(_level_rows(correlated_empty=False))}
    difference = ("27us", "plain - empty (of plain's time)")
    plain = ("27us", "plain: events, trimmed")
    # an empty launch that shares the process's shift cancels it: what is left is the span
    assert float(shared[difference][2].rstrip("%")) < float(shared[plain][2].rstrip("%")) / 3
    assert float(shared[difference][3].removeprefix("correlation ")) > 0.95
    # one that shifts on its own cancels nothing: the difference scatters more than plain
    assert float(own[difference][2].rstrip("%")) > float(own[plain][2].rstrip("%"))
    correlation = float(own[difference][3].removeprefix("correlation "))
    assert abs(correlation) < 0.9


def test_process_level_renders_the_board_and_the_process_count():
    bench = load_script("process_level")
    document = _level_rows(correlated_empty=True)
    text = bench.render({**document, "errors": ["boom"]}, markdown=True)
    assert f"board {BOARD[:12]}: 10 processes" in text
    assert "in-kernel: span (globaltimer)" in text and "a child failed: boom" in text
    assert statistics.fmean(r["trimmed_s"] for r in document["rows"] if r["way"] == "plain") > 0


def _reference_rows(shared: bool, processes: int = 12, seed: int = 5) -> dict:
    """graph-ref rows: the kernel's level shifts by 1% of 8 us a process; the empty launch
    shares the shift in absolute time (`shared`) or shifts on its own."""
    rng = random.Random(seed)
    rows = []
    for process in range(processes):
        shift_s = rng.gauss(0, 0.08e-6)
        empty_s = 7e-6 + (shift_s if shared else rng.gauss(0, 0.08e-6))
        for round_ in range(2):
            common = {"process": process, "length": "7.6us", "board": BOARD,
                      "way": "graph-ref", "round": round_}  # fmt: skip
            noise = rng.gauss(0, 0.002e-6)
            rows.append({**common, "launch": "kernel", "trimmed_s": 8e-6 + shift_s + noise})
            rows.append({**common, "launch": "empty-like", "trimmed_s": empty_s + noise})
    return {"rows": rows}


def test_process_level_takes_an_empty_launchs_shift_off_the_kernel_in_a_graph():
    bench = load_script("process_level")
    shared = {r[1]: r for r in bench.analyse(_reference_rows(shared=True)) if r[0] == "7.6us"}
    own = {r[1]: r for r in bench.analyse(_reference_rows(shared=False)) if r[0] == "7.6us"}
    kernel, adjusted = "graph-ref: kernel, trimmed", "graph-ref: kernel - (empty-like - its mean)"
    assert _sigma(list(shared.values()), adjusted) < _sigma(list(shared.values()), kernel) / 5
    assert "correlation +1.00" in shared[adjusted][3]
    assert _sigma(list(own.values()), adjusted) > _sigma(list(own.values()), kernel)
    assert kernel in shared and shared[kernel][3].endswith("12 processes")


def _placement_rows(set_sigma: float, processes: int = 10, seed: int = 7) -> dict:
    """placement rows: 4 buffer sets x 2 loads x 2 rounds a process; each set keeps a level
    of `set_sigma`, loads none, cells scatter by 0.6%."""
    rng = random.Random(seed)
    rows = []
    for process in range(processes):
        levels = [rng.gauss(0, set_sigma) for _ in range(4)]
        for round_ in range(2):
            for load in range(2):
                for index, level in enumerate(levels):
                    time_s = 8e-6 * math.exp(level + rng.gauss(0, 0.006))
                    rows.append({"process": process, "length": "7.6us", "board": BOARD,
                                 "way": "placement", "round": round_, "load": load,
                                 "set": index, "trimmed_s": time_s})  # fmt: skip
    return {"rows": rows}


def test_process_level_finds_a_level_that_belongs_to_the_buffer_set():
    bench = load_script("process_level")
    table = [r for r in bench.analyse(_placement_rows(0.005)) if r[0] == "7.6us"]
    cell = _sigma(table, "placement: cells of one set and load")
    sets = _sigma(table, "placement: means of 4 buffer sets")
    loads = _sigma(table, "placement: means of 2 module loads")
    predicted = [float(r[3].rsplit(" ", 1)[1].rstrip("%")) / 100 for r in table
                 if r[1].startswith("placement: means")]  # fmt: skip
    assert 0.004 < cell < 0.008
    assert sets > 1.5 * predicted[0]  # the set's own level shows beyond the cells' scatter
    assert loads < 1.5 * predicted[1]  # loads keep none
    quiet = [r for r in bench.analyse(_placement_rows(0.0)) if r[0] == "7.6us"]
    assert _sigma(quiet, "placement: means of 4 buffer sets") < 1.5 * predicted[0]
    assert _sigma(table, "placement: process means (every set and load)") > 0
