"""Which repository files a `gpu_bench.run` callable's code is made of, and whether they are
the same at --gpuperf-compare's REF: the ground for "same code: not timed".

A callable's code is the user's Python (and what it reads), not a code object: the test
module and the repository modules its imports reach (followed statically, a lazy import
too), the files whose functions ran from the test's setup through its body to one call of
the callable (fixtures in conftest.py, a module loaded with `importlib`), the files it
opened for reading (a kernel source read with open(), a configuration file; session/
executed.py records both), the files defining the fixtures the test uses (a module- or
session-scoped fixture may have run in an earlier test, unseen by this one's recording) and
the kernel files it loaded through `gpu_bench.kernel`. Installed packages and this plugin
are not the repository's code. Only when every one of those files is byte-identical at REF,
and the recording saw everything, is the code the same; where the recording could not see
everything (`incomplete`), the A/B times the pair rather than trust a partial set.
"""

from __future__ import annotations

import ast
import filecmp
import hashlib
import importlib.util
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from pytest_gpuperf.record.checks import ComparedFile
from pytest_gpuperf.session.base_tree import BaseTree
from pytest_gpuperf.session.executed import Record, source_of
from pytest_gpuperf.session.provenance import run_git

# This plugin's own package: never the user's code, even when it lies in the repository.
_PLUGIN_DIR = Path(__file__).resolve().parents[1]

# How a file came to be compared (ComparedFile.ways), in the order a report names them.
IMPORTED, RAN, OPENED, FIXTURES, KERNEL = "imported", "ran", "opened", "fixtures", "kernel"
_WAY_ORDER = (IMPORTED, RAN, FIXTURES, OPENED, KERNEL)


def is_user_file(path: Path, toplevel: Path) -> bool:
    """A file of the repository's own code: under its top level, not in an installed
    package (site-packages, a virtual environment inside the repository), not this plugin."""
    try:
        resolved = path.resolve()
    except OSError:
        return False
    if not resolved.is_relative_to(toplevel) or resolved.is_relative_to(_PLUGIN_DIR):
        return False
    parts = set(resolved.relative_to(toplevel).parts)
    if parts & {"site-packages", "dist-packages", ".git"}:
        return False
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    return not any(resolved.is_relative_to(p) and p != toplevel for p in prefixes)


def module_file(module: ModuleType | None) -> Path | None:
    name = getattr(module, "__file__", None)
    return Path(name).resolve() if isinstance(name, str) and name.endswith(".py") else None


def imported_names(module: ModuleType, source: str) -> Iterator[str]:
    """Every module name an import in `source` (the text of `module`) may bind: `a`, `a.b`
    for `import a.b`; `pkg`, `pkg.x` for `from pkg import x` (x may be a submodule);
    relative imports resolved against the module's package."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    package = getattr(module, "__package__", None) or ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                for end in range(1, len(parts) + 1):
                    yield ".".join(parts[:end])
        elif isinstance(node, ast.ImportFrom):
            target = "." * node.level + (node.module or "")
            try:
                base = importlib.util.resolve_name(target, package) if node.level else target
            except (ImportError, ValueError):
                continue
            parts = base.split(".")
            for end in range(1, len(parts) + 1):
                yield ".".join(parts[:end])
            for alias in node.names:
                yield f"{base}.{alias.name}"
        elif _imports_by_name(node):
            # importlib.import_module("x") or __import__("x") with a literal: an import too
            # (a module of constants runs only once, at its first import, maybe in an
            # earlier test, so the recording of this one may never see it run)
            assert isinstance(node, ast.Call)
            literal = node.args[0]
            assert isinstance(literal, ast.Constant) and isinstance(literal.value, str)
            try:
                name = importlib.util.resolve_name(literal.value, package)
            except (ImportError, ValueError):
                continue
            parts = name.split(".")
            for end in range(1, len(parts) + 1):
                yield ".".join(parts[:end])


def _imports_by_name(node: ast.AST) -> bool:
    """A call `import_module("x")`, `importlib.import_module("x")` or `__import__("x")`."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value):
        return False
    called = node.func
    name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
    return name in ("import_module", "__import__")


def user_modules(test_module: ModuleType, toplevel: Path) -> dict[str, Path]:
    """{module name: file} of the test module and every repository module its imports reach,
    as head imported them (sys.modules)."""
    found: dict[str, Path] = {}
    pending = [test_module]
    while pending:
        module = pending.pop()
        path = module_file(module)
        if path is None or module.__name__ in found or not is_user_file(path, toplevel):
            continue
        found[module.__name__] = path
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for name in imported_names(module, source):
            imported = sys.modules.get(name)
            if isinstance(imported, ModuleType) and name not in found:
                pending.append(imported)
    return found


def fingerprint(contents: Sequence[tuple[str, bytes]]) -> str:
    """'py:<sha256 prefix>' of the files (path and bytes) a callable's code is made of."""
    digest = hashlib.sha256()
    for name, data in sorted(contents):
        digest.update(name.encode() + b"\0" + data + b"\0")
    return "py:" + digest.hexdigest()[:16]


def _fingerprint_files(files: Iterable[tuple[str, Path]]) -> str:
    """`fingerprint` of files read in chunks (a data file the test opened may be large)."""
    digest = hashlib.sha256()
    for name, path in sorted(files):
        digest.update(name.encode() + b"\0")
        with path.open("rb") as data:
            for chunk in iter(lambda: data.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(b"\0")
    return "py:" + digest.hexdigest()[:16]


@dataclass(frozen=True)
class Compared:
    """A callable's files against REF: each with how it came in, those that differ (a file
    new in head among them, "path (new)"), both fingerprints, `incomplete` why the set may
    lack a file the test ran ("" when it is complete)."""

    files: tuple[ComparedFile, ...] = ()
    changed: tuple[str, ...] = ()
    head_fingerprint: str = ""
    base_fingerprint: str = ""
    incomplete: str = ""
    changed_paths: frozenset[Path] = field(default=frozenset(), compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)


def code_files(
    test_module: ModuleType,
    toplevel: Path,
    *,
    tree_root: Path | None,
    record: Record,
    kernel_files: Sequence[Path] = (),
    fixture_files: Sequence[Path] = (),
    fixture_modules: Sequence[ModuleType] = (),
) -> dict[Path, set[str]]:
    """{file: the ways it came in} of everything a callable's code may be made of (the
    module docstring); a file of REF's own tree (base's modules, loaded for an earlier
    measurement of the test) is not the work tree's code."""
    found: dict[Path, set[str]] = {}

    def add(path: Path, way: str) -> None:
        try:
            resolved = path.resolve()
        except OSError:
            return
        if tree_root is not None and resolved.is_relative_to(tree_root):
            return
        if is_user_file(resolved, toplevel) and resolved.is_file():
            found.setdefault(resolved, set()).add(way)

    for path in user_modules(test_module, toplevel).values():
        add(path, IMPORTED)
    for module in fixture_modules:  # what a fixture's module imports (not the module itself)
        for name, path in user_modules(module, toplevel).items():
            if name != module.__name__:
                add(path, IMPORTED)
    for name in record.executed:
        if not name.startswith("<"):
            add(Path(name), RAN)
    for name in record.opened:
        add(source_of(name), OPENED)
    for path in fixture_files:
        add(path, FIXTURES)
    for path in kernel_files:
        add(path, KERNEL)
    return found


def compare(found: dict[Path, set[str]], tree: BaseTree, incomplete: str) -> Compared:
    """`found` (code_files) against REF's `tree`. A file only opened that REF lacks and git
    does not track (a cache, an output the test reads back) is not the repository's code and
    is left out; any other file REF lacks is new in head: a change (a library's release adds
    modules: Liger-Kernel 0.8 its backends/, FlagGems 5.0 its fused/FLA/, and their A/B
    against the release before had no base, 2026-11-29). The test module itself must be at
    REF (callable_base.py says so)."""
    assert tree.toplevel is not None
    toplevel = tree.toplevel
    absent = [p for p in found if tree.source_for(p)[0] is None]
    untracked = _untracked(toplevel, [p for p in absent if found[p] == {OPENED}])
    files: list[ComparedFile] = []
    heads, bases, changed, changed_paths = [], [], [], set()
    for path in sorted(found, key=lambda p: p.relative_to(toplevel).as_posix()):
        if path in untracked:
            continue
        relative = path.relative_to(toplevel).as_posix()
        ways = tuple(w for w in _WAY_ORDER if w in found[path])
        files.append(ComparedFile(relative, ways))
        base_path, _, _ = tree.source_for(path)
        heads.append((relative, path))
        if base_path is None:  # new in head: base's code never reaches it
            changed.append(f"{relative} (new)")
            changed_paths.add(path)
            continue
        bases.append((relative, base_path))
        if not filecmp.cmp(path, base_path, shallow=False):
            changed.append(relative)
            changed_paths.add(path)
    return Compared(
        files=tuple(files),
        changed=tuple(changed),
        head_fingerprint=_fingerprint_files(heads),
        base_fingerprint=_fingerprint_files(bases),
        incomplete=incomplete,
        changed_paths=frozenset(changed_paths),
    )


def _untracked(toplevel: Path, paths: Sequence[Path]) -> set[Path]:
    """Those of `paths` git does not track in the work tree (all of them without git)."""
    if not paths:
        return set()
    listed = run_git(toplevel, "ls-files", "-z", "--", *(str(p) for p in paths)) or ""
    tracked = {(toplevel / name).resolve() for name in listed.split("\0") if name}
    return {p for p in paths if p not in tracked}


__all__ = [
    "FIXTURES",
    "IMPORTED",
    "KERNEL",
    "OPENED",
    "RAN",
    "Compared",
    "code_files",
    "compare",
    "fingerprint",
    "imported_names",
    "is_user_file",
    "module_file",
    "user_modules",
]
