"""Two runs side by side: per measurement the change in efficiency from OLD to NEW, and
whether it is beyond the noise the gate allows for that entry.

    gpuperf compare OLD.json NEW.json [--markdown FILE] [--fail-on-regression]

OLD and NEW are JSON reports (`--gpuperf-json`, or `gpuperf merge --json`).
The noise is the gate's own band (gate/noise.py `stored_band`) with OLD as the centre, one run:
for a measurement a run judged against a stored entry, that entry as the gate saw it (the
spread pooled from its file, its saves' spread, its boards), else the backend's figure for a
first save at the kernel's time; the between-board spread is added when the two runs ran on
different boards (or do not say). The level and tolerance are NEW's, as its report recorded
them. The table follows pytest-benchmark's `compare`: one row per measurement, the change and
a word. Exit 0; 1 under --fail-on-regression when a measurement got slower beyond its noise
or is missing from NEW (unless --allow-missing); 2 with one line on stderr for bad input (a
missing, truncated or foreign file, a field that is not finite, of the wrong kind or given
twice, two runs with no measurement in common, an output path that is an input, a baseline or
a device).

Nothing a report says about itself decides: the reports are read by the one reader
(record/report_reader.py), the change is judged from the numbers, and a slowdown counts as
accepted only where NEW carries an accept rule that names the test (a `status: accepted` with
no rule, or a rule for other tests, is a slowdown). Text from the reports (test ids, commits,
reasons) is printed with its control characters escaped (report/visible.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.config.command import CommandParser, exit_with, run_command
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.accept import names
from pytest_gpuperf.gate.noise import stored_band
from pytest_gpuperf.gate.policy import DEFAULT_TOLERANCE, FALSE_ALARM_RATE, prior_run_spread
from pytest_gpuperf.record.checks import NoiseBand
from pytest_gpuperf.record.report_reader import ReadReport
from pytest_gpuperf.record.verdict import ACCEPTED, Row
from pytest_gpuperf.report.visible import visible

PROG = "gpuperf compare"
EXIT_OK, EXIT_REGRESSED = 0, 1
SLOWER, FASTER, WITHIN, ONLY_OLD, ONLY_NEW = "slower", "faster", "within noise", "gone", "new"
# slower beyond the noise, and NEW's run passed it as an intended slowdown (--gpuperf-accept or
# a Gpuperf-Accept trailer): shown, not a regression for --fail-on-regression
SLOWER_ACCEPTED = "slower, accepted"

Key = tuple[str, str, str, str]  # device key (with -sim), test id, measurement name, cache


@dataclass(frozen=True)
class Change:
    """One measurement in OLD and NEW (either may be missing) and what the change means."""

    key: Key
    old: Row | None
    new: Row | None
    state: str
    change: float | None = None  # new efficiency / old - 1
    allowance: float | None = None  # the drop (or rise) noise explains: max(tolerance, band)
    band: NoiseBand | None = None


def _parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG,
        description="Compare two runs' JSON reports: per measurement the change in "
        "efficiency and whether it is beyond the gate's noise for it.",
    )
    parser.add_argument("old", type=Path, metavar="OLD.json", help="the earlier run's report")
    parser.add_argument("new", type=Path, metavar="NEW.json", help="the later run's report")
    parser.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="also write the table as Markdown ('-': print it instead of the terminal table)",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a measurement is slower beyond its noise, or in OLD and missing from "
        "NEW (default: exit 0)",
    )
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="with --fail-on-regression: a measurement of OLD missing from NEW (gone) does not "
        "fail the comparison (default: it does; a removed test is no pass)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    return run_command(PROG, lambda: _run(options))


def _run(options: argparse.Namespace) -> int:
    from pytest_gpuperf.record.files import output_problem, write_output
    from pytest_gpuperf.record.report_reader import read_report

    to_stdout = options.markdown == Path("-")  # not a file named "-"
    if options.markdown is not None and not to_stdout:
        problem = output_problem(options.markdown, inputs=[options.old, options.new])
        if problem:
            raise ConfigError(f"--markdown {options.markdown}: {problem}; choose another path")
    old, new = read_report(options.old), read_report(options.new)
    changes = compare(old.rows, new.rows)
    if not any(c.old is not None and c.new is not None for c in changes):
        raise ConfigError(
            f"{options.old} and {options.new} have no measurement in common (OLD measured "
            f"{_devices(old)}, NEW {_devices(new)}); compare two runs of one suite and device"
        )
    print(markdown(changes, old, new) if to_stdout else terminal(changes, old, new))
    if options.markdown is not None and not to_stdout:
        write_output("--markdown", options.markdown, markdown(changes, old, new))
        print(f"gpuperf: written: {visible(options.markdown)}")
    if not options.fail_on_regression:
        return EXIT_OK
    slower = sum(c.state == SLOWER for c in changes)
    gone = 0 if options.allow_missing else sum(c.state == ONLY_OLD for c in changes)
    if gone:
        print(
            f"gpuperf: FAILED: {gone} measurement{'s' if gone != 1 else ''} of OLD "
            f"{'are' if gone != 1 else 'is'} missing from NEW (gone): a removed or skipped "
            "test is no pass (--allow-missing accepts that)"
        )
    return EXIT_REGRESSED if slower or gone else EXIT_OK


def _devices(report: ReadReport) -> str:
    return ", ".join(sorted({_key(row)[0] for row in report.rows})) or "nothing"


def _key(row: Row) -> Key:
    measurement = row.measurement
    device = measurement.device_key + ("-sim" if measurement.simulated else "")
    return (device, row.test_id, measurement.name, measurement.cache)


def compare(old_rows: Sequence[Row], new_rows: Sequence[Row]) -> list[Change]:
    """Every measurement of either run, in OLD's order then NEW's new ones."""
    old = {_key(row): row for row in old_rows}
    new = {_key(row): row for row in new_rows}
    changes = []
    for key in [*old, *(k for k in new if k not in old)]:
        before, after = old.get(key), new.get(key)
        if before is None or after is None:
            changes.append(Change(key, before, after, ONLY_NEW if before is None else ONLY_OLD))
            continue
        changes.append(judge(key, before, after))
    return changes


def judge(key: Key, old: Row, new: Row) -> Change:
    """The change from `old` to `new` against the gate's band with OLD as its centre."""
    check = new.verdict.baseline
    rate = check.false_alarm_rate if check.false_alarm_rate > 0 else FALSE_ALARM_RATE
    tolerance = check.tolerance if check.baseline is not None else DEFAULT_TOLERANCE
    centre = _centre(old, new)
    simulated_spread = 0.0
    if centre.backend == "sim":
        from pytest_gpuperf.simulate.device_model import DEFAULT_GPU_SPREAD

        simulated_spread = DEFAULT_GPU_SPREAD
    band = stored_band(
        centre,
        new.measurement.relative_ci,
        false_alarm_rate=rate,
        simulated_board_spread=simulated_spread,
    )
    allowance = max(tolerance, band.noise)
    change = new.measurement.efficiency / old.measurement.efficiency - 1.0
    state = SLOWER if change < -allowance else FASTER if change > allowance else WITHIN
    if state == SLOWER and accepted(new):
        state = SLOWER_ACCEPTED
    return Change(key, old, new, state, change, allowance, band)


def accepted(row: Row) -> bool:
    """Whether NEW's run accepted this measurement's slowdown: its status says so AND it
    carries the accept rule, whose pattern names the test (gate/accept.py `names`). A status
    alone is a word in a file (`"status": "accepted"` with no rule was believed)."""
    acceptance = row.verdict.acceptance
    return (
        row.verdict.status == ACCEPTED and acceptance is not None and names(acceptance, row.test_id)
    )


def _centre(old: Row, new: Row) -> BaselineRef:
    """The baseline the gate would judge NEW against if OLD were its one save: the entry
    either run was judged against (its file's pool, its saves' spread), else OLD as a first
    save with the backend's figure; the boards as the two runs say."""
    measurement = old.measurement
    entry = new.verdict.baseline.baseline or old.verdict.baseline.baseline
    if entry is None:
        spread = prior_run_spread(measurement.backend, measurement.time_s, measurement.cache)
        entry = BaselineRef(
            efficiency=measurement.efficiency,
            efficiency_ci=measurement.efficiency_ci,
            run_spread=spread,
            bandwidth_bps=measurement.bandwidth_bps,
            time_s=measurement.time_s,
            cache=measurement.cache,
            source="measured",
            provenance="",
            path="",
            backend=measurement.backend,
            prior_spread=spread,
        )
    old_board = measurement.gpu.uuid if measurement.gpu else None
    new_board = new.measurement.gpu.uuid if new.measurement.gpu else None
    if not (old_board and new_board):
        status = "unknown"
    else:
        status = "seen" if old_board == new_board else "unseen"
    return replace(
        entry,
        efficiency=measurement.efficiency,
        efficiency_ci=measurement.efficiency_ci,
        saves=1,
        board_status=status,
        boards=1,
    )


def _header(old: ReadReport, new: ReadReport) -> list[tuple[str, str]]:
    def describe(report: ReadReport) -> str:
        commit = (report.document.get("commit") or {}).get("id", "")
        created = str(report.document.get("created", ""))[:16].replace("T", " ")
        said = f"{report.path} (commit {str(commit)[:12] or 'unrecorded'}, {created or '?'})"
        if any(row.measurement.simulated for row in report.rows):
            said += " SIMULATED device: its numbers come from a model, not a GPU"
        return visible(said)

    return [("OLD", describe(old)), ("NEW", describe(new))]


def _cells(change: Change) -> list[str]:
    device, test_id, name, cache = change.key
    old = f"{change.old.measurement.efficiency:.2%}" if change.old else "-"
    new = f"{change.new.measurement.efficiency:.2%}" if change.new else "-"
    delta = f"{change.change:+.2%}" if change.change is not None else "-"
    noise = "-"
    if change.allowance is not None and change.band is not None:
        decided = "tolerance" if change.band.noise < change.allowance else change.band.basis
        board = "+board" if change.band.between_sigma > 0 else ""
        noise = f"±{change.allowance:.2%} ({decided}{board})"
    state = change.state
    if state == SLOWER_ACCEPTED and change.new and change.new.verdict.acceptance:
        state += f" ({change.new.verdict.acceptance.reason})"
    # test ids, names and reasons come from the files: escape what a terminal would obey
    cells = [f"{test_id} [{name}]", cache, device, old, new, delta, noise, state]
    return [visible(cell) for cell in cells]


_COLUMNS = ["measurement", "cache", "device", "OLD", "NEW", "change", "noise", "state"]


def summary_line(changes: Sequence[Change]) -> str:
    counts = {state: 0 for state in (SLOWER, SLOWER_ACCEPTED, FASTER, WITHIN, ONLY_NEW, ONLY_OLD)}
    for change in changes:
        counts[change.state] += 1
    words = {SLOWER_ACCEPTED: "accepted slowdown"}  # not "1 slower, 1 slower, accepted"
    parts = []
    for state, n in counts.items():
        if n:
            word = words.get(state, state)
            parts.append(f"{n} {word}{'s' if n != 1 and state in words else ''}")
    total = len(changes)
    return f"{total} measurement{'s' if total != 1 else ''}: {', '.join(parts)}"


def terminal(changes: Sequence[Change], old: ReadReport, new: ReadReport) -> str:
    """The table for a terminal: columns padded, numbers right-aligned."""
    rows = [_cells(change) for change in changes]
    widths = [max(len(r[i]) for r in [_COLUMNS, *rows]) for i in range(len(_COLUMNS))]
    right = {3, 4, 5, 6}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    head = [f"{label}: {text}" for label, text in _header(old, new)]
    rule = "-" * len(line(_COLUMNS))
    return "\n".join(
        [*head, rule, line(_COLUMNS), rule, *map(line, rows), rule, summary_line(changes)]
    )


def markdown(changes: Sequence[Change], old: ReadReport, new: ReadReport) -> str:
    """The same table as GitHub-flavoured Markdown."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["### pytest-gpuperf: two runs compared", ""]
    lines += [f"- **{label}**: `{cell(text)}`" for label, text in _header(old, new)]
    lines += [
        "",
        "| " + " | ".join(_COLUMNS) + " |",
        "|" + "|".join("---:" if i in (3, 4, 5, 6) else "---" for i in range(8)) + "|",
    ]
    for change in changes:
        cells = [cell(text) for text in _cells(change)]
        if change.state == SLOWER:
            cells[-1] = f"**{cells[-1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", summary_line(changes), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    exit_with(PROG, main)
