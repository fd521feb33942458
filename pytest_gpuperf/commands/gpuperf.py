"""The `gpuperf` console script: one name for every command that runs outside pytest, as
`pytest-benchmark compare` and `asv compare / publish / find` are one name each.

    gpuperf compare OLD.json NEW.json
    gpuperf publish baselines/h100-sxm.toml runs/*.json -o dashboard.html
    gpuperf COMMAND --help

This module only dispatches: each subcommand keeps its own argument parser and `main(argv)`
(its module below), imported when it is asked for, so `gpuperf --help` loads none of them.
`python -m pytest_gpuperf.commands` is the same entry, for a Python whose scripts are not on
PATH.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.record.meta import VERSION
from pytest_gpuperf.report.visible import visible

PROG = "gpuperf"
EXIT_OK, EXIT_USAGE = 0, 2


@dataclass(frozen=True)
class Subcommand:
    """One `gpuperf NAME`: the module whose `main(argv)` runs it, and its line in --help."""

    name: str
    module: str
    summary: str


SUBCOMMANDS = (
    Subcommand(
        "compare",
        "pytest_gpuperf.commands.compare",
        "two runs' JSON reports side by side, each change against the gate's band",
    ),
    Subcommand(
        "history",
        "pytest_gpuperf.commands.history",
        "a baseline entry's saves and runs, the band the gate allows, its drift",
    ),
    Subcommand(
        "publish",
        "pytest_gpuperf.commands.publish.__main__",
        "one HTML dashboard of the baseline files and the runs' reports",
    ),
    Subcommand(
        "merge",
        "pytest_gpuperf.commands.merge.__main__",
        "the shards' reports (or saved baselines) merged into one, with one verdict",
    ),
    Subcommand(
        "bisect",
        "pytest_gpuperf.commands.bisect.__main__",
        "the commit between GOOD and BAD that made a test slower",
    ),
)
BY_NAME = {command.name: command for command in SUBCOMMANDS}


def usage() -> str:
    """`gpuperf --help`: the commands, one line each."""
    width = max(len("-h, --help"), *(len(command.name) for command in SUBCOMMANDS))
    lines = [
        f"usage: {PROG} COMMAND [ARGS...]",
        "",
        "pytest-gpuperf's commands outside pytest: on the JSON reports and baseline files",
        "that its runs write.",
        "",
        "commands:",
        *(f"  {c.name:<{width}}  {c.summary}" for c in SUBCOMMANDS),
        "",
        "options:",
        f"  {'-h, --help':<{width}}  this list; `{PROG} COMMAND --help`: a command's own options",
        f"  {'--version':<{width}}  the plugin's version",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `gpuperf COMMAND ARGS...`: the command's own exit status; a missing or unknown
    command is one line on stderr and exit 2."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments:
        return _usage_error(f"name a command: {_names()} (`{PROG} --help` says what each does)")
    first, rest = arguments[0], arguments[1:]
    if first in ("-h", "--help"):
        print(usage())
        return EXIT_OK
    if first == "--version":
        print(f"{PROG} (pytest-gpuperf) {VERSION}")
        return EXIT_OK
    command = BY_NAME.get(first)
    if command is None:
        close = difflib.get_close_matches(first, list(BY_NAME), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        what = "option" if first.startswith("-") else "command"
        return _usage_error(f"no {what} '{visible(first)}'{hint} (commands: {_names()})")
    run = importlib.import_module(command.module).main
    try:
        return int(run(rest))
    except GpuPerfError as problem:  # a last resort: each command handles every known error
        print(f"{PROG} {command.name}: error: {visible(problem)}", file=sys.stderr)
        return EXIT_USAGE


def _names() -> str:
    return ", ".join(command.name for command in SUBCOMMANDS)


def _usage_error(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


__all__ = ["SUBCOMMANDS", "Subcommand", "main", "usage"]
