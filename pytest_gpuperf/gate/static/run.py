"""The static gate inside a pytest session, without pytest: which clang, which kernels a test
used and how it launched them, their builds (once per process), what to compare them with,
and the facts waiting to be saved.

plugin/static_gate.py (the pytest layer) makes one `StaticRun` per process when
--gpuperf-static is on, attaches a `LaunchLog` to the simulated device, and after each test
body calls `check(test_id, uses)`; the decisions are gate/static/gate.py's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_gpuperf.errors import CompileError, ConfigError, GpuPerfError, KernelNotFound
from pytest_gpuperf.gate.static.asm import check_isa
from pytest_gpuperf.gate.static.build import StaticBuild, compile_static
from pytest_gpuperf.gate.static.clang import Clang, find_clang
from pytest_gpuperf.gate.static.compare import DEFAULT_MARGINS, StaticMargins
from pytest_gpuperf.gate.static.errors import StaticUnavailable
from pytest_gpuperf.gate.static.facts import StaticFacts, kernel_facts
from pytest_gpuperf.gate.static.gate import (
    AGAINST_REF,
    AGAINST_STORED,
    KernelCheck,
    StaticTestResult,
    error_check,
    judge_kernel,
    judge_test,
)
from pytest_gpuperf.gate.static.store import StaticEntry, StaticStore
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.occupancy import DEFAULT_BLOCK_THREADS

if TYPE_CHECKING:
    from pytest_gpuperf.runtime.base import Backend, Kernel

Shape = tuple[int, int]  # (threads per block, dynamic LDS bytes)


class RevisionSources(Protocol):
    """The base revision's kernel sources, as the session extracts them for
    --gpuperf-compare (session/base_tree.py's BaseTree): the static gate compares with them."""

    @property
    def ref(self) -> str: ...

    @property
    def commit(self) -> str: ...

    def source_for(self, path: Path) -> tuple[Path | None, str, str]: ...


ANY_ARCH = ""


def expect_isa_spec(spec: Any, where: str) -> dict[str, tuple[str, ...]]:
    """`gpu_bench.kernel(..., expect_isa=...)` normalised: a list of expectations for every
    arch, or a mapping arch -> list (ISA spellings differ between archs: the L2-bypass loads
    are `sc0 sc1` on gfx942, `glc` on gfx90a). Returns {arch or "" (any): expectations}."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {str(a): _expectations(items, f"{where}[{a!r}]") for a, items in spec.items()}
    return {ANY_ARCH: _expectations(spec, where)} if spec else {}


def _expectations(items: Any, where: str) -> tuple[str, ...]:
    if isinstance(items, str) or not isinstance(items, Iterable):
        raise ConfigError(
            f"{where}: expect_isa takes a list of instruction patterns (e.g. "
            f'["global_load_dwordx4"]) or a mapping arch -> list, got {items!r}'
        )
    found = tuple(items)
    for item in found:
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(
                f"{where}: each expect_isa pattern must be a non-empty string, got {item!r}"
            )
    return found


def expectations_for(spec: Mapping[str, tuple[str, ...]], arch: str) -> tuple[str, ...]:
    return (*spec.get(ANY_ARCH, ()), *spec.get(arch, ()))


@dataclass(frozen=True)
class KernelUse:
    """One kernel a test loaded through gpu_bench.kernel: its build (file, options,
    defines), the launch shapes it ran with (none: loaded, never launched) and the ISA it
    must contain."""

    kernel: str
    source: Path
    options: tuple[str, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    shapes: tuple[Shape, ...] = ()
    expect_isa: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def build_key(self) -> tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]:
        return (str(self.source), self.options, self.defines)


class LaunchLog:
    """The launch shapes each kernel ran with during one test, seen at the backend (so the
    launches a `gpu_bench.run` callable makes count too)."""

    def __init__(self) -> None:
        self._shapes: dict[int, list[Shape]] = {}
        self._attached: set[int] = set()

    def attach(self, backend: Backend) -> None:
        """Record every successful launch of `backend` (once per backend object)."""
        if id(backend) in self._attached:
            return
        self._attached.add(id(backend))
        launch = backend.launch

        @functools.wraps(launch)
        def recorded(kernel: Kernel, grid: Any, block: Any, args: Any, **options: Any) -> None:
            launch(kernel, grid, block, args, **options)
            self.note(kernel, block, int(options.get("shared_bytes", 0) or 0))

        backend.launch = recorded  # type: ignore[method-assign]

    def note(self, kernel: Kernel, block: Any, shared_bytes: int) -> None:
        from pytest_gpuperf.runtime.base import as_dim3

        x, y, z = as_dim3(block, "block")
        shapes = self._shapes.setdefault(id(kernel), [])
        shape = (x * y * z, shared_bytes)
        if shape not in shapes:
            shapes.append(shape)

    def shapes(self, kernel: Kernel) -> tuple[Shape, ...]:
        return tuple(self._shapes.get(id(kernel), ()))

    def clear(self) -> None:
        self._shapes.clear()


def uses_of(
    loaded: Sequence[tuple[Kernel, Mapping[str, tuple[str, ...]]]], log: LaunchLog
) -> list[KernelUse]:
    """The test's kernel uses: each kernel once (its expectations merged), in load order."""
    uses: dict[tuple[Any, ...], KernelUse] = {}
    for kernel, expect in loaded:
        module = kernel.module
        if module.source_path is None:
            continue  # not compiled from a file through gpu_bench.kernel
        key = (kernel.name, str(module.source_path), module.options, module.defines)
        previous = uses.get(key)
        merged = dict(previous.expect_isa) if previous else {}
        for arch, items in expect.items():
            merged[arch] = tuple(dict.fromkeys((*merged.get(arch, ()), *items)))
        uses[key] = KernelUse(
            kernel.name,
            Path(module.source_path),
            tuple(module.options),
            tuple(module.defines),
            log.shapes(kernel),
            merged,
        )
    return list(uses.values())


def entry_names(uses: Sequence[KernelUse]) -> list[tuple[KernelUse, Shape | None, str]]:
    """(use, launch shape or None when never launched, entry name) for each entry of a test.
    The name is the kernel's; a test that uses one kernel several ways (two files, other
    defines or options, other launch shapes) gets the differing part added, in brackets."""
    rows = [(use, shape) for use in uses for shape in (use.shapes or (None,))]
    by_kernel: dict[str, list[tuple[KernelUse, Shape | None]]] = {}
    for use, shape in rows:
        by_kernel.setdefault(use.kernel, []).append((use, shape))
    named = []
    for use, shape in rows:
        same = by_kernel[use.kernel]
        parts = []
        if len({u.source.name for u, _ in same}) > 1:
            parts.append(use.source.name)
        if len({(u.source, u.options, u.defines) for u, _ in same}) > 1:
            parts += [f"{k}={v}" for k, v in use.defines] + list(use.options)
        if len({s for _, s in same}) > 1:
            parts.append(_shape_text(shape))
        named.append((use, shape, f"{use.kernel} [{' '.join(parts)}]" if parts else use.kernel))
    return named


def _shape_text(shape: Shape | None) -> str:
    if shape is None:
        return "not launched"
    threads, lds = shape
    return f"block={threads}" + (f" lds={lds}" if lds else "")


@dataclass
class StaticRun:
    """Per-process state of the static gate (one per pytest process, xdist workers too)."""

    archs: tuple[str, ...]
    rootdir: Path
    baseline_dir: Path
    clang: str | None = None
    saving: bool = False
    strict: bool = False
    compare_ref: str | None = None
    base_tree: Callable[[], RevisionSources] | None = None
    commit: Callable[[], str] = lambda: ""
    update_command: Callable[[str], str] = lambda test_id: ""
    margins: StaticMargins = DEFAULT_MARGINS
    timeout_s: float = 300.0
    _clangs: dict[str, Clang] | None = None
    _unavailable: StaticUnavailable | None = None
    _builds: dict[tuple[Any, ...], StaticBuild | CompileError] = field(default_factory=dict)
    _pending: dict[str, dict[tuple[str, str], StaticEntry]] = field(default_factory=dict)
    _store: StaticStore | None = None

    # -- the toolchain -------------------------------------------------------------------
    def toolchains(self) -> dict[str, Clang]:
        """The clang for each arch, found once. Raises `UnknownArch` (a usage error: clang
        does not know the arch) or `StaticUnavailable` (no usable clang; remembered)."""
        if self._unavailable is not None:
            raise self._unavailable
        if self._clangs is None:
            found = {}
            for arch in self.archs:
                try:
                    found[arch] = find_clang(self.clang, arch)
                except StaticUnavailable as missing:
                    self._unavailable = missing
                    raise
            self._clangs = found
        return self._clangs

    @property
    def store(self) -> StaticStore:
        if self._store is None:
            self._store = StaticStore(self.baseline_dir)
        return self._store

    def check_files(self) -> None:
        """Load each arch's stored facts once, so a broken file stops the session up front
        with its file:line (BaselineError)."""
        if self.compare_ref is None or self.saving:
            for arch in self.archs:
                self.store.load(arch)

    # -- one test ------------------------------------------------------------------------
    def check(self, test_id: str, uses: Sequence[KernelUse]) -> StaticTestResult:
        """Build and judge every kernel entry of a test on every arch; with saving on, keep
        the entries of a test that does not fail for `flush_saves`."""
        clangs = self.toolchains()
        named = entry_names(uses)
        checks = [
            self._check_one(test_id, arch, clang, use, shape, name)
            for arch, clang in clangs.items()
            for use, shape, name in named
        ]
        result = judge_test(
            test_id, checks, saving=self.saving, update_command=self.update_command(test_id)
        )
        for check in result.checks:
            if check.saved:
                self._stage(test_id, check)
        return result

    def _check_one(
        self, test_id: str, arch: str, clang: Clang, use: KernelUse, shape: Shape | None, name: str
    ) -> KernelCheck:
        source = self._relative(use.source)
        expect = expectations_for(use.expect_isa, arch)
        threads, lds = shape if shape is not None else (DEFAULT_BLOCK_THREADS, 0)
        try:
            build = self._build(use.source, use.options, use.defines, arch, clang)
            after = kernel_facts(build, use.kernel, block_threads=threads, dynamic_lds_bytes=lds)
            missing = check_isa(build.asm, use.kernel, expect) if expect else []
        except (CompileError, KernelNotFound) as failure:
            return error_check(name, use.kernel, arch, source, str(failure), expect_isa=expect)
        before, against, label, no_base = self._before(test_id, name, arch, clang, use, after)
        return judge_kernel(
            name,
            after,
            before,
            source=source,
            against=against,
            against_label=label,
            no_base=no_base,
            margins=self.margins,
            expect_isa=expect,
            missing_isa=missing,
            strict=self.strict,
            saving=self.saving,
            launched=shape is not None,
        )

    def _before(
        self,
        test_id: str,
        name: str,
        arch: str,
        clang: Clang,
        use: KernelUse,
        after: StaticFacts,
    ) -> tuple[StaticFacts | None, str, str, str]:
        """(the facts to compare with or None, "stored" | "ref", their file or revision,
        why there are none)."""
        if self.compare_ref and self.base_tree is not None:
            tree = self.base_tree()
            label = f"{tree.ref} ({tree.commit[:12]})" if tree.commit else tree.ref
            base, _, why = tree.source_for(use.source)
            if base is None:
                return None, AGAINST_REF, label, why
            try:
                build = self._build(base, use.options, use.defines, arch, clang)
                facts = kernel_facts(
                    build,
                    use.kernel,
                    block_threads=after.block_threads,
                    dynamic_lds_bytes=after.dynamic_lds_bytes,
                )
            except KernelNotFound:
                why = f"no kernel {use.kernel!r} in that file at {tree.ref}"
                return None, AGAINST_REF, label, why
            except CompileError as failure:
                first = str(failure).splitlines()[0]
                return None, AGAINST_REF, label, f"the base version does not compile: {first}"
            return facts, AGAINST_REF, label, ""
        stored = self.store.load(arch)
        label = self._relative(stored.path)
        entry = stored.get(test_id, name)
        if entry is None:
            return None, AGAINST_STORED, label, f"no stored facts for this entry in {label}"
        return entry.facts, AGAINST_STORED, label, ""

    def _build(
        self,
        source: Path,
        options: tuple[str, ...],
        defines: tuple[tuple[str, str], ...],
        arch: str,
        clang: Clang,
    ) -> StaticBuild:
        """One build per (file, options, defines, arch) per process; a failure is kept and
        raised again (the disk cache makes the build shared across processes)."""
        key = (str(source), options, defines, arch)
        if key not in self._builds:
            try:
                self._builds[key] = compile_static(
                    source,
                    arch,
                    defines=dict(defines),
                    options=options,
                    clang=clang,
                    timeout_s=self.timeout_s,
                )
            except CompileError as failure:
                self._builds[key] = failure
        built = self._builds[key]
        if isinstance(built, CompileError):
            raise built
        return built

    def _relative(self, path: Path) -> str:
        """The path from the rootdir; a kernel shipped with the plugin (outside it) as
        "pytest-gpuperf:kernels/<file>"."""
        resolved = Path(path).resolve()
        for base, prefix in ((self.rootdir.resolve(), ""), (KERNELS_DIR.parent, "pytest-gpuperf:")):
            if resolved.is_relative_to(base):
                return prefix + resolved.relative_to(base).as_posix()
        return str(path)

    # -- saving --------------------------------------------------------------------------
    def _stage(self, test_id: str, check: KernelCheck) -> None:
        assert check.facts is not None
        entry = StaticEntry(
            test_id=test_id,
            name=check.name,
            facts=check.facts,
            source=check.source,
            origin="clang",
            when=_utc_now(),
            commit=self.commit(),
        )
        self.stage(entry)

    def stage_loaded(
        self,
        test_id: str,
        loaded: Sequence[tuple[Kernel, Mapping[str, tuple[str, ...]]]],
        log: LaunchLog,
        *,
        arch: str,
        compiler: str,
    ) -> int:
        """A save on a real AMD GPU: keep the facts of the code objects the HIP runtime
        actually loaded for the test's kernels (origin "loaded"), under the same entry names
        a static run gives them. Kernels whose binary is not an AMD code object (a CUBIN)
        are left out. Returns how many entries were staged."""
        from pytest_gpuperf.gate.static.facts import loaded_kernel_facts
        from pytest_gpuperf.runtime.amd_codeobject import CodeObjectError

        kernels = {
            (k.name, str(k.module.source_path), tuple(k.module.options), tuple(k.module.defines)): k
            for k, _ in loaded
        }
        staged = 0
        for use, shape, name in entry_names(uses_of(loaded, log)):
            kernel = kernels[(use.kernel, str(use.source), use.options, use.defines)]
            threads, lds = shape if shape is not None else (DEFAULT_BLOCK_THREADS, 0)
            try:
                facts = loaded_kernel_facts(
                    kernel.module.binary,
                    use.kernel,
                    arch=arch,
                    compiler=compiler,
                    block_threads=threads,
                    dynamic_lds_bytes=lds,
                )
            except (CodeObjectError, KernelNotFound):
                continue
            self.stage(
                StaticEntry(
                    test_id=test_id,
                    name=name,
                    facts=facts,
                    source=self._relative(use.source),
                    origin="loaded",
                    when=_utc_now(),
                    commit=self.commit(),
                )
            )
            staged += 1
        return staged

    def stage(self, entry: StaticEntry) -> None:
        """Keep `entry` for `flush_saves` (the GPU save path stages loaded code objects'
        facts here too)."""
        self._pending.setdefault(entry.facts.arch, {})[entry.key] = entry

    def flush_saves(self, store: StaticStore | None = None) -> tuple[list[str], list[GpuPerfError]]:
        """Write the staged entries: one locked merge per arch file. Returns a line per file
        written and the errors of the files that could not be (each left as it was)."""
        written: list[str] = []
        problems: list[GpuPerfError] = []
        target = store or self.store
        for arch, entries in sorted(self._pending.items()):
            try:
                path = target.save(arch, entries.values())
            except GpuPerfError as problem:
                problems.append(problem)
                continue
            count = len(entries)
            written.append(
                f"saved the static facts of {count} kernel entr{'ies' if count != 1 else 'y'} "
                f"to {self._relative(path)}"
            )
        self._pending.clear()
        return written, problems


def _utc_now() -> str:
    from pytest_gpuperf.baseline.model import utc_now

    return utc_now()


__all__ = [
    "KernelUse",
    "LaunchLog",
    "StaticRun",
    "entry_names",
    "expect_isa_spec",
    "expectations_for",
    "uses_of",
]
