"""Look at a baseline entry's history: efficiency per save (and per run, from JSON reports),
with the band the gate allows around the expected value.

    python -m pytest_gpuperf.history baselines/h100-sxm.toml --test vector_add_seed \\
        [--reports out/*.json] [--out history.png]

Without --out it prints a table; with it, a PNG or SVG (matplotlib: the `plot` extra).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NoReturn

from pytest_gpuperf.baseline import BaselineEntry, BaselineStore
from pytest_gpuperf.baseline.file_read import read_store_text
from pytest_gpuperf.baseline.model import BOARD_UNSEEN
from pytest_gpuperf.config import ranges
from pytest_gpuperf.engine.results import BaselineRef, Drift, NoiseBand, TrailPoint
from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.gate.drift import drift_of
from pytest_gpuperf.gate.noise import stored_band
from pytest_gpuperf.gate.policy import (
    DEFAULT_TOLERANCE,
    FALSE_ALARM_RATE,
)
from pytest_gpuperf.report.band_words import band_text, board_level_text
from pytest_gpuperf.report.text import drift_text
from pytest_gpuperf.report.visible import visible


@dataclass(frozen=True)
class Point:
    """One efficiency in time: a save of the baseline, or a gated run from a report."""

    when: str
    efficiency: float
    low: float
    high: float
    kind: str  # "save" | "run"
    label: str = ""


@dataclass(frozen=True)
class History:
    test_id: str
    name: str
    cache: str
    expected: float
    allowance: float  # the drop the gate allows below `expected`
    basis: str
    points: tuple[Point, ...]
    band: NoiseBand | None = None
    # Noise by level: the boards the saves were made on (board id, saves of the code), and
    # the band of a run on a board the baseline has not seen (the between-board spread added)
    boards: tuple[tuple[str, int], ...] = ()
    unseen_band: NoiseBand | None = None
    unseen_allowance: float = 0.0
    drift: Drift | None = None  # a drift across the baselines the entry replaced
    trail: tuple[TrailPoint, ...] = ()


def entry_history(
    entry: BaselineEntry,
    reports: Sequence[dict] = (),
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    ref: BaselineRef | None = None,
    false_alarm_rate: float = FALSE_ALARM_RATE,
) -> History:
    """The history of one entry: its saves, plus the runs of it found in `reports`, and the
    band the gate allows around it. `ref` is the entry as the gate sees it (BaselineStore.lookup:
    with the spread its file lends it); without it the entry stands alone. The band is the
    gate's own (gate/noise.py, `stored_band`) for a run whose own interval is narrower than the
    spread, as a run that sampled to its target is."""
    from pytest_gpuperf.simulate.device_model import (
        DEFAULT_GPU_SPREAD,  # the simulated boards' spread
    )

    ref = ref or entry.to_ref("")
    band = stored_band(ref, 0.0, false_alarm_rate=false_alarm_rate)
    unseen_band = None
    if entry.source == "measured":
        unseen = replace(ref, board_status=BOARD_UNSEEN, boards=max(ref.boards, 1))
        unseen_band = stored_band(
            unseen,
            0.0,
            false_alarm_rate=false_alarm_rate,
            simulated_board_spread=DEFAULT_GPU_SPREAD,
        )
    drift = drift_of(
        ref,
        tolerance=tolerance,
        false_alarm_rate=false_alarm_rate,
        simulated_board_spread=DEFAULT_GPU_SPREAD,
    )
    points = [
        Point(s.when, s.efficiency, *s.efficiency_ci, kind="save", label=s.commit[:12])
        for s in entry.saves
    ]
    for document in reports:
        for result in document.get("results", ()):
            m = result["measurement"]
            if (result["test_id"], m["name"], m["cache"]) != entry.key:
                continue
            low, high = m["efficiency_ci"]
            commit = document.get("commit", {}).get("id", "")
            points.append(
                Point(document.get("created", ""), m["efficiency"], low, high, "run", commit[:12])
            )
    points.sort(key=lambda p: p.when)
    return History(
        entry.test_id,
        entry.name,
        entry.cache,
        entry.efficiency,
        max(tolerance, band.noise),
        band.basis,
        tuple(points),
        band,
        boards=tuple((s.board, s.saves) for s in entry.board_spreads()),
        unseen_band=unseen_band,
        unseen_allowance=max(tolerance, unseen_band.noise) if unseen_band else 0.0,
        drift=drift,
        trail=ref.trail,
    )


def text(history: History) -> str:
    lines = [
        f"{history.test_id} [{history.name}, {history.cache}]: expected "
        f"{history.expected:.2%}, fails below {history.expected * (1 - history.allowance):.2%} "
        f"(allowance {history.allowance:.2%}, {_decided(history)})",
    ]
    if history.band is not None:
        lines.append(f"  noise {history.band.noise:.2%}: {band_text(history.band)}")
    if history.boards:
        named = ", ".join(
            f"{board or 'unrecorded'} ({saves} save{'s' if saves != 1 else ''})"
            for board, saves in history.boards
        )
        recorded = sum(1 for board, _ in history.boards if board)
        if recorded:
            lines.append(f"  saved on {recorded} board{'s' if recorded != 1 else ''}: {named}")
        else:
            lines.append(f"  the saves do not record their board: {named}")
    if history.unseen_band is not None:
        lines.append(
            f"  on another board: allowance {history.unseen_allowance:.2%}; "
            f"{board_level_text(history.unseen_band)}"
        )
    for step in history.trail:
        lines.append(
            f"  replaced: {step.when:<22} {step.efficiency:.2%} (+-{step.run_spread:.2%}, "
            f"{step.saves} save{'s' if step.saves != 1 else ''}) commit {step.commit[:12]}"
        )
    if history.drift is not None:
        lines.append(f"  {drift_text(history.drift)}")
    lines.append(f"{'when':<22} {'kind':<5} {'efficiency':>10} {'95% CI':>19}  commit")
    for p in history.points:
        lines.append(
            f"{p.when:<22} {p.kind:<5} {p.efficiency:>10.2%} "
            f"{p.low:>9.2%}-{p.high:<9.2%}  {p.label}"
        )
    # test ids, boards, commits and times come from the files: each line stays one line
    return "\n".join(visible(line) for line in lines)


def _decided(history: History) -> str:
    """What set the allowance: the noise band's basis, or the tolerance where it was larger."""
    if history.band is not None and history.band.noise < history.allowance:
        return f"the tolerance; the noise band, basis {history.basis}, is narrower"
    return f"basis {history.basis}"


def plot(histories: Sequence[History], path: Path) -> Path:
    """One panel per entry: saves and runs with their intervals, the expected value and the
    band the gate allows (below it a run fails)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as missing:
        raise SystemExit(
            f"plotting needs matplotlib ({missing}): pip install 'pytest-gpuperf[plot]'"
        ) from None
    figure, axes = plt.subplots(len(histories), 1, figsize=(9, 3.2 * len(histories)), squeeze=False)
    for axis, history in zip(axes[:, 0], histories, strict=True):
        xs = range(len(history.points))
        for kind, marker in (("save", "o"), ("run", "s")):
            chosen = [(x, p) for x, p in zip(xs, history.points, strict=True) if p.kind == kind]
            if chosen:
                axis.errorbar(
                    [x for x, _ in chosen],
                    [p.efficiency * 100 for _, p in chosen],
                    yerr=[
                        [(p.efficiency - p.low) * 100 for _, p in chosen],
                        [(p.high - p.efficiency) * 100 for _, p in chosen],
                    ],
                    fmt=marker,
                    label=f"{kind}s",
                    capsize=3,
                )
        expected = history.expected * 100
        lower = expected * (1 - history.allowance)
        axis.axhline(expected, color="grey", linewidth=1, label="expected (median of saves)")
        axis.axhspan(
            lower,
            expected * (1 + history.allowance),
            color="grey",
            alpha=0.15,
            label=f"allowance ±{history.allowance:.1%} ({history.basis})",
        )
        axis.set_xticks(list(xs))
        axis.set_xticklabels(
            [p.when[5:16].replace("T", " ") for p in history.points], rotation=30, fontsize=7
        )
        axis.set_ylabel("efficiency (% of peak)")
        axis.set_title(f"{history.test_id} [{history.name}, {history.cache}]", fontsize=8)
        axis.legend(fontsize=7, loc="lower left")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


class _Parser(argparse.ArgumentParser):
    """argparse that ends bad input with one line (not the usage block) and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (--help lists the options)\n")


def _rate(text: str) -> float:
    return _in_range(text, ranges.CHECK_RATE, "a one-sided false-alarm rate")


def _tolerance(text: str) -> float:
    return _in_range(text, ranges.TOLERANCE, "a tolerance (0.01 for 1%)")


def _in_range(text: str, allowed: ranges.Range, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} in {allowed.text}, got {text!r}") from None
    if value not in allowed:
        raise argparse.ArgumentTypeError(f"{what} in {allowed.text}, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m pytest_gpuperf.history",
        description="Show the history of baseline entries: saves, runs and the gate's band.",
    )
    parser.add_argument("baseline", type=Path, help="a baselines/<device>.toml file")
    parser.add_argument("--test", default="", help="only entries whose test id contains this")
    parser.add_argument("--name", default="", help="only this measurement name")
    parser.add_argument("--cache", default="", help="only this cache mode")
    parser.add_argument(
        "--reports",
        nargs="*",
        type=Path,
        default=[],
        help="JSON reports (--gpuperf-json) whose runs to add",
    )
    parser.add_argument("--out", type=Path, help="write a PNG or SVG plot here")
    parser.add_argument(
        "--false-alarm-rate",
        type=_rate,
        default=None,
        help=f"the one-sided level of the band, in {ranges.CHECK_RATE.text} (default: the "
        "level the newest of --reports judged the entry at, as that run printed it; else "
        f"{FALSE_ALARM_RATE}, one test alone)",
    )
    parser.add_argument(
        "--tolerance",
        type=_tolerance,
        default=None,
        help=f"--gpuperf-tolerance of the runs to match, in {ranges.TOLERANCE.text} "
        f"(default: the newest of --reports' run's; else {DEFAULT_TOLERANCE})",
    )
    return parser


class _BadInput(Exception):
    """One line for the user; main() prints it and exits 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI: 0 with the histories printed (or plotted), 1 when no entry matches the
    filters, 2 with one line on stderr for any bad input (a missing, unreadable or broken
    baseline file or report, an option out of its range)."""
    parser = _parser()
    options = parser.parse_args(argv)
    try:
        return _run(options)
    except (_BadInput, GpuPerfError) as problem:
        print(f"{parser.prog}: error: {visible(problem)}", file=sys.stderr)
        return 2


def _run(options: argparse.Namespace) -> int:
    path: Path = options.baseline
    _check_file(path, "the baseline file")
    if path.suffix != ".toml":
        raise _BadInput(
            f"{path} is not a baseline file (baselines/<device>.toml); a JSON report goes "
            "after the baseline file: history BASELINE.toml REPORT.json ..."
        )
    if options.out:
        _check_out(options.out, [path, *options.reports])
    store = BaselineStore(path.parent)
    loaded = store.load(path.stem)
    if not loaded.entries:
        print(f"{path} holds no entries yet (--gpuperf-save records them)", file=sys.stderr)
        return 1
    reports = [_report(p) for p in options.reports]
    chosen = [
        entry
        for key, entry in sorted(loaded.entries.items())
        if options.test in key[0]
        and (not options.name or key[1] == options.name)
        and (not options.cache or key[2] == options.cache)
    ]
    if not chosen:
        print(f"no entry in {path} matches", file=sys.stderr)
        return 1
    histories = []
    for entry in chosen:
        rate, tolerance = run_level(entry.key, reports)
        if options.false_alarm_rate is not None:
            rate = options.false_alarm_rate
        if options.tolerance is not None:
            tolerance = options.tolerance
        histories.append(
            entry_history(
                entry,
                reports,
                tolerance,
                ref=store.lookup(path.stem, *entry.key),
                false_alarm_rate=rate,
            )
        )
    if options.out:
        try:
            print(plot(histories, options.out))
        except OSError as problem:
            raise _BadInput(f"{options.out}: cannot write the plot: {problem.strerror}") from None
    else:
        print("\n\n".join(text(h) for h in histories))
    return 0


PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def _check_out(out: Path, inputs: Sequence[Path]) -> None:
    """The plot's path, checked before anything is read: its suffix names the format (a
    baseline's `plot.toml` was a traceback out of matplotlib), it is a regular file or a new
    name, and it is none of this command's inputs."""
    from pytest_gpuperf.report.files import not_regular

    if out.suffix.lower() not in PLOT_SUFFIXES:
        raise _BadInput(
            f"--out {out}: the plot's format is named by its suffix, one of "
            f"{', '.join(PLOT_SUFFIXES)} (e.g. --out plot.png); nothing was written"
        )
    odd = not_regular(out)
    if odd:
        raise _BadInput(f"--out {out}: {odd}")
    for given in inputs:
        if out.exists() and given.exists() and out.samefile(given):
            raise _BadInput(f"--out {out}: is {given}, an input of this command")


def run_level(key: tuple[str, str, str], reports: Sequence[dict]) -> tuple[float, float]:
    """(false-alarm rate, tolerance) the newest of `reports` that judged the entry `key`
    against its baseline used, so the band printed is the one that run printed; one test
    alone at the default tolerance when none did."""
    found = (FALSE_ALARM_RATE, DEFAULT_TOLERANCE)
    newest = ""
    for document in reports:
        for result in document.get("results", ()):
            m = result.get("measurement") or {}
            if (result.get("test_id"), m.get("name"), m.get("cache")) != key:
                continue
            check = (result.get("verdict") or {}).get("baseline") or {}
            rate, tolerance = check.get("false_alarm_rate"), check.get("tolerance")
            when = str(document.get("created", ""))
            known = isinstance(rate, float) and rate > 0 and isinstance(tolerance, float)
            if known and when >= newest:
                found, newest = (float(rate or 0.0), float(tolerance or 0.0)), when
    return found


def _check_file(path: Path, what: str) -> None:
    """A missing path or a directory is bad input, not an empty history."""
    if not path.exists():
        gone = "is a symbolic link to nothing" if path.is_symlink() else "does not exist"
        raise _BadInput(f"{path}: {what} {gone}")
    if path.is_dir():
        raise _BadInput(f"{path}: {what} is a directory; give a file")


def _report(path: Path) -> dict:
    """A JSON report (--gpuperf-json) read and checked enough to take its runs from."""
    _check_file(path, "the report")
    try:
        text = read_store_text(path, "a JSON report")
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise _BadInput(f"{path}:{error.lineno}: not valid JSON: {error.msg}") from None
    except RecursionError:
        raise _BadInput(f"{path}: nests too deep to parse") from None
    results = document.get("results") if isinstance(document, dict) else None
    well_formed = isinstance(results, list) and all(
        isinstance(r, dict)
        and isinstance(r.get("test_id"), str)
        and isinstance(r.get("measurement"), dict)
        and {"name", "cache", "efficiency", "efficiency_ci"} <= set(r["measurement"])
        for r in results
    )
    if not well_formed:
        raise _BadInput(
            f"{path}: not a pytest-gpuperf JSON report (--gpuperf-json): no 'results' list of "
            "measurements"
        )
    return document


if __name__ == "__main__":
    sys.exit(main())
