"""Look at a baseline entry's history: efficiency per save (and per run, from JSON reports),
with the band the gate allows around the expected value.

    gpuperf history baselines/h100-sxm.toml --test vector_add_seed \\
        [--reports out/*.json] [--out history.png]

Without --out it prints a table; with it, a PNG or SVG (matplotlib: the `plot` extra).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.baseline import BaselineEntry, BaselineStore
from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.config import ranges
from pytest_gpuperf.config.command import CommandParser
from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.gate.entry_level import entry_level
from pytest_gpuperf.gate.policy import (
    DEFAULT_TOLERANCE,
    FALSE_ALARM_RATE,
)
from pytest_gpuperf.record.checks import NoiseBand
from pytest_gpuperf.record.history_model import (
    EntryLevel,
    Point,
    judged_level,
    run_point,
    save_point,
)
from pytest_gpuperf.record.report_reader import ReadReport, read_report
from pytest_gpuperf.report.band_words import band_text, board_level_text
from pytest_gpuperf.report.text import drift_text
from pytest_gpuperf.report.visible import visible


@dataclass(frozen=True)
class History:
    """One entry's history (record/history_model.py: its points and the level the gate holds
    it to) and the boards its saves were made on (board id, saves of the code)."""

    test_id: str
    name: str
    cache: str
    points: tuple[Point, ...]
    level: EntryLevel
    boards: tuple[tuple[str, int], ...] = ()

    @property
    def expected(self) -> float:
        return self.level.expected

    @property
    def allowance(self) -> float:  # the drop the gate allows below `expected`
        return self.level.allowance

    @property
    def basis(self) -> str:
        return self.level.band.basis

    @property
    def band(self) -> NoiseBand:
        return self.level.band


def entry_history(
    entry: BaselineEntry,
    reports: Sequence[ReadReport] = (),
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    ref: BaselineRef | None = None,
    false_alarm_rate: float = FALSE_ALARM_RATE,
) -> History:
    """The history of one entry: its saves, plus the runs of it found in `reports`, and the
    band the gate allows around it (gate/entry_level.py). `ref` is the entry as the gate sees
    it (BaselineStore.lookup: with the spread its file lends it); without it the entry stands
    alone."""
    ref = ref or entry.to_ref("")
    level = entry_level(ref, false_alarm_rate=false_alarm_rate, tolerance=tolerance)
    points = [
        save_point(s.when, s.efficiency, s.efficiency_ci, s.commit, s.board) for s in entry.saves
    ]
    points += _run_points(entry.key, reports)
    points.sort(key=lambda p: p.when)
    return History(
        entry.test_id,
        entry.name,
        entry.cache,
        tuple(points),
        level,
        boards=tuple((s.board, s.saves) for s in entry.board_spreads()),
    )


def _run_points(key: tuple[str, str, str], reports: Sequence[ReadReport]) -> list[Point]:
    """The runs of the entry `key` (test id, name, cache) in `reports`."""
    points = []
    for report in reports:
        commit = str((report.document.get("commit") or {}).get("id") or "")
        when = str(report.document.get("created", ""))
        for row in report.rows:
            if (row.test_id, row.measurement.name, row.measurement.cache) == key:
                points.append(run_point(row, when=when, commit=commit))
    return points


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
    level = history.level
    if level.unseen_band is not None:
        lines.append(
            f"  on another board: allowance {level.unseen_allowance:.2%}; "
            f"{board_level_text(level.unseen_band)}"
        )
    for step in level.trail:
        lines.append(
            f"  replaced: {step.when:<22} {step.efficiency:.2%} (+-{step.run_spread:.2%}, "
            f"{step.saves} save{'s' if step.saves != 1 else ''}) commit {step.commit[:12]}"
        )
    if level.drift is not None:
        lines.append(f"  {drift_text(level.drift)}")
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
    parser = CommandParser(
        prog="gpuperf history",
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
    from pytest_gpuperf.record.files import not_regular

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


def run_level(key: tuple[str, str, str], reports: Sequence[ReadReport]) -> tuple[float, float]:
    """(false-alarm rate, tolerance) the newest of `reports` that judged the entry `key`
    against its baseline used, so the band printed is the one that run printed; one test
    alone at the default tolerance when none did."""
    return judged_level(_run_points(key, reports), FALSE_ALARM_RATE, DEFAULT_TOLERANCE)


def _check_file(path: Path, what: str) -> None:
    """A missing path or a directory is bad input, not an empty history."""
    if not path.exists():
        gone = "is a symbolic link to nothing" if path.is_symlink() else "does not exist"
        raise _BadInput(f"{path}: {what} {gone}")
    if path.is_dir():
        raise _BadInput(f"{path}: {what} is a directory; give a file")


def _report(path: Path) -> ReadReport:
    """A JSON report (--gpuperf-json), read and checked by the one reader."""
    _check_file(path, "the report")
    return read_report(path)


if __name__ == "__main__":
    sys.exit(main())
