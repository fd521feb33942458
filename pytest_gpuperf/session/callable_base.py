"""A callable's base for --gpuperf-compare=REF: the test's own Python as it stands at REF.

`gpu_bench.run(fn)` measures whatever `fn` launches (a Triton kernel, a torch op, CuPy), so
its "code" is the user's Python: the repository files callable_code.py gathers (what the
test imports, what ran from its setup to the callable's first call, what it opened, the
files defining its fixtures, its kernel files). Its base is that Python at REF, from the tree
session/base_tree.py extracts:

- Same code: when every such file is byte-identical at REF and the recording of what ran saw
  everything (session/executed.py), nothing is timed twice. Where the recording could not see
  everything, the base is loaded and timed all the same, and the stored baseline gates too.
- Loading: head's repository modules are set aside in `sys.modules`, an import finder serves
  the repository's modules from REF's tree, and the test module is imported from there:
  base gets module objects of its own (so a `@triton.jit` function, and an autotuner, are
  other objects with their own in-memory caches; Triton's on-disk cache is keyed by the
  source, which differs). The base test function is called with head's fixture values (the
  same inputs) except for the fixtures whose code changed, made again at REF
  (base_fixtures.py), with a `gpu_bench` that captures the callable its `run(...)` of the
  same name is given instead of measuring it; that callable is then called once. Head's
  modules are put back afterwards; base's stay under private names
  (`_gpuperf_base_<commit>.<name>`).
- A path into the work tree: a module the base body loads by a path computed from head's
  rootdir (not from its own `__file__`, which lies in REF's tree), or a file it reads there,
  would run or read head's version. The loader cannot redirect an arbitrary path without
  patching open() itself, so where base's body or its callable's first call opens a work-tree
  file that differs at REF, there is no base, saying which.
- What is not compared: site-packages (a torch or triton upgrade is not a code change of the
  repository), and an import that the base callable itself makes lazily after its first call
  of a module head already imported (it finds head's module).

When the base cannot be loaded (a file new in head, an import error or sys.exit() at REF, a
base test that fails before it measures, a fixture that cannot be made at REF) the
measurement has no base, with one line saying why; the stored gate then applies (docs/ci.md,
"No green because no gate ran").
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_gpuperf.gate.judge import AbResult
from pytest_gpuperf.record.checks import NO_BASE_CALLABLE, ComparedFile
from pytest_gpuperf.session.base_fixtures import (
    BaseFixtures,
    FixtureSpec,
    NoBaseFixture,
    load_module_file,
    one_line,
    to_remake,
    user_fixtures,
)
from pytest_gpuperf.session.base_tree import BaseTree
from pytest_gpuperf.session.bench_result import BenchResult
from pytest_gpuperf.session.callable_code import (
    KERNEL,
    Compared,
    code_files,
    compare,
    is_user_file,
    module_file,
    user_modules,
)
from pytest_gpuperf.session.executed import NOT_RECORDED, Record, source_of, watching_opens

CAPTURE_NOTE = "not measured: the base revision's test body, run to capture its callable"


def _not_recorded() -> Record:
    return NOT_RECORDED


@dataclass(frozen=True)
class TestBody:
    """The test being run, as the fixture sees it (no pytest types): its function (pytest's
    `item.obj`), its fixture values as they are when the body calls `gpu_bench.run`, the
    fixtures it uses (None: pytest did not say), what it executed so far (session/
    executed.py), head's `request`, and the teardowns of fixtures made at REF, run when the
    test ends (`finish`)."""

    function: Callable[..., Any]
    arguments: Callable[[], Mapping[str, Any]]
    fixtures: Callable[[], Sequence[FixtureSpec] | None] = lambda: None
    record: Callable[[], Record] = _not_recorded
    request: Any = None
    teardowns: list[Callable[[], str]] = field(default_factory=list, compare=False)

    def finish(self) -> list[str]:
        """Tear down the fixtures made at REF, last first: the problems, one line each."""
        problems = []
        while self.teardowns:
            problem = self.teardowns.pop()()
            if problem:
                problems.append(problem)
        return problems


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
    compared: tuple[ComparedFile, ...] = ()  # the compared files, with how each came in
    incomplete: str = ""  # why the files may not be all the test ran ("": they are)
    # (head kernel, base kernel) of each gpu_bench.kernel the base body loaded from a changed
    # kernel file: the simulated device can tell them apart only by their models
    kernels: tuple[tuple[Any, Any], ...] = field(default=(), compare=False)
    # the repository modules on each side (head's as imported, base's as loaded at REF): where
    # an explanation finds the Triton kernels each side compiled (explain/code/triton_facts.py)
    head_modules: tuple[ModuleType, ...] = field(default=(), compare=False)
    base_modules: tuple[ModuleType, ...] = field(default=(), compare=False)
    # the fixture values made at REF, which base's body runs again with
    base_values: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def ab(self, **outcome: Any) -> AbResult:
        """This base's A/B result: `outcome` (a timed pair, same code, no base, one model)
        with the code's fingerprints, the files compared, those that differ at REF and why
        that set may lack a file the test ran: one place says what a callable's A/B compared."""
        return AbResult(
            **outcome,
            head_fingerprint=self.head_fingerprint,
            base_fingerprint=self.base_fingerprint,
            changed_files=self.changed,
            compared_files=self.compared,
            incomplete=self.incomplete,
        )


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
    if module is None or module_file(module) is None:
        return BaseCallable(why=NO_BASE_CALLABLE, detail="the test function has no module file")
    toplevel = tree.toplevel
    specs = body.fixtures()
    compared = _compared(module, specs, body.record(), tree, kernel_files)
    common: dict[str, Any] = {
        "head_fingerprint": compared.head_fingerprint,
        "base_fingerprint": compared.base_fingerprint,
        "files": compared.names,
        "changed": compared.changed,
        "compared": compared.files,
        "incomplete": compared.incomplete,
    }
    test_path = module_file(module)
    assert test_path is not None  # checked above
    if tree.source_for(test_path)[0] is None:  # a test new in head: nothing to run at REF
        detail = tree.source_for(test_path)[2]
        return BaseCallable(why=NO_BASE_CALLABLE, detail=detail, **common)
    if not compared.changed and not force and not compared.incomplete:
        return BaseCallable(same_code=True, **common)
    modules = user_modules(module, toplevel)
    common["head_modules"] = tuple(
        m for name in modules if isinstance(m := sys.modules.get(name), ModuleType)
    )
    capture = CapturingBench(bench, label, base_kernel)
    loading = _base_modules(tree, toplevel)
    made = BaseFixtures(
        specs or (),
        to_remake(specs or (), compared.changed_paths, toplevel),
        body.arguments(),
        tree=tree,
        request=body.request,
        swap=lambda value: capture if value is bench else value,
    )
    captured: _Captured | None = None
    why = ""
    try:
        with watching_opens() as opened:
            base_test = tree.source_for(modules[module.__name__])[0]
            assert base_test is not None  # the test module is at REF (checked above)
            captured = _capture_base(
                module.__name__, base_test, function, body, loading, made, bench, capture
            )
            if captured is not None:  # its first call: a lazy import of head's path shows
                if captured.setup is not None:
                    captured.setup()
                captured.fn()
                bench.backend.synchronize()
    except (NoBaseKernel, NoBaseFixture) as missing:
        why = str(missing)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM handled as Ctrl-C (errors.py): the run stops
        made.finish()  # after base's yield fixtures are finished
        raise
    except BaseException as failure:  # the user's code at REF (sys.exit(), a pytest.skip or
        # fail too): any error is a reason, in one line; it must not end head's test
        why = f"at {tree.ref}: {one_line(failure)}"
    if not why and captured is None:
        why = f"the test at {tree.ref} does not measure {label!r} with gpu_bench.run"
    if not why:
        why = _into_the_work_tree(opened, compared, tree)
    if why:
        torn = made.finish()  # base's yield fixtures end here: there is no base to time
        return BaseCallable(
            why=NO_BASE_CALLABLE, detail=f"{why}; {torn}" if torn else why, **common
        )
    assert captured is not None
    body.teardowns.append(made.finish)  # when the test ends: the callable is called again
    return BaseCallable(
        fn=captured.fn,
        setup=captured.setup,
        kernels=tuple(capture.kernels),
        base_modules=tuple(loading.loaded),
        base_values=made.values,
        **common,
    )


def _compared(
    module: ModuleType,
    specs: Sequence[FixtureSpec] | None,
    record: Record,
    tree: BaseTree,
    kernel_files: Sequence[Path],
) -> Compared:
    """The test's files (callable_code.py) against REF; incomplete also where pytest did
    not say which fixtures the test uses."""
    assert tree.root is not None and tree.toplevel is not None
    fixtures = user_fixtures(specs or (), tree.toplevel)
    found = code_files(
        module,
        tree.toplevel,
        tree_root=tree.root.resolve(),
        record=record,
        kernel_files=kernel_files,
        fixture_files=[f.file for f in fixtures if f.file is not None],
        fixture_modules=[m for f in fixtures if (m := f.stand_in()) is not None],
    )
    unknown = "pytest did not say which fixtures the test uses" if specs is None else ""
    return compare(found, tree, record.incomplete or unknown)


def _capture_base(
    module_name: str,
    base_test: Path,
    function: Callable[..., Any],
    body: TestBody,
    loading: _base_modules,
    made: BaseFixtures,
    bench: Any,
    capture: CapturingBench,
) -> _Captured | None:
    """The base test body run on REF's modules, with base's fixtures where they changed, up
    to the `gpu_bench.run` it hands its callable to (None: it never did)."""
    try:
        with loading:
            base_function = _base_function(module_name, base_test, function)
            values = {**body.arguments(), **made.make()}
            base_function(**_arguments(base_function, values, bench, capture))
    except _Captured as captured:
        return captured
    return None


def _into_the_work_tree(opened: set[str], compared: Compared, tree: BaseTree) -> str:
    """Why there is no base when base's body (or its callable's first call) opened a work-tree
    file that differs at REF: a module loaded by a path from head's rootdir or a fixture,
    which runs head's version ("" when it opened none)."""
    assert tree.toplevel is not None
    strays = sorted({source_of(p).resolve() for p in opened} & compared.changed_paths)
    if not strays:
        return ""
    named = strays[0].relative_to(tree.toplevel).as_posix()
    return (
        f"the test's Python at {tree.ref} opened the work tree's {named}, which differs at "
        f"{tree.ref} (a path made from head's rootdir or a fixture, not from the module's own "
        "__file__): its base would run head's version"
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
        values = {**body.arguments(), **first.base_values}
        base_function(**_arguments(base_function, values, bench, capture))

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
    except KeyboardInterrupt:
        raise
    except BaseException as failure:  # the user's code run again (sys.exit() too): a reason
        return f"{whose} test body run again: {one_line(failure)}"
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
            path = module_file(module) if isinstance(module, ModuleType) else None
            if path is not None and is_user_file(path, self.toplevel):
                self.saved[name] = sys.modules.pop(name)
        sys.meta_path.insert(0, self.finder)
        importlib.invalidate_caches()

    def __exit__(self, *exc: object) -> None:
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        for name, module in list(sys.modules.items()):
            path = module_file(module) if isinstance(module, ModuleType) else None
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
    owner: Any = load_module_file(module_name, path)
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


def ab_without_timing(backend: Any, found: BaseCallable) -> AbResult | None:
    """The A/B result of a callable that is not timed as a pair: same code, no base, or (on
    a device that times from models) changed kernel files whose models are the same, with
    the rest unchanged; None when the pair is to be timed. Each names the files compared."""
    if found.same_code:
        return found.ab(unchanged_fingerprint=found.head_fingerprint)
    if found.fn is None:
        return found.ab(no_base_why=found.why or NO_BASE_CALLABLE, detail=found.detail)
    more_than_kernels = any(f.path in found.changed and f.ways != (KERNEL,) for f in found.compared)
    models = [
        (backend.speed_model(head), backend.speed_model(base)) for head, base in found.kernels
    ]
    if (
        not more_than_kernels
        and models
        and all(head is not None and head == base for head, base in models)
    ):
        model = models[0][0]
        return found.ab(modelled_by=model.efficiency_from, modelled_efficiency=model.efficiency)
    return None


__all__ = [
    "BaseCallable",
    "CapturingBench",
    "NoBaseKernel",
    "TestBody",
    "ab_without_timing",
    "capture_head",
    "load_base",
    "recapture_base",
]
