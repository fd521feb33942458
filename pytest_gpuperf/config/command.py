"""What every `gpuperf <command>` shares: one argument parser whose errors are
one line (the usage is in --help), and the end of a command, where bad input is one line on
stderr and exit 2, Ctrl-C or SIGTERM one line and exit 130 or 143 (every file it was writing
whole or as it was: the writers leave no temporary), and never a traceback through our code.
Every message is printed with its control characters escaped (report/visible.py): a report's
field quoted in an error must not retitle or clear the terminal."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from pytest_gpuperf.errors import (
    BaselineError,
    ConfigError,
    GpuPerfError,
    stop_on_sigterm,
    stop_words,
)
from pytest_gpuperf.report.visible import visible

EXIT_USAGE, EXIT_INTERRUPTED = 2, 130


class CommandParser(argparse.ArgumentParser):
    """argparse whose errors are one line, exit 2: the parser of every command. `raises`: an
    exception type to raise with the message instead of exiting, for a command that ends
    every bad input through its own funnel (bisect's UsageError)."""

    def __init__(self, *args: Any, raises: type[Exception] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.raises = raises

    def error(self, message: str) -> NoReturn:
        if self.raises is not None:
            raise self.raises(message)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {visible(message)} (see --help)\n")


def run_command(prog: str, body: Callable[[], int]) -> int:
    """`body()`'s exit status; a ConfigError or BaselineError (bad input) is one line on
    stderr and exit 2, Ctrl-C one line and exit 130, SIGTERM (a cancelled CI job) the same
    and exit 143."""
    restore = stop_on_sigterm()
    try:
        return body()
    except (ConfigError, BaselineError) as problem:
        print(f"{prog}: error: {visible(problem)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        stop = stop_words()
        print(
            f"{prog}: interrupted ({stop}); every file is whole or as it was before, with no "
            "temporary left",
            file=sys.stderr,
        )
        return 128 + (signal.SIGTERM if stop == "SIGTERM" else signal.SIGINT)
    finally:
        if restore is not None:
            restore()


def exit_with(prog: str, main: Callable[[], int]) -> NoReturn:
    """The `if __name__ == "__main__"` of a command: its status, and any other error of ours
    as one line, exit 2 (a last resort: main handles every known one)."""
    try:
        sys.exit(main())
    except GpuPerfError as problem:
        print(f"{prog}: error: {visible(problem)}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
