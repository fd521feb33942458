"""A generated nightly history: a baselines file and one JSON report per run, made by the
plugin's own code (the baseline schema's renderer, the gate's stored-baseline check on every
row, the JSON report), for the dashboard's, the reader's and the commands' tests and for
bench/publish_page.py, which times the page made from it. Everything in it is labelled
simulated (device key `h100-sxm-sim`): a level per measurement, run-to-run noise of 0.3% on
two boards, some measurements regressing 5% in the last tenth of the runs (some of those
accepted), some with replaced baselines that drift."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.baseline.model import BaselineEntry, Replaced, SaveRecord
from pytest_gpuperf.baseline.schema import render as render_baselines
from pytest_gpuperf.engine.results import GpuIdentity, Measurement
from pytest_gpuperf.gate.stored import check_baseline
from pytest_gpuperf.record.checks import REGRESSED
from pytest_gpuperf.record.json_report import write_json
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.verdict import ACCEPTED, FAIL, PASS, Acceptance, Row, Verdict
from pytest_gpuperf.report import to_json
from pytest_gpuperf.simulate.device_model import DEFAULT_GPU_SPREAD

DEVICE = "h100-sxm"
DEVICE_KEY = f"{DEVICE}-sim"
PEAK_BPS = 3.352e12
BOARDS = ("SIM-GPU-0a1b2c3d", "SIM-GPU-4e5f6a7b")
START = datetime(2026, 8, 1, 2, 0, tzinfo=timezone.utc)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _sha(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(40))


def _test_id(m: int) -> tuple[str, str]:
    return f"tests/perf/test_kernels_{m // 10:02d}.py::test_kernel[{m:03d}-8M]", f"k{m:03d}"


def make_history(
    folder: Path, measurements: int = 100, runs: int = 100, seed: int = 1
) -> tuple[Path, list[Path]]:
    """Write `folder`/baselines/h100-sxm-sim.toml and `folder`/runs/run-NNN.json; return
    their paths."""
    rng = random.Random(seed)
    baseline_dir, run_dir = folder / "baselines", folder / "runs"
    baseline_dir.mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    levels, sizes, entries = [], [], []
    for m in range(measurements):
        test_id, name = _test_id(m)
        level = rng.uniform(0.6, 0.93)
        time_s = rng.uniform(20e-6, 200e-6)
        levels.append(level)
        sizes.append(int(level * PEAK_BPS * time_s))
        saves = tuple(
            SaveRecord(
                efficiency=level * (1 + rng.gauss(0, 0.002)),
                efficiency_ci=(level * 0.997, level * 1.003),
                time_s=time_s,
                when=_iso(START + timedelta(minutes=10 * k)),
                commit=_sha(rng),
                fingerprint=f"sha256:{m:064x}",
                samples=200,
                device_name="NVIDIA H100 SXM 80GB",
                backend="sim",
                simulated=True,
                board=BOARDS[0],
            )
            for k in range(3)
        )
        replaced: tuple[Replaced, ...] = ()
        if m % 10 == 7:  # re-saved after changes, each a little slower: a drift
            replaced = tuple(
                Replaced(
                    level * (1 + 0.015 * (3 - k)),
                    0.004,
                    3,
                    _sha(rng),
                    _iso(START - timedelta(days=30 * (3 - k))),
                    BOARDS[0],
                )
                for k in range(3)
            )
        efficiency = sorted(s.efficiency for s in saves)[1]
        entries.append(
            BaselineEntry(
                test_id=test_id,
                name=name,
                cache="cold",
                efficiency=efficiency,
                efficiency_ci=(
                    min(s.efficiency_ci[0] for s in saves),
                    max(s.efficiency_ci[1] for s in saves),
                ),
                run_spread=0.004,
                bandwidth_bps=efficiency * PEAK_BPS,
                time_s=time_s,
                bytes_moved=sizes[-1],
                spread_basis="history",
                kernel=name,
                saves=saves,
                prior_spread=0.01,
                replaced=replaced,
            )
        )
    baseline_path = baseline_dir / f"{DEVICE_KEY}.toml"
    baseline_path.write_text(render_baselines(DEVICE_KEY, entries), encoding="utf-8")
    store = BaselineStore(baseline_dir)
    report_paths = []
    for r in range(runs):
        created = START + timedelta(days=1 + r, hours=rng.uniform(0, 1))
        board = BOARDS[r % 2]
        rows = []
        for m in range(measurements):
            slower = 0.95 if m % 17 == 3 and r >= runs - runs // 10 else 1.0
            efficiency = levels[m] * slower * (1 + rng.gauss(0, 0.003))
            rows.append(_row(store, m, efficiency, sizes[m], board, accepted=m % 34 == 3))
        meta = ReportMeta(
            commit=_sha(rng),
            commit_time=_iso(created - timedelta(hours=3)),
            branch="main",
            created=_iso(created),
            command="pytest --gpuperf (generated by tests/dashboard_history.py)",
        )
        path = run_dir / f"run-{r:03d}.json"
        write_json(path, to_json(rows, meta))
        report_paths.append(path)
    return baseline_path, report_paths


def _row(
    store: BaselineStore, m: int, efficiency: float, bytes_moved: int, board: str, *, accepted: bool
) -> Row:
    """One measurement of a run, judged by the gate's own stored-baseline check."""
    test_id, name = _test_id(m)
    measured_s = bytes_moved / (efficiency * PEAK_BPS)
    measurement = Measurement(
        name=name,
        kernel=name,
        cache="cold",
        bytes_moved=bytes_moved,
        time_s=measured_s,
        time_ci_s=(measured_s * 0.998, measured_s * 1.002),
        samples_s=(measured_s,) * 3,
        peak_bps=PEAK_BPS,
        device_key=DEVICE,
        device_name="NVIDIA H100 SXM 80GB",
        backend="sim",
        simulated=True,
        queue_method="generated",
        fingerprint=f"sha256:{m:064x}",
        gpu=GpuIdentity(index=0, uuid=board),
    )
    ref = store.lookup(DEVICE_KEY, test_id, name, "cold", board=board)
    # as the gate's judge calls it on the simulated device (gate/judge.py)
    check = check_baseline(
        measurement,
        ref,
        tolerance=0.01,
        false_alarm_rate=0.01,
        simulated_board_spread=DEFAULT_GPU_SPREAD,
    )
    check = replace(check, false_alarm_rate=0.01)
    status, acceptance = PASS, None
    if check.outcome == REGRESSED:
        status = FAIL
        if accepted:
            status = ACCEPTED
            acceptance = Acceptance(
                test_id,  # the gate matches a rule against the test id (gate/accept.py)
                "the fused path trades 5% for one launch fewer",
                "Gpuperf-Accept trailer",
                "f" * 40,
            )
    return Row(test_id, measurement, Verdict(status, check, acceptance=acceptance), "passed")
