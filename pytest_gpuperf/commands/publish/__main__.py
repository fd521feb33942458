"""The publish command:

    gpuperf publish baselines/h100-sxm.toml runs/*.json \\
        [--bisect bisect.json] -o dashboard.html

Inputs are told apart by their suffix (.toml: a baseline file, .json: a JSON report of a run
or of merged shards). Exit 0 with the page written (whole: a temporary and a rename), 2 with
one line on stderr for any bad input (a missing or truncated file, a report of another
schema, a baseline file of a device the reports did not measure, an output path that is a
baseline, an input, a device or a FIFO), and nothing written.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path

from pytest_gpuperf.config import ranges
from pytest_gpuperf.config.command import CommandParser, exit_with, run_command
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.policy import DEFAULT_TOLERANCE, FALSE_ALARM_RATE
from pytest_gpuperf.report.visible import visible

PROG = "gpuperf publish"
STDOUT = Path("-")  # -o -: the page to standard output, as Unix tools take "-"
EXIT_OK = 0
PROGRESS_EVERY_S = 3.0  # how often a long publish says how far it got


def _fraction(allowed: ranges.Range, what: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if value not in allowed:
            raise argparse.ArgumentTypeError(f"{what} in {allowed.text}, got {text!r}")
        return value

    return parse


def _parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG,
        description="Write one self-contained HTML dashboard (no network needed to open it) "
        "from baseline files and JSON reports.",
    )
    parser.add_argument(
        "inputs",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="baseline files (baselines/<device>.toml) and JSON reports (--gpuperf-json, or "
        "gpuperf merge --json), in any order",
    )
    parser.add_argument(
        "-o",
        "--out",
        type=Path,
        required=True,
        metavar="HTML",
        help="the page to write ('-': to standard output)",
    )
    parser.add_argument(
        "--bisect",
        type=Path,
        metavar="JSON",
        help="a bisection's result (gpuperf bisect --json) to show",
    )
    parser.add_argument("--title", default="pytest-gpuperf dashboard", help="the page's title")
    parser.add_argument(
        "--false-alarm-rate",
        type=_fraction(ranges.CHECK_RATE, "a one-sided false-alarm rate"),
        default=FALSE_ALARM_RATE,
        help=f"the band's one-sided level for an entry no run judged (default "
        f"{FALSE_ALARM_RATE}); an entry a run judged gets that run's, from its report",
    )
    parser.add_argument(
        "--tolerance",
        type=_fraction(ranges.TOLERANCE, "a tolerance (0.01 for 1%)"),
        default=DEFAULT_TOLERANCE,
        help=f"--gpuperf-tolerance for an entry no run judged (default {DEFAULT_TOLERANCE})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)

    def body() -> int:
        written = publish(
            options.inputs,
            options.out,
            bisect=options.bisect,
            title=options.title,
            false_alarm_rate=options.false_alarm_rate,
            tolerance=options.tolerance,
        )
        where = "standard output" if options.out == STDOUT else visible(options.out)
        # to stderr when the page itself went to stdout: the page stays the page
        said = sys.stderr if options.out == STDOUT else sys.stdout
        print(f"gpuperf: written: {where} ({written:,} bytes)", file=said)
        return EXIT_OK

    return run_command(PROG, body)


def publish(
    inputs: Sequence[Path],
    out: Path,
    *,
    bisect: Path | None = None,
    title: str = "pytest-gpuperf dashboard",
    false_alarm_rate: float = FALSE_ALARM_RATE,
    tolerance: float = DEFAULT_TOLERANCE,
) -> int:
    """Read, check, render and write the page; the bytes written. ConfigError or
    BaselineError (one line) on bad input, with nothing written."""
    from pytest_gpuperf.commands.publish.page import render
    from pytest_gpuperf.commands.publish.series import gather
    from pytest_gpuperf.record.files import output_problem, write_output
    from pytest_gpuperf.record.report_reader import ReadReport, read_bisect, read_report

    baselines = [path for path in inputs if path.suffix == ".toml"]
    report_paths = [path for path in inputs if path.suffix == ".json"]
    others = [path for path in inputs if path not in baselines and path not in report_paths]
    if others:
        raise ConfigError(f"{others[0]}: neither a baseline file (.toml) nor a JSON report (.json)")
    given = [*inputs, *([bisect] if bisect else [])]
    for path in given:
        _exists(path)
    if out != STDOUT:
        problem = output_problem(out, baseline_dirs=[p.parent for p in baselines], inputs=given)
        if problem:
            raise ConfigError(f"-o {out}: {problem}; choose another path")
    progress = Progress()

    def reports() -> Iterator[ReadReport]:  # one at a time: gather keeps their points only
        for number, path in enumerate(report_paths):
            progress("reports read", number, len(report_paths))
            yield read_report(path)

    dashboard = gather(baselines, reports(), false_alarm_rate=false_alarm_rate, tolerance=tolerance)
    if not dashboard.series:
        raise ConfigError("the inputs hold no measurement and no baseline entry to show")
    document = read_bisect(bisect) if bisect else None
    created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    html = render(dashboard, bisect=document, created=created, title=title, progress=progress)
    if out == STDOUT:  # `-o -` wrote a file named "-"
        sys.stdout.write(html)
        sys.stdout.flush()
    else:
        write_output("-o", out, html)
    return len(html.encode("utf-8"))


class Progress:
    """A line on stderr at most every PROGRESS_EVERY_S while publishing: a page of 1,000
    measurements and 100 runs takes long enough that silence reads as a hang."""

    def __init__(self) -> None:
        self.last_s = time.monotonic()

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last_s >= PROGRESS_EVERY_S:
            self.last_s = now
            print(f"{PROG}: {done:,} of {total:,} {what}", file=sys.stderr, flush=True)


def _exists(path: Path) -> None:
    if not path.exists():
        gone = "is a symbolic link to nothing" if path.is_symlink() else "does not exist"
        raise ConfigError(f"{path}: {gone}")


if __name__ == "__main__":
    exit_with(PROG, main)
