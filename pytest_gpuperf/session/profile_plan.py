"""Who is an explain pass's child: the plan file's variable, and the proof that goes with it.

A process in the explain pass's child mode measures nothing and gates nothing (each gpu_bench
call launches once under the profiler, session/profile_child.py), so the variable alone must
not put it there: one inherited from a shell (or set by a hostile) made a failing suite pass
with nothing timed, and the plan's lines were appended through whatever the path pointed to.
Only a child the plugin started is one: the parent makes a private folder (mode 0700, its own),
the plan file and a key file in it (O_EXCL, no link followed), and gives the child the plan's
path and the key (`KEY_ENV`); the child enters the mode only when the plan's folder is a real
directory of its own user that no one else may enter, its key file holds that key and the plan
is a regular file. Anything less is ignored, with one warning (`inherited_plan_line`).

Apart from profile_child.py, which loads NumPy: the plugin asks this at every start.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

PLAN_ENV = "GPUPERF_PROFILE_PLAN"  # set in the child: where the fixture writes its launches
KEY_ENV = "GPUPERF_PROFILE_KEY"  # set in the child: the proof that the parent made the plan
_KEY_FILE = "key"
_PLAN_FILE = "plan.jsonl"


def child_plan() -> Path | None:
    """The plan file when this process is an explain pass's child (None: a normal run, and
    one whose `PLAN_ENV` comes without the parent's proof)."""
    named = os.environ.get(PLAN_ENV)
    if not named:
        return None
    return Path(named) if _proven(named, os.environ.get(KEY_ENV, "")) else None


def inherited_plan_line() -> str:
    """The warning for a `PLAN_ENV` this process ignores ("" when it is unset or proven)."""
    named = os.environ.get(PLAN_ENV)
    if not named or child_plan() is not None:
        return ""
    return (
        f"{PLAN_ENV} is set ({named!r}) but this process was not started by the explain pass: "
        "ignored, the tests are measured and gated as usual (unset the variable)"
    )


def make_plan(folder: Path) -> tuple[Path, dict[str, str]]:
    """The parent's side: in `folder`, a private folder it has just made (tempfile's 0700),
    the empty plan file and the key file, each made here and nowhere else (O_EXCL, no link
    followed); returns the plan and the variables that tell the child where it is and prove
    the parent made it."""
    key = secrets.token_hex(16)
    _create(folder / _KEY_FILE, key)
    plan = folder / _PLAN_FILE
    _create(plan, "")
    return plan, {PLAN_ENV: str(plan), KEY_ENV: key}


def _create(path: Path, text: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags, 0o600), "w", encoding="utf-8") as out:
        out.write(text)


def _proven(named: str, key: str) -> bool:
    """Whether `named` is a plan the parent made for this process: its folder a directory
    (not a link) of this user that nobody else may enter, its key file (not a link) holding
    `key`, the plan itself a regular file there (not a link)."""
    if not key:
        return False
    plan = Path(named)
    user = os.getuid() if hasattr(os, "getuid") else None
    try:
        folder = os.lstat(plan.parent)
        planned = os.lstat(plan)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(plan.parent / _KEY_FILE, flags), "rb") as held:
            written = held.read(256)
    except OSError:
        return False
    private = stat.S_ISDIR(folder.st_mode) and not folder.st_mode & 0o077
    owned = user is None or folder.st_uid == planned.st_uid == user
    return (
        private
        and owned
        and stat.S_ISREG(planned.st_mode)
        and hmac.compare_digest(written, key.encode())
    )


__all__ = ["KEY_ENV", "PLAN_ENV", "child_plan", "inherited_plan_line", "make_plan"]
