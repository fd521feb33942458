"""bench/stored_lengths.py: the analysis that turns a run into the tables docs/benchmarks.md
quotes, pinned on runs made up here with known answers (the allowance by saves, false alarms
and catches). The GPU runs the docs quote are raw runs, kept out of the repository
(docs/benchmarks.md, "Raw runs")."""

from __future__ import annotations

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
