"""Which of `--no-gpuperf` and the flags that measure a run obeys, by where each was given.

pytest puts `PYTEST_ADDOPTS` and the ini file's `addopts` in front of the command line and
parses the lot as one, so `addopts = --no-gpuperf` in a pull request's pytest.ini silently
turned CI's `pytest --gpuperf` into smoke mode: nothing timed, exit 0. The command line is
what the person or the CI job typed, so it wins over the other two, and the run says so; two
contradicting flags of which neither is on the command line (or both are) stop the run,
naming where each came from. No pytest import here: plugin/__init__.py reads the three
places and drops the losing flag from pytest's options before the settings are built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_gpuperf.errors import ConfigError

COMMAND_LINE = "the command line"
ENV_ADDOPTS = "PYTEST_ADDOPTS"
NO_GPUPERF = "--no-gpuperf"
# what --no-gpuperf contradicts: the flags that make a run measure (their option dests)
MEASURING_FLAGS = {
    "--gpuperf": "gpuperf",
    "--gpuperf-save": "gpuperf_save",
    "--gpuperf-compare": "gpuperf_compare",
}


def origins(
    flag: str,
    *,
    command_line: Sequence[str],
    env_addopts: Sequence[str],
    ini_addopts: Sequence[str],
    ini_name: str,
) -> tuple[str, ...]:
    """Where `flag` was given: COMMAND_LINE, ENV_ADDOPTS, "addopts in <ini file>"."""
    found = []
    for where, args in (
        (COMMAND_LINE, command_line),
        (ENV_ADDOPTS, env_addopts),
        (f"addopts in {ini_name}", ini_addopts),
    ):
        if _given(flag, args):
            found.append(where)
    return tuple(found)


def _given(flag: str, args: Sequence[str]) -> bool:
    """pytest refuses abbreviated long options, so a flag is its own word (or `flag=VALUE`);
    after `--` every word is a path."""
    for arg in args:
        if arg == "--":
            return False
        if arg == flag or arg.startswith(f"{flag}="):
            return True
    return False


@dataclass(frozen=True)
class Settled:
    """The option dests to clear before the settings are built, and the line that says why."""

    dropped: tuple[str, ...] = ()
    note: str = ""


def settle(given: Mapping[str, tuple[str, ...]]) -> Settled:
    """`given` maps `--no-gpuperf` and the measuring flags to where each was given (empty:
    not given). The side given on the command line wins when the other is not; otherwise
    contradicting flags are a ConfigError naming where each came from."""
    off = given.get(NO_GPUPERF, ())
    on = {flag: where for flag, where in given.items() if flag != NO_GPUPERF and where}
    if not off or not on:
        return Settled()
    off_typed = COMMAND_LINE in off
    on_typed = [flag for flag, where in on.items() if COMMAND_LINE in where]
    named = ", ".join(f"{flag} ({_words(where)})" for flag, where in on.items())
    if off_typed and not on_typed:
        return Settled(
            tuple(MEASURING_FLAGS[flag] for flag in on),
            f"{NO_GPUPERF} on the command line overrides {named}: this run does not measure",
        )
    if on_typed and not off_typed:
        return Settled(
            ("no_gpuperf",),
            f"{on_typed[0]} on the command line overrides {NO_GPUPERF} ({_words(off)}): "
            "this run measures",
        )
    first = next(iter(on))
    raise ConfigError(
        f"{NO_GPUPERF} ({_words(off)}) and {first} ({_words(on[first])}) contradict each "
        "other: remove one (a flag typed on the command line wins over PYTEST_ADDOPTS and "
        "the ini file's addopts)"
    )


def _words(where: tuple[str, ...]) -> str:
    return " and ".join(where)
