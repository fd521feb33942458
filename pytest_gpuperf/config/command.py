"""What every `python -m pytest_gpuperf.<command>` shares: arguments whose errors are one line
(the usage is in --help), and the end of a command, where bad input is one line on stderr and
exit 2, Ctrl-C one line and exit 130, and never a traceback through our code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from pytest_gpuperf.errors import BaselineError, ConfigError, GpuPerfError

EXIT_USAGE, EXIT_INTERRUPTED = 2, 130


class CommandParser(argparse.ArgumentParser):
    """argparse whose errors are one line, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def run_command(prog: str, body: Callable[[], int]) -> int:
    """`body()`'s exit status; a ConfigError or BaselineError (bad input) is one line on
    stderr and exit 2, Ctrl-C one line and exit 130."""
    try:
        return body()
    except (ConfigError, BaselineError) as problem:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED


def exit_with(prog: str, main: Callable[[], int]) -> NoReturn:
    """The `if __name__ == "__main__"` of a command: its status, and any other error of ours
    as one line, exit 2 (a last resort: main handles every known one)."""
    try:
        sys.exit(main())
    except GpuPerfError as problem:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
