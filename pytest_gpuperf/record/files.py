"""Where the report files of a run may go, asked before any test runs, and the one writer
every report file goes through.

A report replaces the file it is given (through a temporary and a rename, so it is whole or
absent). That is right for a report and wrong for anything else: given a baseline file it
would replace the baselines with JSON, given a character device (`/dev/null`, `/dev/full`, a
terminal) it would replace the device node with a regular file when run as root. So a report
path must be a regular file or a new name in an existing folder, and not a file this run keeps
for itself (a baseline file, a GPU lock, a compiled kernel); anything else stops the run before
the first test. The new file gets the mode the umask gives (`touch` would), an existing one
keeps its own.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import GpuPerfError

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
}


class ReportPathError(GpuPerfError):
    """A report path that must not be written (a device, a FIFO, a baseline file...)."""


@dataclass(frozen=True)
class Guarded:
    """The folders whose files belong to the run itself: no report may replace one."""

    baseline_dir: Path
    lock_dir: Path
    cache_dir: Path

    @classmethod
    def of(cls, settings: Any) -> Guarded:
        from pytest_gpuperf.baseline.shared_lock import lock_dir
        from pytest_gpuperf.runtime.compile import cache_dir

        return cls(Path(settings.baseline_dir), lock_dir(), cache_dir())

    def owner(self, path: Path) -> str:
        """What `path` is to the run ("a baseline file ..."), or "" when it is none of these."""
        real = _real(path)
        if (real.suffix == ".toml" and _inside(real, self.baseline_dir)) or self._linked(path):
            return (
                f"is a baseline file of this run (in {self.baseline_dir}); a report there "
                "would replace the baselines"
            )
        if _inside(real, self.lock_dir):
            return f"is in the GPU lock folder {self.lock_dir} ($GPUPERF_LOCK_DIR)"
        if _inside(real, self.cache_dir):
            return f"is in the kernel cache {self.cache_dir} ($GPUPERF_CACHE_DIR)"
        return stored_content(path)

    def _linked(self, path: Path) -> bool:
        """Whether `path` is a hard link to a baseline file (another name, the same file)."""
        try:
            status = os.stat(path)
        except OSError:
            return False
        if not (stat.S_ISREG(status.st_mode) and status.st_nlink > 1):
            return False
        with contextlib.suppress(OSError):
            for baseline in self.baseline_dir.rglob("*.toml"):
                if os.path.samestat(status, os.stat(baseline)):
                    return True
        return False


def stored_content(path: Path) -> str:
    """'is a baseline file (by its content) ...' when the file at `path` is one a store keeps,
    wherever it is (another checkout's, a --gpuperf-baseline-dir, a copy): a folder rule
    alone let `publish -o` and `compare --markdown` replace one outside ./baselines."""
    from pytest_gpuperf.baseline.toml_check import store_file_kind

    kind = store_file_kind(path)
    if not kind:
        return ""
    return f"is {kind} (by its content); an output there would replace it"


def output_problem(
    path: Path, *, baseline_dirs: Sequence[Path] = (), inputs: Sequence[Path] = ()
) -> str:
    """Why a `gpuperf` command (bisect, publish, compare) must not or cannot write its file
    at `path` ("" when it may), asked before it starts its work: the run's own rules (not a
    baseline file of `baseline_dirs` or of ./baselines, nor one anywhere by its content, the
    GPU lock folder, the kernel cache, a device, a FIFO, a folder) and not one of the
    command's `inputs` (the output would replace what it was made from)."""
    from pytest_gpuperf.baseline.shared_lock import lock_dir
    from pytest_gpuperf.runtime.compile import cache_dir

    for folder in dict.fromkeys([*baseline_dirs, Path("baselines")]):
        problem = Guarded(folder, lock_dir(), cache_dir()).owner(path)
        if problem:
            return problem.replace("a baseline file of this run", "a baseline file")
    return _input(path, inputs) or _problem(path)


def write_output(option: str, path: Path, text: str) -> None:
    """`write_report` for an offline command's file: a path it refuses or a write that fails
    (a full disk) is a ConfigError naming the option, and nothing is left behind."""
    from pytest_gpuperf.errors import ConfigError

    try:
        write_report(path, text)
    except ReportPathError as refused:
        raise ConfigError(f"{option} {refused}") from None
    except OSError as failed:
        raise ConfigError(
            f"{option} {path}: cannot be written: {failed.strerror or failed}; nothing was written"
        ) from None


def report_paths(settings: Any) -> list[tuple[str, Path]]:
    """(option, path) of every report file the settings ask for."""
    named = [
        ("--gpuperf-json", settings.json_path),
        ("--gpuperf-benchmark-json", settings.benchmark_json_path),
        ("--gpuperf-markdown", settings.markdown_path),
    ]
    return [(option, Path(path)) for option, path in named if path is not None]


def unwritable(
    settings: Any,
    env: Mapping[str, str] | None = None,
    *,
    others: Sequence[tuple[str, Path]] = (),
    guarded: Guarded | None = None,
) -> str:
    """The first report path that must not or cannot be written, and why ("" when all can).

    Checked at the start of a session: a path found unwritable after an hour of measuring
    would otherwise cost the summary, and the files after it. `others` are report files
    written by someone else (pytest's --junitxml): they must not be one of ours, nor a
    file this run keeps."""
    environment = os.environ if env is None else env
    ours = report_paths(settings)
    if not (ours or others):
        return ""
    summary = environment.get("GITHUB_STEP_SUMMARY") if settings.markdown_path is not None else None
    return first_unwritable(ours, guarded or Guarded.of(settings), others=others, summary=summary)


def first_unwritable(
    ours: Sequence[tuple[str, Path]],
    guards: Guarded,
    *,
    others: Sequence[tuple[str, Path]] = (),
    inputs: Sequence[Path] = (),
    summary: str | None = None,
) -> str:
    """The rules of `unwritable` for any command's report files: `ours` are written by our
    writer, `others` by someone else; none may be a file the run keeps (`guards`), one of
    the command's `inputs`, or another report's file; `summary` ($GITHUB_STEP_SUMMARY, where
    the Markdown is appended) must be a regular file or a new name, and none of those."""
    seen: dict[Path, str] = {}
    for option, path in [*ours, *others]:
        problem = guards.owner(path) or _input(path, inputs)
        if not problem:
            problem = _problem(path) if (option, path) in ours else _opened_in_place(path)
        real = _real(path)
        if not problem and real in seen:
            problem = f"is also {seen[real]}'s file; give each report its own path"
        if problem:
            return f"{option}={path}: {problem}; choose another path"
        seen[real] = option
    if summary:
        problem = (
            guards.owner(Path(summary))
            or _input(Path(summary), inputs)
            or _problem(Path(summary), append=True)
        )
        if problem:
            return (
                f"$GITHUB_STEP_SUMMARY={summary}: {problem}; the Markdown summary is appended "
                "there (unset the variable, or fix the path)"
            )
    return ""


def _input(path: Path, inputs: Sequence[Path]) -> str:
    """'is an input of this command ...' when `path` names one of `inputs` (or a hard link
    to one)."""
    real = _real(path)
    try:
        status = os.stat(path)
    except OSError:
        status = None
    for given in inputs:
        same = _real(given) == real
        if not same and status is not None:
            with contextlib.suppress(OSError):
                same = os.path.samestat(status, os.stat(given))
        if same:
            return f"is one of the inputs ({given}); the output would replace it"
    return ""


def not_regular(path: Path) -> str:
    """'is a character device' when something other than a regular file is at `path` (a
    link is judged by what it points to); "" for a regular file or nothing there."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # nothing there (the writer then says why)
        if os.path.islink(path):
            return f"is a symbolic link to {os.readlink(path)!r}, which does not exist"
        return ""
    except OSError as problem:
        return f"cannot be checked ({problem.strerror})"
    if stat.S_ISREG(mode):
        return ""
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return f"is {kind}, not a regular file; a report replaces the file it is given"


def _opened_in_place(path: Path) -> str:
    """pytest's --junitxml is opened where it is, not replaced: a device (/dev/null) takes it;
    a FIFO would block the end of the run until a reader came (SIGTERM was then the only way
    out), a folder or a socket fails it after the tests."""
    if _system_file(path):
        return ""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return _problem(path)  # nothing there: can it be made?
    if stat.S_ISREG(mode) or stat.S_ISCHR(mode):
        return "" if os.access(path, os.W_OK) else "is not writable"
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return f"is {kind}, not a regular file; pytest's writer would block on it or fail there"


def _problem(path: Path, *, append: bool = False) -> str:
    odd = _system_file(path) or not_regular(path)
    if odd:
        return odd
    if path.exists():
        if not os.access(path, os.W_OK):
            return "is not writable"
        return ""
    if append:
        return "does not exist" if not path.parent.is_dir() else _dir_problem(path.parent)
    parent = path.parent
    while not parent.exists():
        if parent == parent.parent:
            return "has no existing parent directory"
        parent = parent.parent
    return _dir_problem(parent)


def _system_file(path: Path) -> str:
    """/dev and /proc name devices and a process's open files (/dev/stdout is
    /proc/self/fd/1, which under pytest's capture may even be a regular temporary file):
    never a report's place, whatever they point to now. /dev/shm is a tmpfs for files."""
    for name in {Path(os.path.abspath(path)), _real(path)}:
        if name.parts[1:3] == ("dev", "shm"):  # a tmpfs for files: judged as any folder
            continue
        if name.parts[1:2] in (("dev",), ("proc",)):
            return (
                f"names a device or a process's open file ({name.parts[0]}{name.parts[1]}); "
                "a report needs a regular file"
            )
    return ""


def _dir_problem(directory: Path) -> str:
    if not directory.is_dir():
        return f"{directory} is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"its directory {directory} is not writable"
    return ""


def write_report(path: str | os.PathLike[str], text: str) -> Path:
    """Write a report file whole or not at all: a temporary beside it, then a rename over it.

    A link is written through to its target (the link stays). The target is checked again
    here, not only at the session's start: the rename must never replace a device, a FIFO or
    a folder. A new file gets the umask's mode (0644 under the usual 022), an existing one
    keeps its mode. Ctrl-C or a full disk mid-write leaves the old file and no temporary."""
    target = _real(Path(path))
    odd = _system_file(Path(path)) or not_regular(target)
    if odd:
        raise ReportPathError(f"{path}: {odd}; nothing was written")
    from pytest_gpuperf.baseline.file_write import write_whole

    target.parent.mkdir(parents=True, exist_ok=True)
    write_whole(target, text)
    return Path(path)


def append_report(path: str | os.PathLike[str], text: str) -> Path:
    """Append `text` to a regular file (made when absent, with the umask's mode), never to a
    FIFO, a device or a folder: a FIFO as $GITHUB_STEP_SUMMARY hung the merge in open().
    The file is opened without waiting (a FIFO without a reader is refused by the open
    itself) and judged by what was opened, so nothing swapped in after a check is written."""
    odd = _system_file(Path(path)) or not_regular(Path(path))
    if odd:
        raise ReportPathError(f"{path}: {odd}; nothing was appended")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o666)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise ReportPathError(f"{path}: is {kind}, not a regular file; nothing was appended")
        handle.write(text)
    return Path(path)


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(real: Path, folder: Path) -> bool:
    return real.is_relative_to(_real(folder))


__all__ = [
    "Guarded",
    "ReportPathError",
    "append_report",
    "first_unwritable",
    "not_regular",
    "output_problem",
    "report_paths",
    "stored_content",
    "unwritable",
    "write_output",
    "write_report",
]
