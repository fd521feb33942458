"""bench/gate_quality.py: its pure parts (kernel files, plan, scoring through the gate's own
functions), a tiny --quick run through separate pytest processes on the simulated device (the
path the GPU run takes), and a tiny run of the library part."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.gate.policy import prior_run_spread
from pytest_gpuperf.runtime import open_backend
from tests import records
from tests.bench_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gate_quality.py"


script = load_script("gate_quality")  # the command: main, update_docs and DOCS are its own
# Its parts, imported as the command imports them (it puts bench/ on sys.path first); its
# kernel files are the bench's own (bench/lab/kernels.py)
gq_ab, gq_history, gq_library, gq_merge, gq_plan, gq_points, gq_records = (
    importlib.import_module(f"gq.{part}")
    for part in ("ab", "history", "library", "merge", "plan", "points", "records")
)
gq_kernels = importlib.import_module("lab.kernels")


def measurement(efficiency: float, rel_ci: float = 0.002, *, fingerprint: str = "sha256:a"):
    """A cold 32M-element vector add on the simulated MI300X at `efficiency` of 5.3 TB/s."""
    return records.measurement(
        efficiency,
        bytes_moved=12 * (32 << 20),
        rel_ci=rel_ci,
        samples=10,
        name="long_same",
        kernel="vector_add_more",
        backend="cuda",  # the prior a first save records: 2% (policy.DEFAULT_RUN_SPREAD)
        queue_method="flush-ahead",
        grid=(131072, 1, 1),
        block=(256, 1, 1),
        fingerprint=fingerprint,
    )


# -- kernel files -----------------------------------------------------------------------------


def test_the_kernel_block_is_the_one_in_bench_variants():
    block = gq_kernels.kernel_block()
    assert block.startswith(gq_kernels.BEGIN) and block.rstrip().endswith(gq_kernels.END)
    assert "GPUPERF_KERNEL void vector_add_more(" in block
    assert block in (REPO / "kernels" / "bench_variants.hip").read_text() + "\n"


def test_a_kernel_file_defines_its_bytes_and_salt_and_tells_the_simulator(tmp_path):
    text = gq_kernels.kernel_source(16, salt=2)
    assert "#define EXTRA_PERMILLE 16\n#define GQ_SALT 2\n" in text
    directive = f"// gpuperf-sim: efficiency={gq_kernels.sim_efficiency(16)}\n"
    assert directive + "GPUPERF_KERNEL void vector_add_more(" in text
    assert gq_kernels.sim_efficiency(0) == gq_kernels.SIM_EFFICIENCY
    assert gq_kernels.sim_efficiency(100) == pytest.approx(
        gq_kernels.SIM_EFFICIENCY / 1.1, rel=1e-5
    )
    with pytest.raises(ValueError, match="EXTRA_PERMILLE"):
        gq_kernels.kernel_source(gq_kernels.MAX_PERMILLE + 1)


def test_the_simulator_sees_each_head_edit_as_other_code(tmp_path):
    backend = open_backend("sim", seed=1)
    try:
        prints = {}
        for name, text in {
            "base": gq_kernels.kernel_source(0),
            "base_again": gq_kernels.kernel_source(0),
            "salted": gq_kernels.kernel_source(0, salt=2),
            "slower": gq_kernels.kernel_source(10),
        }.items():
            path = tmp_path / f"{name}.hip"
            path.write_text(text)
            kernel = backend.compile(path).kernel("vector_add_more")
            prints[name] = backend.kernel_fingerprint(kernel)
            assert backend.efficiency_of(kernel) == gq_kernels.sim_efficiency(
                10 if name == "slower" else 0
            )
        assert prints["base"] == prints["base_again"]
        assert len({prints["base"], prints["salted"], prints["slower"]}) == 3
    finally:
        backend.close()


# -- the plan -------------------------------------------------------------------------------


def test_permille_follows_the_calibrated_slope_within_its_bounds():
    assert gq_plan.permille_for(0.01, 0.0006) == 17  # 1% of time costs 1.7% more bytes
    assert gq_plan.permille_for(0.03, 0.001) == 30
    assert gq_plan.permille_for(0.03, 1e-6) == gq_kernels.MAX_PERMILLE
    assert gq_plan.permille_for(0.01, None) == round(10 * gq_plan.FALLBACK_BYTES_PER_TIME)
    assert gq_plan.permille_for(0.01, -0.001) == round(10 * gq_plan.FALLBACK_BYTES_PER_TIME)
    assert gq_plan.permille_for(0.0001, 0.01) == 1


def test_the_plan_interpolates_between_the_probes_where_small_slowdowns_cost_more():
    # the H100's 7.8 us kernel (2026-11-25): 1, 21, 26, 100 per mille more bytes
    probes = [(100, 1.0476), (21, 1.0183), (1, 1.0026), (26, 1.0202)]
    assert gq_plan.permille_for(0.01, 0.00048, probes) == 10  # the slope of 100 alone said 21
    assert gq_plan.permille_for(0.02, None, probes) == 25
    assert gq_plan.permille_for(0.06, None, probes) == 133  # past the last probe: its segment
    assert gq_plan.permille_for(0.001, None, probes) == 1
    # noise: a larger probe that reads less never bends the curve back
    assert gq_plan.interpolate_permille(0.01, [(10, 1.012), (20, 1.011)]) == pytest.approx(
        8.33, 0.01
    )
    assert gq_plan.interpolate_permille(0.05, [(10, 1.01), (20, 1.01)]) == gq_kernels.MAX_PERMILLE


def test_a_plan_gives_only_slower_heads_extra_bytes_and_sizes_the_extra_buffer():
    calibration = {
        "long": {"slope_per_permille": 0.0006},
        "mid": {"slope_per_permille": 0.0005},
        "short": {"slope_per_permille": 0.0003, "probes": [[10, 1.007], [100, 1.034]]},
    }
    plan = gq_plan.plan_from({"long": 1000, "mid": 400, "short": 100}, calibration)
    assert plan.permille == {
        **{f"{size}_{what}": 0 for size in gq_points.SIZES for what in ("same", "equiv")},
        "long_slow1": 17,
        "long_slow2": 33,
        "long_slow3": 50,
        "mid_slow1": 20,
        "mid_slow2": 40,
        "short_slow1": 20,  # between the probes: 10 + 0.3% / (2.7% / 90)
        "short_slow2": 53,
    }
    assert plan.extra_floats == max(
        gq_kernels.extra_floats(1000, 50), gq_kernels.extra_floats(100, 53)
    )
    assert gq_kernels.extra_floats(32 << 20, 10) == 3 * (32 << 20) // 100
    assert gq_plan.plan_from_json(gq_plan.plan_json(plan)) == plan
    old = {"long_elements": 1000, "short_elements": 100, "permille": {"long_same": 0}}
    assert gq_plan.plan_from_json({**old, "calibration": {}}).points == (
        gq_points.POINT["long_same"],
    )


def test_a_size_the_calibration_could_not_measure_takes_the_fallback_and_says_so():
    calibration = {"long": {"slope_per_permille": 0.0006}, "source": "calibrated"}
    plan = gq_plan.plan_from({"long": 1000, "short": 100}, calibration)
    assert plan.permille["short_slow2"] == round(20 * gq_plan.FALLBACK_BYTES_PER_TIME)
    assert plan.calibration["source"].startswith("calibrated; FALLBACK for short")
    assert {p.size for p in plan.points} == {"long", "short"}


# -- scoring ----------------------------------------------------------------------------------


def trial(state: str, ratio: float = 1.0, status: str = "pass") -> object:
    return gq_records.Trial(
        name="x",
        status=status,
        test_outcome="passed",
        state=state,
        ratio=ratio,
        ratio_ci=(ratio - 0.001, ratio + 0.003),
        pairs=20,
        threshold=0.005,
        time_s=150e-6,
        efficiency=0.8,
        relative_ci=0.002,
        base_efficiency=0.8,
    )


def test_an_ab_row_counts_each_state_among_valid_trials_only():
    trials = [trial("pass")] * 97 + [trial("regressed", 1.02)] + [trial("improved", 0.98)]
    trials += [trial("inconclusive"), trial("pass", status="unjudged"), trial("unchanged")]
    row = gq_ab.ab_row("A/A", gq_points.AA, trials, "<= 1% regressed over >= 100")
    assert row["trials"] == 100 and row["invalid"] == 2
    assert (row["regressed"], row["improved"], row["inconclusive"]) == (0.01, 0.01, 0.01)
    assert row["median_ratio"] == 1.0 and row["median_ci_half"] == pytest.approx(0.002)
    assert row["met"] == "yes"


def test_targets_need_their_trials_and_their_rate():
    assert gq_ab.meets(">= 95% regressed (kernel >= 100 us)", 50, 0.96) == "yes"
    assert gq_ab.meets(">= 95% regressed (kernel >= 100 us)", 50, 0.94) == "NO"
    assert gq_ab.meets(">= 80% regressed (7-8 us cold)", 50, 0.82) == "yes"
    assert gq_ab.meets("<= 1% regressed over >= 100", 99, 0.0).startswith("too few")
    assert gq_ab.meets("<= 1% regressed", 40, 0.025) == "NO"
    both = "<= 1% regressed and <= 10% inconclusive"
    assert gq_ab.meets(both, 40, 0.0, 0.10) == "yes"
    assert gq_ab.meets(both, 40, 0.0, 0.125) == "NO"
    assert gq_ab.meets("", 1000, 0.5) == ""


def test_history_checks_are_the_gates_own():
    """Five saves of a kernel steady within +-0.2% learn a tight spread: a 3% drop is caught,
        no change passes. One save keeps the CUDA prior (its relative part and a launch's jitter,
    measured on one H100 board) and, worth a few saves, already catches the same 3%."""
    steady = [measurement(0.80 * (1 + d)) for d in (0.001, -0.001, 0.0, 0.002, -0.002)]
    same = gq_history.history_check(steady, measurement(0.8), 0.01)
    slower = gq_history.history_check(steady, measurement(0.8 / 1.03), 0.01)
    assert same["outcome"] == "within-noise" and slower["outcome"] == "regressed"
    assert same["saves"] == 5 and same["spread_basis"] == "history"
    one = gq_history.history_check(steady[:1], measurement(0.8 / 1.03), 0.01)
    prior = prior_run_spread("cuda", steady[0].time_s, "cold")
    assert one["spread_basis"] == "prior" and one["run_spread"] == pytest.approx(prior, rel=1e-3)
    assert one["outcome"] == "regressed"


def test_a_history_of_other_code_restarts_as_saving_would():
    saves = [measurement(0.8), measurement(0.8, fingerprint="sha256:b"), measurement(0.8)]
    check = gq_history.history_check(saves, measurement(0.8), 0.01)
    assert check["restarted"] == 2 and check["saves"] == 1


def record(index: int, same: float, slower: float) -> object:
    trials = {}
    for name, efficiency in (("long_same", same), ("long_slow3", slower)):
        t = trial("pass")
        t.measurement = measurement(efficiency)
        trials[name] = t
    return gq_records.ProcessRecord(index, index, 1.0, 0, trials)


def test_history_scores_judge_each_process_against_the_others():
    assert gq_history.score_history([record(i, 0.8, 0.78) for i in range(5)], 10, 1, None)[2]
    records = [record(i, 0.8 * (1 + 0.001 * (i % 3 - 1)), 0.8 / 1.03) for i in range(8)]
    rows, checks, skipped = gq_history.score_history(records, 16, 1, None)
    assert not skipped and len(rows) == len(gq_history.HISTORY_SAVES) * 2
    assert all(c["judged"] not in c["history"] for c in checks)
    five = [r for r in rows if r["saves"] == 5]
    assert all(r["false_alarm"] == 0 and r["detect_+3%"] == 1 for r in five)
    single = [r for r in rows if r["saves"] == 1]
    assert all(r["basis"] == "prior" and r["false_alarm"] == 0 for r in single)


def test_sim_options_split_the_variance_and_refuse_what_the_simulator_lacks():
    accepted = {"run_spread", "common_fraction", "placement_fraction", "jitter"}
    kwargs = gq_library.sim_open_kwargs(accepted, 0.07, 0.5, 0.15, {"jitter": 0.002})
    assert kwargs == {
        "device": "mi300x",
        "run_spread": 0.07,
        "common_fraction": 0.5,
        "placement_fraction": pytest.approx(0.35),
        "jitter": 0.002,
    }
    with pytest.raises(ValueError, match="no option"):
        gq_library.sim_open_kwargs(accepted, 0.07, 0.5, 0.1, {"nonsense": 1.0})
    with pytest.raises(ValueError, match="exceed"):
        gq_library.sim_open_kwargs(accepted, 0.07, 0.9, 0.3, {})
    with pytest.raises(ValueError, match="code-object share"):
        gq_library.sim_open_kwargs({"run_spread"}, 0.07, None, 0.1, {})


def test_update_docs_keeps_one_subsection_per_part(tmp_path, monkeypatch):
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\nkept\n")
    monkeypatch.setattr(script, "DOCS", docs)
    document = {"title": "T1", "part": "library", "ab": [], "history": []}
    script.update_docs(document)
    script.update_docs({**document, "title": "T2"})
    script.update_docs({**document, "title": "GPU", "part": "processes", "backend": "cuda"})
    with pytest.raises(SystemExit, match="smoke test"):
        script.update_docs({**document, "part": "processes", "backend": "sim"})
    text = docs.read_text()
    assert text.startswith("# Benchmarks\n\nkept\n")
    assert text.count("<!-- ab-gate-quality:begin -->") == 1
    assert "### T2" in text and "### T1" not in text and "### GPU" in text
    assert text.index("ab-gate-quality-gpu:begin") < text.index("ab-gate-quality-sim:begin")


# -- runs ---------------------------------------------------------------------------------


def run_script(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(out.read_text())


@pytest.mark.slow
def test_a_tiny_quick_run_goes_through_separate_pytest_processes(tmp_path):
    done, document = run_script(
        tmp_path,
        *("--backend", "sim", "--quick", "--processes", "2"),
        *("--long-elements", "65536", "--short-elements", "16384", "--history-trials", "4"),
        *("--mid-elements", "32768"),
    )
    assert document["complete"] and len(document["processes"]) == 2
    assert document["plan"]["calibration"]["source"].startswith("calibrated")
    for process in document["processes"]:
        assert set(process["trials"]) == {p.name for p in gq_points.POINTS}
        for name, t in process["trials"].items():
            assert t["status"] != "unjudged" and t["test_outcome"] in ("passed", "failed")
            assert t["state"] in ("pass", "regressed", "improved", "inconclusive"), name
        # A/A of identical code: on the simulated MI300X each load drifts (+-1.1% between two
        # loads), measured and carried into the interval: never a regression
        assert process["trials"]["long_same"]["state"] in ("pass", "inconclusive")
        assert process["trials"]["long_same"]["drift_basis"] == "measured"
    rows = {row["point"]: row for row in document["ab"]}
    assert rows["A/A, every size"]["trials"] == 6
    assert rows["long A/A (identical code)"]["median_drift"] >= 0
    assert document["history_skipped"].startswith("needs 6 processes")
    assert "A/B in one run" in done.stdout and "separate processes" in done.stdout


@pytest.mark.slow
def test_a_deadline_stops_the_run_and_still_reports_it(tmp_path):
    _, document = run_script(
        tmp_path,
        *("--backend", "sim", "--quick", "--processes", "3", "--deadline", "0.5"),
        *("--long-elements", "65536", "--short-elements", "16384", "--no-calibrate"),
        *("--mid-elements", "32768"),
    )
    assert not document["complete"] and len(document["processes"]) == 1
    assert "deadline" in document["stopped"] and "PARTIAL" in document["title"]
    assert document["plan"]["permille"]["long_slow1"] == 10  # --no-calibrate: 1% more bytes


# The tiny run's device: MI250X's 8 MB of cache make a 16 MiB cold-mode flush buffer (MI300X's
# 256 MB Infinity Cache make 576 MiB). Every allocation of the run stays below the size the
# simulated device checks against the host's free memory, so a busy machine cannot fail it.
TINY_SIM_DEVICE = "mi250x"
TINY_LONG_ELEMENTS = 1048576


def test_the_tiny_library_run_never_asks_for_host_memory():
    """The library run below allocates the flush buffer and three float buffers of the long
    size (a pair's extra buffer sets are copies of those): each below the host check."""
    from pytest_gpuperf.engine.policy import scratch_bytes_for
    from pytest_gpuperf.runtime.devices import KNOWN_DEVICES
    from pytest_gpuperf.simulate.backend import HOST_CHECK_FROM_BYTES

    flush_bytes = scratch_bytes_for(KNOWN_DEVICES[TINY_SIM_DEVICE].cache_bytes)
    assert flush_bytes < HOST_CHECK_FROM_BYTES
    assert 4 * TINY_LONG_ELEMENTS < HOST_CHECK_FROM_BYTES


@pytest.mark.slow
def test_a_tiny_library_run_scores_every_point(tmp_path):
    done, document = run_script(
        tmp_path,
        *("--backend", "sim", "--trials", "2", "--workers", "1", "--code-shares", "0,0.3"),
        *("--long-elements", str(TINY_LONG_ELEMENTS), "--short-elements", "65536"),
        *("--sim-device", TINY_SIM_DEVICE, "--markdown"),
    )
    assert document["device"] == "Simulated AMD Instinct MI250X (one GCD)"
    rows = document["ab"]
    assert {row["code_share"] for row in rows} == {0.0, 0.3}
    assert {row["point"] for row in rows} == {
        f"{size} {point}" for size in ("long", "short") for point in ("A/A", "A/A'", "+3%", "+5%")
    }
    assert all(row["trials"] == 2 for row in rows)
    aa = [row for row in rows if row["point"].endswith(" A/A")]
    assert all(row["regressed"] == 0 for row in aa)  # identical code: nothing to tell apart
    history = document["history"]
    assert {row["saves"] for row in history} == set(gq_history.HISTORY_SAVES)
    assert all(not math.isnan(row["false_alarm"]) for row in history)
    assert document["model"]["settings"]["run_spread"] == 0.07
    assert "| code share |" in done.stdout and "SIMULATED" in done.stdout


def test_a_file_cut_off_mid_run_still_renders(tmp_path, capsys):
    saved = tmp_path / "json"
    rows = gq_ab.score_ab([record(0, 0.8, 0.78)])
    partial = {"part": "processes", "backend": "cuda", "started": "2026-11-23T10:00:00+00:00"}
    saved.write_text(json.dumps({**partial, "processes": [{}], "ab": rows}))
    assert script.main(["--render", str(saved), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "PARTIAL, 1 processes, no history scores" in out
    assert "| A/A, every size |" in out


def _part(seed: int, permille: dict, complete: bool = True) -> dict:
    records = [record(i, 0.8 * (1 + 0.001 * (i % 3 - 1)), 0.8 / 1.03) for i in range(4)]
    return {
        "part": "processes",
        "backend": "cuda",
        "device": "NVIDIA H100",
        "started": f"2026-11-2{seed}T10:00:00+00:00",
        "command": f"part {seed}",
        "complete": complete,
        "plan": {"sizes": {"long": 1000}, "permille": permille, "calibration": {}},
        "processes": [r.to_json() for r in records],
        "wall_s": 100.0,
    }


def test_parts_of_one_plan_merge_into_one_scored_run(tmp_path, capsys):
    """Three device calls of the same plan: their processes and histories scored as one
    run; parts of different plans are refused."""
    plan = {"long_same": 0, "long_slow3": 50}
    paths = []
    for seed in (1, 2, 3):
        path = tmp_path / f"gq{seed}.json"
        path.write_text(json.dumps(_part(seed, plan)))
        paths.append(str(path))
    merged = gq_merge.merge([json.loads(Path(p).read_text()) for p in paths])
    assert len(merged["processes"]) == 12 and merged["complete"]
    assert [p["index"] for p in merged["processes"]] == list(range(12))
    rows = {row["point"]: row for row in merged["ab"]}
    assert rows["long A/A (identical code)"]["trials"] == 12
    assert not merged["history_skipped"] and merged["history"]
    five = [r for r in merged["history"] if r["saves"] == 5]
    assert all(r["detect_+3%"] == 1 for r in five)
    out = tmp_path / "json"
    assert script.main(["--merge", *paths, "--out", str(out)]) == 0
    assert "merged from 3 parts" in capsys.readouterr().out
    assert len(json.loads(out.read_text())["processes"]) == 12
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_part(4, {"long_same": 0, "long_slow3": 60})))
    with pytest.raises(SystemExit, match="different plans"):
        script.main(["--merge", paths[0], str(other)])
