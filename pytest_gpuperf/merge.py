"""One report, one verdict and one baseline file from a perf suite run in shards over N CI
runners (`pytest --gpuperf --gpuperf-shard=K/N --gpuperf-json=shard-K.json` on each):

    python -m pytest_gpuperf.merge shard-*.json [--json OUT] [--markdown OUT] [--junit OUT]
    python -m pytest_gpuperf.merge --baselines SHARD_DIR... --out baselines/

Reports: exit 0 when every shard 1..N is there, agrees on the run (commit, device key, suite
size, plan) and passed; 1 otherwise, with the reasons in the summary and the files written.
Baselines: a three-way merge into --out's files (baseline/merge.py); 1 on a conflicting
entry, naming each version's file:line, with nothing written. Bad arguments, unreadable or
foreign files: one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_gpuperf.config.command import CommandParser, exit_with, run_command
from pytest_gpuperf.errors import ConfigError

PROG = "python -m pytest_gpuperf.merge"
EXIT_OK, EXIT_FAILED = 0, 1


def _parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG,
        description="Merge the JSON reports (or the saved baselines) of a perf suite run in "
        "shards (pytest --gpuperf-shard=K/N) into one report with one verdict (or one "
        "baseline directory).",
    )
    parser.add_argument(
        "reports", nargs="*", metavar="SHARD.json", help="every shard's --gpuperf-json report"
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the merged JSON report")
    parser.add_argument(
        "--markdown",
        type=Path,
        metavar="OUT",
        help="write the merged Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set)",
    )
    parser.add_argument("--junit", type=Path, metavar="OUT", help="write JUnit XML")
    parser.add_argument(
        "--baselines",
        nargs="+",
        metavar="SHARD_DIR",
        help="merge the baseline directories the shards saved into (with --out) instead",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="with --baselines: the baseline directory to merge into; its files now are the "
        "common base (the merge job's checkout of the commit the shards ran)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    options = parser.parse_args(argv)

    def body() -> int:
        if options.baselines is not None:
            if options.reports or options.json or options.markdown or options.junit:
                parser.error("--baselines merges baselines only: give the reports in another call")
            if options.out is None:
                parser.error("--baselines needs --out DIR (the baseline directory to merge into)")
            return _merge_baselines(options.baselines, options.out)
        if options.out is not None:
            parser.error("--out goes with --baselines; the reports go to --json/--markdown/--junit")
        if not options.reports:
            parser.error("give every shard's JSON report (or --baselines SHARD_DIR... --out DIR)")
        command = " ".join([PROG, *map(shlex.quote, argv if argv is not None else sys.argv[1:])])
        return _merge_reports(options, command)

    return run_command(PROG, body)


def _merge_reports(options: argparse.Namespace, command: str) -> int:
    from pytest_gpuperf import report
    from pytest_gpuperf.report.junit import junit_xml
    from pytest_gpuperf.report.shards import merge_reports, read_shard

    merged = merge_reports([read_shard(path) for path in options.reports], command=command)
    rows, meta = list(merged.rows), merged.meta
    lines = merged.lines()
    written: list[str] = []
    if options.json:
        document = report.to_json(rows, meta)
        written.append(_write(options.json, lambda: report.write_json(options.json, document)))
    if options.markdown:
        text = merged.markdown(report.markdown(rows, meta))
        written.append(_write(options.markdown, lambda: _write_text(options.markdown, text)))
        summary = _write("$GITHUB_STEP_SUMMARY", lambda: report.append_github_step_summary(text))
        if summary:
            written.append(f"appended to {summary}")
    if options.junit:
        xml = junit_xml(rows, failures=merged.reasons)
        written.append(_write(options.junit, lambda: _write_text(options.junit, xml)))
    if rows:
        print(report.terminal_table(rows, meta))
    for line in lines:
        print(f"gpuperf: {line}")
    for reason in merged.reasons:
        print(f"gpuperf: FAILED: {reason}")
    for what in written:
        print(f"gpuperf: written: {what}")
    return EXIT_OK if merged.verdict == "passed" else EXIT_FAILED


def _merge_baselines(shard_dirs: Sequence[str], out: Path) -> int:
    from pytest_gpuperf.baseline.merge import plan_merge, write_merge

    merges = plan_merge(shard_dirs, out)
    conflicts = [line for merge in merges for line in merge.conflicts]
    if conflicts:
        for line in conflicts:
            print(f"gpuperf: conflict: {line}", file=sys.stderr)
        print(
            f"gpuperf: nothing merged: {len(conflicts)} conflicting entr"
            f"{'ies' if len(conflicts) != 1 else 'y'}; {out} was left as it was",
            file=sys.stderr,
        )
        return EXIT_FAILED
    write_merge(merges, out)
    for merge in merges:
        print(f"gpuperf: {merge.line()}")
    return EXIT_OK


def _write(path: Path | str, write: Callable[[], Path | None]) -> str:
    """Run a writer and say what it wrote ("" for nothing); a file that cannot be written is
    one line and exit 2 (a bad --json, --markdown or --junit path), as any bad argument."""
    from pytest_gpuperf.report.files import ReportPathError

    try:
        done = write()
    except OSError as problem:
        raise ConfigError(
            f"{path}: cannot be written: {problem.strerror or problem}"
            + (f" ({problem.filename})" if problem.filename else "")
        ) from None
    except ReportPathError as problem:  # a device, a FIFO, a folder: never replaced
        raise ConfigError(f"cannot be written: {problem}") from None
    return str(done) if done is not None else ""


def _write_text(path: Path, text: str) -> Path:
    """Whole or absent, never over a device or a FIFO, with the umask's mode (as the
    pytest run's own reports: report/files.py)."""
    from pytest_gpuperf.report.files import write_report

    return write_report(path, text)


if __name__ == "__main__":
    exit_with(PROG, main)
