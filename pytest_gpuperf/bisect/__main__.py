"""The command line: `python -m pytest_gpuperf.bisect GOOD BAD [options] [-- PYTEST_ARGS]`.

Exit status: 0 a culprit was named, 1 `culprit: none` (the last line says why), 2 the
arguments are wrong (one line on stderr, nothing probed or written).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_gpuperf.bisect.commits import RangeError
from pytest_gpuperf.bisect.probe import OWNED_OPTIONS, ProbeError
from pytest_gpuperf.bisect.runner import Bisection, Plan
from pytest_gpuperf.bisect.search import Probe
from pytest_gpuperf.config.options import DEFAULT_BUDGET_S
from pytest_gpuperf.config.parsing import parse_budget, parse_threshold
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_THRESHOLD

DEFAULT_ROUNDS = 3
DEFAULT_MAX_PROBES = 30
USAGE_EXIT = 2


class UsageError(Exception):
    """A wrong argument: said in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m pytest_gpuperf.bisect",
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
        type=int,
        default=DEFAULT_ROUNDS,
        metavar="N",
        help="pytest runs a probe may take while its comparison is undecided, each with 4x "
        f"the previous budget (more pairs). Default: {DEFAULT_ROUNDS}.",
    )
    parser.add_argument(
        "--max-probes",
        type=int,
        default=DEFAULT_MAX_PROBES,
        metavar="N",
        help=f"probed commits at most (skipped ones count). Default: {DEFAULT_MAX_PROBES}.",
    )
    parser.add_argument(
        "--probe-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop a probe's pytest run after this long (the commit is then skipped). "
        "Default: none.",
    )
    return parser


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
    except ConfigError as problem:
        raise UsageError(str(problem)) from None
    if options.rounds < 1:
        raise UsageError(f"--rounds: expected at least 1 run per probe, got {options.rounds}")
    if options.max_probes < 2:
        raise UsageError(f"--max-probes: expected at least 2, got {options.max_probes}")
    if options.probe_timeout is not None and not options.probe_timeout > 0:
        raise UsageError(f"--probe-timeout: expected positive seconds, got {options.probe_timeout}")
    for arg in pytest_args:
        flag = arg.split("=", 1)[0]
        if flag in OWNED_OPTIONS:
            raise UsageError(f"{flag} after --: bisect sets it itself ({OWNED_OPTIONS[flag]})")
    json_path = None
    if options.json:
        json_path = (cwd / options.json).resolve()
        if not json_path.parent.is_dir() or not os.access(json_path.parent, os.W_OK):
            raise UsageError(
                f"--json {options.json}: the directory {json_path.parent} does not exist or "
                "cannot be written"
            )
    plan = Plan(
        good=options.good,
        bad=options.bad,
        pytest_args=tuple(pytest_args),
        threshold=threshold,
        budget_s=budget_s,
        rounds=options.rounds,
        max_probes=options.max_probes,
        cwd=cwd,
        probe_timeout_s=options.probe_timeout,
    )
    return plan, json_path


def _progress(probe: Probe, expected: int) -> None:
    from pytest_gpuperf.bisect.render import progress_line

    print(progress_line(probe, expected), file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_gpuperf.bisect.render import text_report, to_json
    from pytest_gpuperf.report.json_report import write_json

    arguments = list(sys.argv[1:] if argv is None else argv)
    prog = "python -m pytest_gpuperf.bisect"
    try:
        plan, json_path = plan_from(arguments, Path.cwd())
        report = Bisection(plan, progress=_progress).run()
    except (UsageError, RangeError, ProbeError) as problem:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        return USAGE_EXIT
    except KeyboardInterrupt:
        print(f"{prog}: interrupted: nothing written", file=sys.stderr)
        return 130
    print(text_report(report))
    if json_path is not None:
        command = " ".join([prog, *(shlex.quote(a) for a in arguments)])
        try:
            write_json(json_path, to_json(report, command))
        except OSError as failure:
            print(f"{prog}: error: --json {json_path}: not written: {failure}", file=sys.stderr)
            return USAGE_EXIT
    return 0 if report.culprit is not None else 1


if __name__ == "__main__":
    sys.exit(main())
