"""One pytest process's gpuperf state: the device (opened once, lazily), compiled modules, the
base revision's tree for A/B, the baseline store and the saves waiting to be written.

The pytest layer (plugin/state.py) holds a `BenchSession` and calls it from hooks; deciding
is the gate's job (gate/judge.py), opening a device session/device.py's, git facts
provenance.py's, keeping and writing the saves pending_saves.py's. Nothing here imports
pytest, and importing this module loads neither NumPy nor a backend.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf.config.settings import Settings, TestSettings
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.errors import CompileError, GpuPerfError, KernelNotFound
from pytest_gpuperf.record.checks import NO_BASE_COMPILE, NO_BASE_KERNEL
from pytest_gpuperf.record.verdict import Acceptance, Verdict
from pytest_gpuperf.session.pending_saves import PendingSaves, SaveOutcome
from pytest_gpuperf.session.provenance import GitFacts, git_facts

if TYPE_CHECKING:
    from pytest_gpuperf.baseline import BaselineStore
    from pytest_gpuperf.gate.judge import Remeasure, Taken
    from pytest_gpuperf.gate.pairing import PairPolicy
    from pytest_gpuperf.gate.suite import SuiteBudget
    from pytest_gpuperf.runtime.base import Backend, Kernel, Module
    from pytest_gpuperf.session.base_tree import BaseTree
    from pytest_gpuperf.session.device import OpenDevice
    from pytest_gpuperf.session.gpu_probe import ProbeReport

ModuleKey = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Judgement:
    """What the gate made of one test's measurements."""

    verdicts: tuple[tuple[Measurement, Verdict], ...]


class BenchSession:
    """Per-process state of a gpuperf session (one per pytest process, xdist workers too)."""

    def __init__(
        self,
        settings: Settings,
        *,
        rootdir: Path,
        worker: int | None = None,
        opener: Callable[..., Backend] | None = None,
        probe: ProbeReport | None = None,
        probe_file: tuple[Path, int | None] | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.notify = notify  # where a wait for the GPU lock is said (None: standard error)
        self.rootdir = rootdir
        self.worker = worker
        self._opener = opener
        self.probe = probe  # the degraded-GPU probe's findings (pytest-xdist's controller ran it)
        self._probe_file = probe_file  # where a worker finds them (session/probe_handoff.py)
        self._device: OpenDevice | None = None
        self._failure: GpuPerfError | None = None
        self._modules: dict[ModuleKey, Module] = {}
        self._compile_failures: dict[ModuleKey, CompileError] = {}
        self._hung = False
        self._store: BaselineStore | None = None
        self._git: GitFacts | None = None
        self._base_tree: BaseTree | None = None
        self._accept: tuple[tuple[Acceptance, ...], tuple[str, ...]] | None = None
        self._head_tree: BaseTree | None = None
        self._saves = PendingSaves()  # --gpuperf-save's entries, written when the run ends
        # The tests of the run that measure (known at collection; plugin/collect.py sets it): they
        # share the run's false-alarm budget.
        self.suite_checks = 1

    @property
    def suite(self) -> SuiteBudget:
        """The run's false-alarm budget (--gpuperf-suite-alarm over the measuring tests)."""
        from pytest_gpuperf.gate.suite import SuiteBudget

        return SuiteBudget(self.settings.suite_alarm, max(self.suite_checks, 1))

    @property
    def pair_policy(self) -> PairPolicy:
        """How this run's A/B pairs sample: the gate's rule at --gpuperf-compare-threshold,
        with the run's loads, buffer sets and code spread, and the budgets the library's
        Device.compare gives a pair too (gate/pairing.py)."""
        from pytest_gpuperf.gate.pairing import PairPolicy

        return PairPolicy(
            threshold=self.settings.compare_threshold,
            code_spread=self.settings.compare_code_spread,
            loads=self.settings.compare_loads,
            buffer_sets=self.settings.compare_buffer_sets,
        )

    # -- the device ----------------------------------------------------------------------
    @property
    def opened(self) -> bool:
        return self._device is not None or self._failure is not None

    def device(self) -> OpenDevice:
        """The device, opened on first use; the same error again if that failed."""
        if self._device is not None:
            return self._device
        if self._failure is not None:
            raise self._failure
        from pytest_gpuperf.session.device import open_device

        if self.settings.measure:
            # The statistics load scipy.special on first use; here, not inside the first
            # measurement, which holds the GPU lock (on the H100 SciPy's import took 1.7 s of
            # lock time, when the statistics still imported scipy.stats), and before a worker
            # waits for the probe, which runs meanwhile.
            from pytest_gpuperf.engine.distributions import load_special

            load_special()
        try:
            if self._probe_file is not None:  # the controller probes while this worker starts
                from pytest_gpuperf.session.probe_handoff import wait_for_probe

                self.probe = wait_for_probe(*self._probe_file)
                self._probe_file = None
            refused = self.probe.refused if self.probe is not None else ()
            if self._opener is None:
                self._device = open_device(
                    self.settings, worker=self.worker, refused=refused, notify=self.notify
                )
            else:
                self._device = open_device(
                    self.settings,
                    worker=self.worker,
                    opener=self._opener,
                    refused=refused,
                    notify=self.notify,
                )
        except GpuPerfError as failure:
            self._failure = failure
            raise
        backend = self._device.backend
        backend.kernel_timeout_s = self.settings.watchdog_s
        backend.compile_timeout_s = self.settings.compile_timeout_s
        return self._device

    @property
    def fault(self) -> str:
        """Why the opened device can no longer be used ("" while it can)."""
        return self._device.backend.fault if self._device is not None else ""

    @property
    def hung(self) -> bool:
        """A kernel is still running that will not finish (it outlives close())."""
        return self._hung or (self._device is not None and self._device.backend.hung)

    def module(
        self, path: Path, options: tuple[str, ...], defines: Mapping[str, str | int]
    ) -> Module:
        """The compiled module for (file, options, defines), compiled once per session."""
        pairs = tuple(sorted((k, str(v)) for k, v in defines.items()))
        key = (str(path), options, pairs)
        if key in self._compile_failures:
            raise self._compile_failures[key]  # a failed (or timed out) compile is not retried
        if key not in self._modules:
            backend = self.device().backend
            try:
                module = backend.compile(path, options=options, defines=dict(defines))
                # the simulated device compiles nothing: a clang checks the source (the
                # static gate compiles it with clang itself, and reports its errors its way)
                if backend.info.simulated and not self.settings.static:
                    from pytest_gpuperf.gate.static.syntax import check_module

                    check_module(module, path, options, defines)
            except CompileError as failure:
                self._compile_failures[key] = failure
                raise
            module.source_path, module.options, module.defines = path, options, pairs
            self._modules[key] = module
        return self._modules[key]

    def compiled_sources(self) -> list[Path]:
        """The kernel source files this process compiled (a save's note names them)."""
        return sorted({Path(key[0]) for key in self._modules})

    def head_module(
        self, path: Path, options: tuple[str, ...], defines: Mapping[str, str | int]
    ) -> Module:
        """The module the test measures for the work tree's `path`: compiled from the work
        tree, or under --gpuperf-head from that revision's version (standing in for `path`)."""
        built = self.head_source(path)
        try:
            module = self.module(built, options, defines)
        except CompileError as failure:
            root = self.head_tree().root
            if built == path or root is None:
                raise
            # name the file as git does (REV:path), not by the extracted tree's cache path
            shown = str(failure).replace(f"{root}{os.sep}", f"{self.settings.head_ref}:")
            raise CompileError(shown) from None
        if built != path:
            module.origin_path = path
        return module

    def reload(self, kernel: Kernel) -> Kernel:
        """`kernel` loaded again, as a module of its own at a new place: what a confirming
        round measures, so that where the first load landed does not decide twice. The
        compile comes from the on-disk cache; nothing is kept for reuse."""
        module = kernel.module
        if module.source_path is None:
            raise GpuPerfError(f"kernel {kernel.name!r} was not compiled through gpu_bench.kernel")
        backend = self.device().backend
        fresh = backend.compile(
            module.source_path, options=module.options, defines=dict(module.defines)
        )
        fresh.source_path, fresh.options, fresh.defines = (
            module.source_path,
            module.options,
            module.defines,
        )
        fresh.origin_path = module.origin_path
        return fresh.kernel(kernel.name)

    # -- A/B: the base revision ----------------------------------------------------------
    def base_tree(self) -> BaseTree:
        """--gpuperf-compare's tree, extracted once per session (and cached across runs)."""
        if self._base_tree is None:
            from pytest_gpuperf.runtime.compile import cache_dir
            from pytest_gpuperf.session.base_tree import materialise

            ref = self.settings.compare_ref or "HEAD"
            self._base_tree = materialise(ref, self.rootdir, cache_dir() / "trees")
        return self._base_tree

    def accept_rules(self) -> tuple[tuple[Acceptance, ...], tuple[str, ...]]:
        """(the run's accept rules, warnings about refused trailers): --gpuperf-accept's and,
        under --gpuperf-compare, the Gpuperf-Accept trailers of the commits base..HEAD
        (gate/accept.py). Read once per process."""
        if self._accept is None:
            from pytest_gpuperf.gate.accept import trailer_rules
            from pytest_gpuperf.session.base_tree import accept_trailers

            rules = self.settings.accept
            warnings: tuple[str, ...] = ()
            if self.settings.compare_ref and (self.settings.measure or self.settings.static):
                commit = self.base_tree().commit
                head = self.head_tree().commit if self.settings.head_ref else "HEAD"
                found, warnings = trailer_rules(accept_trailers(self.rootdir, commit, head))
                rules = rules + found
            self._accept = (rules, warnings)
        return self._accept

    def head_tree(self) -> BaseTree:
        """--gpuperf-head's tree, extracted as the base tree is (and sharing its cache)."""
        if self._head_tree is None:
            from pytest_gpuperf.runtime.compile import cache_dir
            from pytest_gpuperf.session.base_tree import materialise

            ref = self.settings.head_ref or "HEAD"
            self._head_tree = materialise(ref, self.rootdir, cache_dir() / "trees")
        return self._head_tree

    def check_head_ref(self) -> None:
        """Resolve --gpuperf-head's REF once, at the start: measuring the work tree's kernels
        when REF's were asked for would answer another question than the one asked."""
        if not self.settings.head_ref:
            return
        from pytest_gpuperf.session.base_tree import RefUnresolved

        tree = self.head_tree()
        if tree.root is None:
            raise RefUnresolved(tree.problem.replace("--gpuperf-compare", "--gpuperf-head"))

    def head_source(self, path: Path) -> Path:
        """The file the head side compiles for the work tree's `path`: `path` itself, or under
        --gpuperf-head its version at that revision (CompileError when it has none there, as
        a compiler names a missing file)."""
        if not self.settings.head_ref:
            return path
        tree = self.head_tree()
        source, _, detail = tree.source_for(path)
        if source is None:
            raise CompileError(f"no source at --gpuperf-head: {detail}", source_path=str(path))
        return source

    def check_compare_ref(self) -> None:
        """Resolve --gpuperf-compare's REF once, at the start: `RefUnresolved` when git cannot
        (a typo, a ref missing from a shallow clone), unless --gpuperf-compare-missing-ok lets
        every comparison say "no base" instead. A gate that silently compares with nothing
        is switched off without anyone noticing."""
        if not self.settings.compare_ref:
            return
        from pytest_gpuperf.session.base_tree import RefUnresolved

        tree = self.base_tree()
        if not tree.commit and not self.settings.compare_missing_ok:
            raise RefUnresolved(
                f"{tree.problem}. To run on without a base (every comparison 'no base'), add "
                "--gpuperf-compare-missing-ok"
            )

    def base_kernel(self, kernel: Kernel) -> tuple[Kernel | None, str, str]:
        """(the base revision's build of `kernel`, "", "") or (None, NO_BASE_*, why)."""
        module = kernel.module
        if module.source_path is None:
            return None, NO_BASE_COMPILE, "the kernel was not compiled through gpu_bench.kernel"
        # A head built from --gpuperf-head's tree stands in for its work-tree file.
        source, why, detail = self.base_tree().source_for(module.origin_path or module.source_path)
        if source is None:
            return None, why, detail
        try:
            base_module = self.module(source, module.options, dict(module.defines))
            base_module.origin_path = module.origin_path or module.source_path
            return base_module.kernel(kernel.name), "", ""
        except KernelNotFound:
            tree = self.base_tree()
            return None, NO_BASE_KERNEL, f"no kernel {kernel.name!r} in that file at {tree.ref}"
        except CompileError as failure:
            return None, NO_BASE_COMPILE, f"the base version does not compile: {failure}"

    # -- baselines -----------------------------------------------------------------------
    def baselines(self) -> BaselineStore:
        """The BaselineStore of --gpuperf-baseline-dir (imported only when measuring)."""
        if self._store is None:
            from pytest_gpuperf.baseline import BaselineStore

            self._store = BaselineStore(self.settings.baseline_dir, shown_from=self.rootdir)
        return self._store

    def check_baseline_files(self) -> None:
        """Load every baseline file once, so a broken one stops the session up front with its
        file:line instead of failing each test (BaselineError); when saving, check that the
        directory can be written at all."""
        store = self.baselines()
        store.check_directory()
        for key in store.device_keys():
            store.load(key)
        if self.settings.save:
            store.check_writable()

    def recorded_costs(self) -> tuple[str | None, dict[str, float]]:
        """(the baseline file's device key, each test's recorded cost: shard.recorded_costs)
        for --gpuperf-shard; (None, {}) when no device opens, and the shards then balance by
        test count."""
        from pytest_gpuperf.gate.judge import SIMULATED_SUFFIX
        from pytest_gpuperf.session.shard import recorded_costs

        try:
            device = self.device()
        except GpuPerfError:
            return None, {}
        key = device.match.spec.key + (SIMULATED_SUFFIX if device.simulated else "")
        return key, recorded_costs(list(self.baselines().load(key).entries.values()))

    def git(self) -> GitFacts:
        if self._git is None:
            self._git = git_facts(self.rootdir, ignore=[self.settings.baseline_dir])
        return self._git

    def update_command(self, *targets: str) -> str:
        """The exact command that re-records these tests' baselines with these settings,
        every word quoted for a shell (a test id, a device key or a folder is whatever the
        user wrote: pasted raw, `$(...)` in one ran)."""
        parts = ["pytest", "--gpuperf", "--gpuperf-save", *self.settings.command_options()]
        if self.settings.baseline_dir != self.rootdir / "baselines":
            parts.append(
                f"--gpuperf-baseline-dir={relative(self.settings.baseline_dir, self.rootdir)}"
            )
        return shlex.join([*parts, *targets])

    # -- judging and saving ----------------------------------------------------------------
    def judge(
        self,
        test: TestSettings,
        taken: Sequence[Taken],
        *,
        unjudged: bool = False,
        remeasure: Remeasure | None = None,
    ) -> Judgement:
        """The gate's verdicts on one test's measurements; entries to save are kept and
        written once per file when the session ends (`flush_saves`). `remeasure` measures a
        regressed check again (the fixture's `confirm`)."""
        from pytest_gpuperf.gate.judge import JudgeContext, judge
        from pytest_gpuperf.gate.policy import prior_run_spread

        settings = self.settings
        device = self._device
        info = device.info if device is not None else None
        sim_spread = (
            getattr(getattr(device.backend, "settings", None), "run_spread", None)
            if (device is not None and device.simulated)
            else None
        )
        sim_settings = getattr(device.backend, "settings", None) if device is not None else None
        board_spread = getattr(sim_settings, "gpu_spread", 0.0) if sim_spread is not None else 0.0
        context = JudgeContext(
            tolerance=test.tolerance,
            strict=test.strict,
            saving=settings.save,
            compare_ref=settings.compare_ref,
            compare_commit=self.base_tree().commit if settings.compare_ref else "",
            compare_threshold=settings.compare_threshold,
            compare_forced=settings.compare_force,
            compare_code_spread=settings.compare_code_spread,
            history_length=settings.history_length,
            update_command=self.update_command(test.test_id),
            commit=self.git().stamp if settings.save else "",
            runtime_version=info.runtime_version if info else "",
            driver_version=info.driver_version if info else "",
            unjudged=unjudged,
            suite=self.suite,
            accept=self.accept_rules()[0],
            host=socket.gethostname() if settings.save else "",
            sim_board_spread=float(board_spread),
        )
        priors = {
            position: prior_run_spread(
                item.measurement.backend,
                item.measurement.time_s,
                item.measurement.cache,
                float(sim_spread) if sim_spread is not None else None,
            )
            for position, item in enumerate(taken)
        }
        taken = [self._with_probe(item) for item in taken]
        judged = judge(
            test.test_id,
            taken,
            self.baselines(),
            context,
            prior_spread_for=priors,
            remeasure=remeasure,
        )
        judged = self._saves.keep(test.test_id, judged)
        return Judgement(tuple((item.measurement, item.verdict) for item in judged))

    def _with_probe(self, item: Taken) -> Taken:
        """The measurement marked with what the probe found on its GPU (degraded or not)."""
        gpu = item.measurement.gpu
        found = self.probe.for_index(gpu.index) if (self.probe and gpu is not None) else None
        if gpu is None or found is None or found.ratio is None:
            return item
        marked = replace(gpu, degraded=found.degraded, probe_ratio=found.ratio)
        return replace(item, measurement=replace(item.measurement, gpu=marked))

    def gpu_facts(self) -> dict[str, object] | None:
        """The opened GPU's identity and this process's GPU-lock account, for the reports."""
        if self._device is None:
            return None
        info, lock = self._device.info, self._device.lock
        return {
            "backend": info.backend,
            "index": info.index,
            "pci_bus_id": info.pci_bus_id,
            "uuid": info.uuid,
            "lock_held_s": lock.held_s,
            "lock_waited_s": lock.waited_s,
            "lock_holds": lock.holds,
        }

    def flush_saves(self, *, interrupted: bool = False) -> SaveOutcome:
        """Write the saves of this session: one locked merge per baseline file. A file that
        cannot be written is left as it was and named with the reason; Ctrl-C stops at once
        (the files not yet written are not saved). `interrupted`: the run was stopped before
        this, so nothing is written (the measurements of a cut-short run are not recorded)."""
        shown = partial(relative, base=self.rootdir)
        return self._saves.flush(self.baselines, shown, interrupted=interrupted)

    def close(self) -> None:
        """Release the device; never raises (it runs while pytest writes its summary, which
        a cleanup error on a faulted device must not lose)."""
        if self._device is not None:
            from pytest_gpuperf.engine import measure

            backend = self._device.backend
            self._hung = self._hung or backend.hung
            with contextlib.suppress(GpuPerfError):
                measure.release(backend)
            with contextlib.suppress(GpuPerfError):
                backend.close()
            self._device = None
        self._modules.clear()


def relative(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def common_dir(files: Sequence[str]) -> str:
    return os.path.commonpath([os.path.dirname(f) or "." for f in files]) or "."


__all__ = ["BenchSession", "Judgement", "SaveOutcome", "common_dir", "relative"]
