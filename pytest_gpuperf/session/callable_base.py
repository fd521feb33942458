"""A callable's base for --gpuperf-compare=REF: the test's own Python as it stands at REF.

`gpu_bench.run(fn)` measures whatever `fn` launches (a Triton kernel, a torch op, CuPy), so
its "code" is the user's Python: the test module and the project modules it imports (files
of the repository, not site-packages, not this plugin). Its base is that Python at REF, from
the tree session/base_tree.py extracts:

- Which files: the test module's imports, followed through every repository module they
  reach (an `import` anywhere in a file counts, a lazy one too), as head imported them. The
  kernel files the test loaded through `gpu_bench.kernel` count as well.
- Same code: when every such file is byte-identical at REF, nothing is timed twice.
- Loading: head's repository modules are set aside in `sys.modules`, an import finder serves
  the repository's modules from REF's tree, and the test module is imported from there:
  base gets module objects of its own (so a `@triton.jit` function, and an autotuner, are
  other objects with their own in-memory caches; Triton's on-disk cache is keyed by the
  source, which differs). The base test function is called with head's fixture values (the
  same inputs), with a `gpu_bench` that captures the callable its `run(...)` of the same name
  is given instead of measuring it. Head's modules are put back afterwards; base's stay
  under private names (`_gpuperf_base_<commit>.<name>`).
- What is not compared: the fixtures (inputs come from head's conftest), site-packages (a
  torch or triton upgrade is not a code change of the repository), and an import that the
  base callable itself makes lazily while it is timed (it finds head's module).

When the base cannot be loaded (a file new in head, an import error at REF, a base test that
fails before it measures) the measurement has no base, with one line saying why; the stored
gate then applies (docs/ci.md, "No green because no gate ran").
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_gpuperf.gate.judge import AbResult
from pytest_gpuperf.record.checks import NO_BASE_CALLABLE
from pytest_gpuperf.session.base_tree import BaseTree
from pytest_gpuperf.session.bench_result import BenchResult

# This plugin's own package: never the user's code, even when it lies in the repository.
_PLUGIN_DIR = Path(__file__).resolve().parents[1]
CAPTURE_NOTE = "not measured: the base revision's test body, run to capture its callable"


@dataclass(frozen=True)
class TestBody:
    """The test being run, as the fixture sees it (no pytest types): its function (pytest's
    `item.obj`) and its fixture values as they are when the body calls `gpu_bench.run`."""

    function: Callable[..., Any]
    arguments: Callable[[], Mapping[str, Any]]


@dataclass(frozen=True)
class BaseCallable:
    """What REF made of one `gpu_bench.run` measurement: the base callable (and its setup),
    or same code, or why there is none (`why` NO_BASE_CALLABLE, `detail` one line)."""

    fn: Callable[[], Any] | None = None
    setup: Callable[[], Any] | None = None
    same_code: bool = False
    head_fingerprint: str = ""
    base_fingerprint: str = ""
    why: str = ""
    detail: str = ""
    files: tuple[str, ...] = ()  # the compared files, relative to the repository
    changed: tuple[str, ...] = ()  # those that differ at REF
    # (head kernel, base kernel) of each gpu_bench.kernel the base body loaded from a changed
    # kernel file: the simulated device can tell them apart only by their models
    kernels: tuple[tuple[Any, Any], ...] = field(default=(), compare=False)
    # the repository modules on each side (head's as imported, base's as loaded at REF): where
    # an explanation finds the Triton kernels each side compiled (explain/code/triton_facts.py)
    head_modules: tuple[ModuleType, ...] = field(default=(), compare=False)
    base_modules: tuple[ModuleType, ...] = field(default=(), compare=False)


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
    if parts & {"site-packages", "dist-packages"}:
        return False
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    return not any(resolved.is_relative_to(p) and p != toplevel for p in prefixes)


def _module_file(module: ModuleType | None) -> Path | None:
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


def user_modules(test_module: ModuleType, toplevel: Path) -> dict[str, Path]:
    """{module name: file} of the test module and every repository module its imports reach,
    as head imported them (sys.modules)."""
    found: dict[str, Path] = {}
    pending = [test_module]
    while pending:
        module = pending.pop()
        path = _module_file(module)
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


class _Captured(Exception):
    """Raised by the capturing bench to stop the base body at the measurement wanted."""

    def __init__(self, fn: Callable[[], Any], setup: Callable[[], Any] | None) -> None:
        super().__init__("captured")
        self.fn, self.setup = fn, setup


class NoBaseKernel(Exception):
    """A gpu_bench.kernel in the base body that has no base build (its words: why)."""


class CapturingBench:
    """The `gpu_bench` the base revision's test body gets: everything is the real bench's
    (buffers, the backend), except that `run(fn, name=...)` for the measurement wanted hands
    `fn` back instead of measuring it, another `run` or `gpu_bench(kernel, ...)` launches once,
    and `kernel(...)` gives the base revision's build of a changed kernel file."""

    def __init__(self, bench: Any, label: str, base_kernel: Callable[[Any], Any]) -> None:
        self._bench = bench
        self._label = label
        self._base_kernel = base_kernel
        self.kernels: list[tuple[Any, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bench, name)

    @property
    def measuring(self) -> bool:
        return True  # the base body takes the branch head's took

    def kernel(
        self,
        path: Any,
        name: str,
        options: Sequence[str] = (),
        defines: Mapping[str, Any] | None = None,
        expect_isa: Any = (),
    ) -> Any:
        head = self._bench.head_kernel(path, name, options, defines)
        base = self._base_kernel(head)
        if base is not head:
            self.kernels.append((head, base))
        return base

    def run(self, fn: Callable[[], Any], *, name: str | None = None, **rest: Any) -> BenchResult:
        label = name if name is not None else getattr(fn, "__name__", "callable")
        if label == self._label:
            raise _Captured(fn, rest.get("setup"))
        setup = rest.get("setup")
        if setup is not None:
            setup()
        fn()
        return BenchResult(label, label, 0, "cold", note=CAPTURE_NOTE)

    def __call__(self, kernel: Any, **call: Any) -> BenchResult:
        self._bench.launch(
            kernel,
            grid=call["grid"],
            block=call["block"],
            args=call["args"],
            shared_bytes=call.get("shared_bytes", 0),
        )
        name = call.get("name") or kernel.name
        return BenchResult(name, kernel.name, 0, "cold", note=CAPTURE_NOTE)


class _TreeFinder(importlib.abc.MetaPathFinder):
    """Serves the repository's modules from the base revision's tree: a top-level name from
    the tree's copies of the search-path entries that lie in the repository, a submodule from
    its (base) package's path. Anything else (the standard library, site-packages) is left
    to the usual finders."""

    def __init__(self, roots: Sequence[str], tree_root: Path) -> None:
        self.roots = list(roots)
        self.tree_root = tree_root

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is None:
            return importlib.machinery.PathFinder.find_spec(fullname, self.roots)
        inside = [p for p in path if Path(p).resolve().is_relative_to(self.tree_root)]
        return importlib.machinery.PathFinder.find_spec(fullname, inside) if inside else None


def load_base(
    body: TestBody,
    tree: BaseTree,
    label: str,
    bench: Any,
    kernel_files: Sequence[Path],
    base_kernel: Callable[[Any], Any],
    *,
    force: bool = False,
) -> BaseCallable:
    """The base of measurement `label` of the test `body` at `tree`'s revision (see the module
    docstring). `bench` is the real gpu_bench, `kernel_files` the kernel files the test
    loaded, `base_kernel(head_kernel)` the base build of a kernel (or raises NoBaseKernel);
    `force` (--gpuperf-compare-force) loads the base of the same code too, to be timed."""
    if tree.root is None or tree.toplevel is None:
        return BaseCallable(why=NO_BASE_CALLABLE, detail=tree.problem)
    function = getattr(body.function, "__func__", body.function)
    module = sys.modules.get(getattr(function, "__module__", ""))
    if module is None or _module_file(module) is None:
        return BaseCallable(why=NO_BASE_CALLABLE, detail="the test function has no module file")
    toplevel = tree.toplevel
    modules = user_modules(module, toplevel)
    files = {path for path in modules.values()}
    files.update(p.resolve() for p in kernel_files if is_user_file(p, toplevel))
    head_contents, base_contents, changed = [], [], []
    for path in sorted(files):
        relative = path.relative_to(toplevel).as_posix()
        base_path, _, detail = tree.source_for(path)
        if base_path is None:
            return BaseCallable(why=NO_BASE_CALLABLE, detail=detail, files=(relative,))
        head_bytes, base_bytes = path.read_bytes(), base_path.read_bytes()
        head_contents.append((relative, head_bytes))
        base_contents.append((relative, base_bytes))
        if head_bytes != base_bytes:
            changed.append(relative)
    names = tuple(name for name, _ in head_contents)
    head_print, base_print = fingerprint(head_contents), fingerprint(base_contents)
    if not changed and not force:
        return BaseCallable(
            same_code=True, head_fingerprint=head_print, base_fingerprint=base_print, files=names
        )
    common: dict[str, Any] = {
        "head_fingerprint": head_print,
        "base_fingerprint": base_print,
        "files": names,
        "changed": tuple(changed),
    }
    capture = CapturingBench(bench, label, base_kernel)
    common["head_modules"] = tuple(
        m for name in modules if isinstance(m := sys.modules.get(name), ModuleType)
    )
    loading = _base_modules(tree, toplevel)
    try:
        with loading:
            test_file = modules[module.__name__]
            base_test = tree.source_for(test_file)[0]
            assert base_test is not None  # every file was found above
            base_function = _base_function(module.__name__, base_test, function)
            arguments = _arguments(base_function, body.arguments(), bench, capture)
            base_function(**arguments)
    except _Captured as captured:
        return BaseCallable(
            fn=captured.fn,
            setup=captured.setup,
            kernels=tuple(capture.kernels),
            base_modules=tuple(loading.loaded),
            **common,
        )
    except NoBaseKernel as missing:
        return BaseCallable(why=NO_BASE_CALLABLE, detail=str(missing), **common)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as failure:  # the user's code at REF (a pytest.skip or fail too):
        # any error is a reason, in one line; it must not end head's test
        return BaseCallable(
            why=NO_BASE_CALLABLE, detail=f"at {tree.ref}: {_one_line(failure)}", **common
        )
    return BaseCallable(
        why=NO_BASE_CALLABLE,
        detail=f"the test at {tree.ref} does not measure {label!r} with gpu_bench.run",
        **common,
    )


def capture_head(
    body: TestBody, label: str, bench: Any
) -> tuple[Callable[[], Any], Callable[[], Any] | None] | str:
    """Head's test body run again, with a capturing gpu_bench, to the `run(...)` of
    measurement `label`: (its callable, its setup), made anew on buffers of their own, as a
    base capture's are (head's modules are the live ones, its kernels head's builds); or why
    not, in one line. A callable's A/B pairs several such captures a side, so that where
    each capture's buffers landed is measured as drift rather than read as a code change."""
    capture = CapturingBench(bench, label, lambda kernel: kernel)

    def run() -> None:
        body.function(**_arguments(body.function, body.arguments(), bench, capture))

    return _capture_again(run, label, "head's")


def recapture_base(
    first: BaseCallable,
    body: TestBody,
    label: str,
    bench: Any,
    base_kernel: Callable[[Any], Any],
) -> tuple[Callable[[], Any], Callable[[], Any] | None] | str:
    """Base's test body run again on the modules `first` loaded at REF (put back under their
    own names while it runs, so its imports find base's): (its callable, its setup), made
    anew on buffers of their own; or why not, in one line. The same modules, as head's
    captures run on head's live ones: a Triton kernel is not compiled (nor autotuned) again
    for each capture, and what a capture draws anew is its buffers."""
    function = getattr(body.function, "__func__", body.function)
    name = getattr(function, "__module__", "")
    modules = {m.__name__: m for m in first.base_modules}
    if name not in modules:
        return "the base test module is not loaded"
    capture = CapturingBench(bench, label, base_kernel)

    def run() -> None:
        owner: Any = modules[name]
        *outer, last = function.__qualname__.split(".")
        for part in outer:
            owner = getattr(owner, part)
        if isinstance(owner, type):
            owner = owner()
        base_function = getattr(owner, last)
        base_function(**_arguments(base_function, body.arguments(), bench, capture))

    saved = {n: sys.modules.get(n) for n in modules}
    sys.modules.update(modules)
    try:
        return _capture_again(run, label, "base's")
    finally:
        for n, module in saved.items():
            if module is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = module


def _capture_again(
    run: Callable[[], None], label: str, whose: str
) -> tuple[Callable[[], Any], Callable[[], Any] | None] | str:
    """A test body run again with a capturing gpu_bench: (the callable it handed to
    `gpu_bench.run` as `label`, its setup), or why not, in one line."""
    try:
        run()
    except _Captured as captured:
        return captured.fn, captured.setup
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as failure:  # the user's code run again: any error is a reason
        return f"{whose} test body run again: {_one_line(failure)}"
    return f"{whose} test body run again does not measure {label!r} with gpu_bench.run"


class _base_modules:
    """While active: head's repository modules set aside, the base tree's served instead.
    On exit base's modules move to private names and head's come back, whatever happened."""

    def __init__(self, tree: BaseTree, toplevel: Path) -> None:
        assert tree.root is not None
        self.tree_root = tree.root.resolve()
        self.prefix = f"_gpuperf_base_{tree.commit[:12]}."
        roots = []
        for entry in sys.path:
            place = Path(entry or ".").resolve()
            if place.is_relative_to(toplevel) and is_user_file(place, toplevel):
                roots.append(str(self.tree_root / place.relative_to(toplevel)))
        self.finder = _TreeFinder(roots, self.tree_root)
        self.toplevel = toplevel
        self.saved: dict[str, ModuleType] = {}
        self.loaded: list[ModuleType] = []  # base's modules, once moved to private names

    def __enter__(self) -> None:
        for name, module in list(sys.modules.items()):
            path = _module_file(module) if isinstance(module, ModuleType) else None
            if path is not None and is_user_file(path, self.toplevel):
                self.saved[name] = sys.modules.pop(name)
        sys.meta_path.insert(0, self.finder)
        importlib.invalidate_caches()

    def __exit__(self, *exc: object) -> None:
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        for name, module in list(sys.modules.items()):
            path = _module_file(module) if isinstance(module, ModuleType) else None
            if path is not None and path.is_relative_to(self.tree_root):
                del sys.modules[name]
                sys.modules[self.prefix + name] = module
                self.loaded.append(module)
        sys.modules.update(self.saved)


def _base_function(
    module_name: str, path: Path, head_function: Callable[..., Any]
) -> Callable[..., Any]:
    """The base module's version of the test function (a method: of a fresh instance of the
    base class, as pytest makes one per test). The test module is loaded from its file, under
    head's name, whatever import mode pytest used for head's."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path.name} at the base")
    base_module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = base_module
    try:
        spec.loader.exec_module(base_module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    owner: Any = base_module
    *outer, name = head_function.__qualname__.split(".")
    for part in outer:
        owner = getattr(owner, part)
    if isinstance(owner, type):
        owner = owner()
    found = getattr(owner, name, None)
    if not callable(found):
        raise LookupError(f"no test function {head_function.__qualname__} in {module_name}")
    return found


def _arguments(
    function: Callable[..., Any], values: Mapping[str, Any], bench: Any, capture: Any
) -> dict[str, Any]:
    """Head's fixture values for the base function's parameters, its gpu_bench replaced by
    the capturing one; a parameter head's test has no value for is a reason, not a guess."""
    import inspect

    arguments = {}
    for name in inspect.signature(function).parameters:
        if name not in values:
            raise LookupError(f"its test function asks for {name!r}, which head's test does not")
        value = values[name]
        arguments[name] = capture if value is bench else value
    return arguments


def _one_line(failure: BaseException) -> str:
    text = " ".join(str(failure).split())
    return f"{type(failure).__name__}: {text}" if text else type(failure).__name__


def launched_names(
    backend: Any, fn: Callable[[], Any], setup: Callable[[], Any] | None = None
) -> tuple[str, ...]:
    """The kernels one call of `fn` launches through `backend` (its setup's left out), in
    order: what a callable's failure lists head against base. Launches that do not pass
    through the plugin's backend (Triton's, PyTorch's, CuPy's own on a real GPU) are not
    seen here; the result is then empty."""
    if setup is not None:
        setup()
    names: list[str] = []
    original = backend.launch

    def recording(kernel: Any, *args: Any, **options: Any) -> None:
        names.append(str(getattr(kernel, "name", kernel)))
        original(kernel, *args, **options)

    backend.launch = recording  # this instance only, for this one call
    try:
        fn()
        backend.synchronize()
    finally:
        del backend.launch
    return tuple(names)


def launch_change(head: Sequence[str], base: Sequence[str]) -> str:
    """'launches per call: vector_add 1 -> 2' (each kernel whose count changed), or
    'the same launches per call (vector_add x1)'; "" when neither side was seen to launch."""
    if not head and not base:
        return ""
    kernels = list(dict.fromkeys([*base, *head]))
    moved = [
        f"{name} {list(base).count(name)} -> {list(head).count(name)}"
        for name in kernels
        if list(base).count(name) != list(head).count(name)
    ]
    if moved:
        return "launches per call: " + ", ".join(moved)
    same = ", ".join(f"{name} x{list(head).count(name)}" for name in kernels)
    return f"the same launches per call ({same})"


def ab_without_timing(backend: Any, found: BaseCallable) -> AbResult | None:
    """The A/B result of a callable that is not timed as a pair: same code, no base, or (on
    a device that times from models) changed kernel files whose models are the same, with
    the Python unchanged; None when the pair is to be timed."""
    if found.same_code:
        return AbResult(unchanged_fingerprint=found.head_fingerprint)
    if found.fn is None:
        return AbResult(no_base_why=found.why or NO_BASE_CALLABLE, detail=found.detail)
    python_changed = any(name.endswith(".py") for name in found.changed)
    models = [
        (backend.speed_model(head), backend.speed_model(base)) for head, base in found.kernels
    ]
    if (
        not python_changed
        and models
        and all(head is not None and head == base for head, base in models)
    ):
        model = models[0][0]
        return AbResult(
            modelled_by=model.efficiency_from,
            modelled_efficiency=model.efficiency,
            head_fingerprint=found.head_fingerprint,
            base_fingerprint=found.base_fingerprint,
        )
    return None


__all__ = [
    "BaseCallable",
    "CapturingBench",
    "NoBaseKernel",
    "TestBody",
    "ab_without_timing",
    "capture_head",
    "fingerprint",
    "imported_names",
    "is_user_file",
    "launch_change",
    "launched_names",
    "load_base",
    "recapture_base",
    "user_modules",
]
