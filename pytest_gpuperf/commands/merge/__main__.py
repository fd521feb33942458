"""One report, one verdict and one baseline file from a perf suite run in shards over N CI
runners (`pytest --gpuperf --gpuperf-shard=K/N --gpuperf-json=shard-K.json` on each):

    gpuperf merge shard-*.json [--json OUT] [--markdown OUT] [--junit OUT]
        [--baseline-dir baselines/]
    gpuperf merge --baselines SHARD_DIR... --out baselines/

Reports: exit 0 when every shard 1..N is there, agrees on the run (commit, device key, suite
size, plan) and passed; 1 otherwise, with the reasons in the summary and the files written.
Baselines: a three-way merge into --out's files (baseline/merge.py); 1 on a conflicting
entry, naming each version's file:line, with nothing written. Bad arguments, unreadable,
foreign or forged files (a field of the wrong kind, an unknown state, a result given twice):
one line on stderr naming the file and the field, and exit 2.

Before any shard is read, every output (and $GITHUB_STEP_SUMMARY, with --markdown) is held to
the pytest run's report-path rules (record/files.py): never a baseline file, an input of this
merge, a device, a FIFO or a folder. --out must be an existing directory. Ctrl-C or SIGTERM
leaves every file whole or as it was, with no temporary (exit 130 or 143).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_gpuperf.config.command import CommandParser, run_command
from pytest_gpuperf.errors import (
    ConfigError,
    GpuPerfError,
)

PROG = "gpuperf merge"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


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
        "--baseline-dir",
        type=Path,
        metavar="DIR",
        help="judge the shards' stored-baseline checks against DIR's files (the baselines of "
        "the commit the shards ran, as they were before any save) instead of each check's own "
        "copy of its entry. Default: the copies",
    )
    parser.add_argument(
        "--baselines",
        nargs="+",
        metavar="SHARD_DIR",
        help="merge the baseline directories the shards saved into (with --out) instead",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="with --baselines: the baseline directory to merge into; its files now are the "
        "common base (the merge job's checkout of the commit the shards ran)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    options = parser.parse_args(argv)
    # SIGTERM (a cancelled CI job) stops as Ctrl-C does: a file being written is left whole
    # or absent, with no temporary beside it (baseline/file_write.py cleans up on the way out)
    return run_command(PROG, lambda: _run(parser, options, argv))


def _run(
    parser: argparse.ArgumentParser, options: argparse.Namespace, argv: Sequence[str] | None
) -> int:
    if options.baselines is not None:
        if options.baseline_dir is not None:
            parser.error("--baseline-dir goes with the reports: --baselines merges the folders")
        if options.reports or options.json or options.markdown or options.junit:
            parser.error("--baselines merges baselines only: give the reports in another call")
        if options.out is None:
            parser.error("--baselines needs --out DIR (the baseline directory to merge into)")
        return _merge_baselines(options.baselines, _out_dir(options.out, options.baselines))
    if options.out is not None:
        parser.error("--out goes with --baselines; the reports go to --json/--markdown/--junit")
    if not options.reports:
        parser.error("give every shard's JSON report (or --baselines SHARD_DIR... --out DIR)")
    problem = _unwritable(options, os.environ)
    if problem:
        raise ConfigError(problem)
    command = " ".join([PROG, *map(shlex.quote, argv if argv is not None else sys.argv[1:])])
    return _merge_reports(options, command)


def _unwritable(options: argparse.Namespace, env: Mapping[str, str]) -> str:
    """The first output that must not or cannot be written, and why ("" when all can), asked
    before any shard is read: the report-path rules of a pytest run (record/files.py), with
    the shards' reports as this command's inputs, `baselines/` here as the baseline folder,
    and every .toml path refused (the merge writes JSON, Markdown and XML; a .toml file is a
    baseline file of some folder the merge cannot know)."""
    from pytest_gpuperf.baseline.shared_lock import lock_dir
    from pytest_gpuperf.record.files import Guarded, first_unwritable
    from pytest_gpuperf.runtime.compile import cache_dir

    named = [
        (option, path)
        for option, path in (
            ("--json", options.json),
            ("--markdown", options.markdown),
            ("--junit", options.junit),
        )
        if path is not None
    ]
    summary = env.get("GITHUB_STEP_SUMMARY") if options.markdown is not None else None
    guards = Guarded(Path("baselines"), lock_dir(), cache_dir())
    inputs = [Path(report) for report in options.reports]
    problem = first_unwritable(named, guards, inputs=inputs, summary=summary)
    if problem:
        return problem
    for option, path in [*named, *([("$GITHUB_STEP_SUMMARY", Path(summary))] if summary else [])]:
        if path.suffix.lower() == ".toml":
            return (
                f"{option}={path}: is a .toml path, where baselines live (baselines/<device>."
                "toml); the merge writes JSON, Markdown and XML: choose another path"
            )
    return ""


def _out_dir(raw: str, shard_dirs: Sequence[str]) -> Path:
    """--out as a directory that exists: the merge job's checkout of the baselines the shards
    started from (a new folder would be an empty base: every entry written as if new)."""
    if not raw.strip():
        raise ConfigError(
            "--out is empty: give the baseline directory to merge into (e.g. --out baselines)"
        )
    for directory in shard_dirs:
        if not directory.strip():
            raise ConfigError("--baselines: an empty directory name; give each shard's folder")
    out = Path(raw)
    if not out.is_dir():
        what = "is not a directory" if out.exists() else "does not exist"
        raise ConfigError(
            f"--out {raw}: {what}; give the merge job's checkout of the baseline directory the "
            "shards started from (its files are the base of the three-way merge)"
        )
    for directory in shard_dirs:
        if Path(directory).is_dir() and os.path.samefile(directory, out):
            raise ConfigError(
                f"--out {raw}: is also a shard's directory ({directory}); merge into the "
                "directory the shards started from"
            )
    return out


def _merge_reports(options: argparse.Namespace, command: str) -> int:
    from pytest_gpuperf import report
    from pytest_gpuperf.commands.merge.shards import merge_reports, read_shard
    from pytest_gpuperf.record.json_report import write_json
    from pytest_gpuperf.report.junit import junit_xml
    from pytest_gpuperf.report.visible import visible

    baseline_dir = options.baseline_dir
    if baseline_dir is not None and not baseline_dir.is_dir():
        what = "is not a directory" if baseline_dir.exists() else "does not exist"
        raise ConfigError(
            f"--baseline-dir {baseline_dir}: {what}; give the baseline folder of the commit the "
            "shards ran (as it was before any save), or leave the option out"
        )
    merged = merge_reports(
        [read_shard(path) for path in options.reports], command=command, baseline_dir=baseline_dir
    )
    rows, meta = list(merged.rows), merged.meta
    lines = merged.lines()
    written: list[str] = []
    if options.json:
        document = report.to_json(rows, meta)
        written.append(_write(options.json, lambda: write_json(options.json, document)))
    if options.markdown:
        text = merged.markdown(report.markdown(rows, meta))
        written.append(_write(options.markdown, lambda: _write_text(options.markdown, text)))
        summary = _write("$GITHUB_STEP_SUMMARY", lambda: report.append_github_step_summary(text))
        if summary:
            written.append(f"appended to {summary}")
    if options.junit:
        tests = (meta.merge or {}).get("tests", ())
        xml = junit_xml(rows, failures=merged.reasons, tests=tests)
        written.append(_write(options.junit, lambda: _write_text(options.junit, xml)))
    if rows:
        print(report.terminal_table(rows, meta))
    for line in lines:
        print(f"gpuperf: {visible(line)}")
    for reason in merged.reasons:
        print(f"gpuperf: FAILED: {visible(reason)}")
    for what in written:
        print(f"gpuperf: written: {visible(what)}")
    return EXIT_OK if merged.verdict == "passed" else EXIT_FAILED


def _merge_baselines(shard_dirs: Sequence[str], out: Path) -> int:
    from pytest_gpuperf.baseline.merge import plan_merge, write_merge
    from pytest_gpuperf.report.visible import visible

    merges = plan_merge(shard_dirs, out)
    conflicts = [line for merge in merges for line in merge.conflicts]
    if conflicts:
        for line in conflicts:
            print(f"gpuperf: conflict: {visible(line)}", file=sys.stderr)
        print(
            f"gpuperf: nothing merged: {len(conflicts)} conflicting entr"
            f"{'ies' if len(conflicts) != 1 else 'y'}; {visible(out)} was left as it was",
            file=sys.stderr,
        )
        return EXIT_FAILED
    write_merge(merges, out)
    for merge in merges:
        print(f"gpuperf: {visible(merge.line())}")
    return EXIT_OK


def _write(path: Path | str, write: Callable[[], Path | None]) -> str:
    """Run a writer and say what it wrote ("" for nothing); a file that cannot be written is
    one line and exit 2 (a bad --json, --markdown or --junit path), as any bad argument."""
    from pytest_gpuperf.record.files import ReportPathError

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
    pytest run's own reports: record/files.py)."""
    from pytest_gpuperf.record.files import write_report

    return write_report(path, text)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GpuPerfError as problem:  # a last resort: every known error is handled in main
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
