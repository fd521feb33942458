"""The command line: `gpuperf bisect GOOD BAD [options] [-- PYTEST_ARGS]`.

Exit status: 0 a culprit was named, 1 `culprit: none` (the last line says why), 2 the
arguments are wrong (one line on stderr, nothing probed or written), 3 `culprit: not
measured` (the simulated device did not time BAD's edit), 4 `culprit: unknown` (a probe
failed twice for a reason that is not a compile error), 130 Ctrl-C and 143 SIGTERM (one line;
the running probe stopped, nothing written).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_gpuperf.commands.bisect import commits as git_range
from pytest_gpuperf.commands.bisect.commits import RangeError
from pytest_gpuperf.commands.bisect.probe import OWNED_OPTIONS, ProbeError
from pytest_gpuperf.commands.bisect.runner import Bisection, Plan, Report
from pytest_gpuperf.commands.bisect.search import Probe
from pytest_gpuperf.config.command import CommandParser
from pytest_gpuperf.config.options import DEFAULT_BUDGET_S
from pytest_gpuperf.config.parsing import parse_budget, parse_number, parse_threshold
from pytest_gpuperf.errors import ConfigError, Terminated, stop_on_sigterm
from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_THRESHOLD

DEFAULT_ROUNDS = 3
DEFAULT_MAX_PROBES = 30
# The bounds of the numeric options: beyond them a value is a typo, not a plan (a budget of
# 1e308 s overflowed in every probe and read as "BAD does not build").
MAX_ROUNDS = 8
MAX_PROBES = 1000
MAX_ROUND_BUDGET_S = 3600.0  # the last round's budget (--budget x 4^(rounds-1)): an hour
MAX_PROBE_TIMEOUT_S = 7 * 24 * 3600.0
CULPRIT_EXIT, NONE_EXIT, USAGE_EXIT, UNMEASURED_EXIT, STOPPED_EXIT = 0, 1, 2, 3, 4
PROG = "gpuperf bisect"


class UsageError(Exception):
    """A wrong argument: said in one line, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        raises=UsageError,
        prog=PROG,
        description="Find the first-parent commit between GOOD and BAD at which the selected "
        "perf tests' kernels got slower than at GOOD by more than the threshold. Arguments "
        "after -- go to pytest (the tests to run, --gpuperf-backend=..., -p ...).",
    )
    parser.add_argument("good", metavar="GOOD", help="a commit whose kernels are fast")
    parser.add_argument("bad", metavar="BAD", help="a later commit whose kernels are slow")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON to PATH")
    parser.add_argument(
        "--threshold",
        default=str(DEFAULT_COMPARE_THRESHOLD),
        metavar="FRACTION",
        help="the smallest slowdown (time ratio - 1) that counts, as --gpuperf-compare-"
        f"threshold. Default: {DEFAULT_COMPARE_THRESHOLD}.",
    )
    parser.add_argument(
        "--budget",
        default=str(DEFAULT_BUDGET_S),
        metavar="SECONDS",
        help=f"--gpuperf-budget of a probe's first round. Default: {DEFAULT_BUDGET_S:g}.",
    )
    parser.add_argument(
        "--rounds",
        type=_count,
        default=DEFAULT_ROUNDS,
        metavar="N",
        help="pytest runs a probe may take while its comparison is undecided, each with 4x "
        f"the previous budget (more pairs). Default: {DEFAULT_ROUNDS}.",
    )
    parser.add_argument(
        "--max-probes",
        type=_count,
        default=DEFAULT_MAX_PROBES,
        metavar="N",
        help=f"probed commits at most (skipped ones count). Default: {DEFAULT_MAX_PROBES}.",
    )
    parser.add_argument(
        "--probe-timeout",
        default=None,
        metavar="SECONDS",
        help="stop a probe's pytest run after this long (it is run once more; a second "
        "timeout ends the search). Default: none.",
    )
    return parser


def _count(text: str) -> int:
    """A count of at most 6 digits (argparse's int() takes a 4,000-digit one)."""
    if not (text.isascii() and text.isdigit() and len(text) <= 6):
        shown = repr(text) if len(text) <= 20 else f"{text[:20]!r}... ({len(text)} characters)"
        raise argparse.ArgumentTypeError(f"expected a whole number of up to 6 digits, got {shown}")
    return int(text)


def plan_from(argv: Sequence[str], cwd: Path) -> tuple[Plan, Path | None]:
    """The checked plan and --json's path; UsageError naming what is wrong."""
    own, pytest_args = list(argv), []
    if "--" in own:
        split = own.index("--")
        own, pytest_args = own[:split], own[split + 1 :]
    options = _parser().parse_args(own)
    try:
        threshold = parse_threshold(options.threshold, "--threshold")
        budget_s = parse_budget(options.budget, "--budget")
        timeout_s = (
            None
            if options.probe_timeout is None
            else parse_number(options.probe_timeout, "--probe-timeout", "the timeout")
        )
    except ConfigError as problem:
        raise UsageError(str(problem)) from None
    if not 1 <= options.rounds <= MAX_ROUNDS:
        raise UsageError(
            f"--rounds: expected 1 to {MAX_ROUNDS} runs per probe, got {options.rounds}"
        )
    if not 2 <= options.max_probes <= MAX_PROBES:
        raise UsageError(f"--max-probes: expected 2 to {MAX_PROBES}, got {options.max_probes}")
    last_round_s = budget_s * 4 ** (options.rounds - 1)
    if last_round_s > MAX_ROUND_BUDGET_S:
        raise UsageError(
            f"--budget {options.budget} with --rounds {options.rounds}: the last round would "
            f"sample {last_round_s:.3g} s per measurement (4x a round); at most "
            f"{MAX_ROUND_BUDGET_S:g} s"
        )
    if timeout_s is not None and not 0 < timeout_s <= MAX_PROBE_TIMEOUT_S:
        raise UsageError(
            f"--probe-timeout: expected 0 < seconds <= {MAX_PROBE_TIMEOUT_S:g} (a week), "
            f"got {options.probe_timeout}"
        )
    for arg in pytest_args:
        flag = arg.split("=", 1)[0]
        if flag in OWNED_OPTIONS:
            raise UsageError(f"{flag} after --: bisect sets it itself ({OWNED_OPTIONS[flag]})")
    json_path = None
    if options.json is not None:
        json_path = cwd / options.json
        refused = _json_problem(json_path, cwd, pytest_args)
        if refused:
            raise UsageError(f"--json {options.json}: {refused}; choose another path")
    plan = Plan(
        good=options.good,
        bad=options.bad,
        pytest_args=tuple(pytest_args),
        threshold=threshold,
        budget_s=budget_s,
        rounds=options.rounds,
        max_probes=options.max_probes,
        cwd=cwd,
        probe_timeout_s=timeout_s,
    )
    return plan, json_path


def _json_problem(path: Path, cwd: Path, pytest_args: Sequence[str]) -> str:
    """Why --json may not be written at `path`, by the plugin's report-path rules: not a
    baseline file (the repository's `baselines/`, the work folder's, a
    `--gpuperf-baseline-dir` after --), a lock or a compiled kernel; a regular file or a new
    name in a writable folder. Checked before the first probe, not after the search."""
    from pytest_gpuperf.record.files import output_problem

    if not str(path.name) or str(path) == str(cwd):
        return "names no file"
    folders = [cwd / "baselines"]
    with contextlib.suppress(RangeError):
        folders.append(git_range.toplevel_of(cwd) / "baselines")
    for index, arg in enumerate(pytest_args):
        if arg.startswith("--gpuperf-baseline-dir="):
            folders.append(cwd / arg.split("=", 1)[1])
        elif arg == "--gpuperf-baseline-dir" and index + 1 < len(pytest_args):
            folders.append(cwd / pytest_args[index + 1])
    problem = output_problem(path, baseline_dirs=folders)
    if problem:
        return problem
    for option, other in _probe_reports(pytest_args):
        if os.path.realpath(cwd / other) == os.path.realpath(path):
            return f"is also {option}'s file, which every probe writes"
    return ""


def _probe_reports(pytest_args: Sequence[str]) -> list[tuple[str, str]]:
    """(option, path) of the report files the pytest arguments ask every probe to write."""
    named = ("--junitxml", "--junit-xml", "--gpuperf-markdown", "--gpuperf-benchmark-json")
    found = []
    for index, arg in enumerate(pytest_args):
        flag, equals, value = arg.partition("=")
        if flag in named:
            if equals:
                found.append((flag, value))
            elif index + 1 < len(pytest_args):
                found.append((flag, pytest_args[index + 1]))
    return found


def _progress(probe: Probe, expected: int) -> None:
    from pytest_gpuperf.commands.bisect.render import progress_line

    print(progress_line(probe, expected), file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_gpuperf.commands.bisect.render import text_report, to_json
    from pytest_gpuperf.errors import stop_words
    from pytest_gpuperf.record.json_report import write_json

    arguments = list(sys.argv[1:] if argv is None else argv)
    prog = PROG
    restore = stop_on_sigterm()
    try:
        plan, json_path = plan_from(arguments, Path.cwd())
        _say_uncommitted(plan.cwd)
        report = Bisection(plan, progress=_progress).run()
        print(text_report(report))
        if json_path is not None:
            command = " ".join([prog, *(shlex.quote(a) for a in arguments)])
            try:
                write_json(json_path, to_json(report, command))
            except (OSError, ValueError) as failure:
                print(f"{prog}: error: --json {json_path}: not written: {failure}", file=sys.stderr)
                return USAGE_EXIT
    except (UsageError, RangeError, ProbeError) as problem:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        return USAGE_EXIT
    except KeyboardInterrupt as stop:
        terminated = isinstance(stop, Terminated)
        print(
            f"{prog}: stopped by {stop_words()}: the running probe was stopped, its files "
            "removed; no --json written",
            file=sys.stderr,
        )
        return 128 + (signal.SIGTERM if terminated else signal.SIGINT)
    finally:
        if restore is not None:
            restore()
    return exit_status(report)


def exit_status(report: Report) -> int:
    if report.stopped:
        return STOPPED_EXIT
    if report.unmeasured:
        return UNMEASURED_EXIT
    return CULPRIT_EXIT if report.culprit is not None else NONE_EXIT


def _say_uncommitted(cwd: Path) -> None:
    """One line when the work tree has uncommitted changes: every probe runs them (the
    tests and their Python are the work tree's; the kernels are each commit's)."""
    try:
        changed = git_range.uncommitted(git_range.toplevel_of(cwd))
    except RangeError:
        return  # the search says why in its own words
    if changed:
        shown = ", ".join(changed[:3]) + (
            f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        )
        print(
            f"bisect: every probe runs the work tree's uncommitted changes to {shown} (the "
            "tests are the work tree's; the kernels are each commit's)",
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
