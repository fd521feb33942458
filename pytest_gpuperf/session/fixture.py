"""`GpuBench`, the object behind the `gpu_bench` fixture, and the result it hands back.

A test compiles a kernel, puts its inputs on the device, and calls the bench with the launch
configuration and the bytes the kernel must move. Under --gpuperf the call measures (one GPU
lock held, see gpu_lock.py) and returns the time, its interval, GB/s and efficiency; without
it the kernel is launched once, so the test's own output checks still run as a correctness
smoke test. The verdict comes later, after the test body passed (plugin/verdict.py), so a
kernel with wrong outputs never passes on time alone. Beside it: the result (bench_result.py),
what a test declares (declared.py), a kernel's A/B (kernel_pairs.py), a callable's base and
A/B (callable_base.py, callable_pairs.py). No pytest import here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from pytest_gpuperf.config.parsing import parse_cache, parse_floor
from pytest_gpuperf.config.settings import TestSettings
from pytest_gpuperf.engine.deadline import Deadline
from pytest_gpuperf.engine.launch import Launch
from pytest_gpuperf.engine.measure import MeasureSettings
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.engine.roofline import attention_flops, gemm_flops
from pytest_gpuperf.errors import ConfigError, GpuPerfError
from pytest_gpuperf.gate.judge import AbResult, Recheck, Taken
from pytest_gpuperf.gate.roofline import WorkFloors
from pytest_gpuperf.gate.static.run import expect_isa_spec  # gpuperf-static
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, DeviceInfo, Kernel
from pytest_gpuperf.runtime.devices import DeviceSpec
from pytest_gpuperf.session import callable_pairs, in_place, kernel_pairs, profile_child
from pytest_gpuperf.session.bench_result import BenchResult, progress_line
from pytest_gpuperf.session.bench_session import BenchSession
from pytest_gpuperf.session.buffers import (
    Unwritten,
    check_copy,
    poisoned_buffer,
    shaped,
    unwritten_outputs,
)
from pytest_gpuperf.session.callable_base import BaseCallable, TestBody, ab_without_timing
from pytest_gpuperf.session.declared import (
    check_setup,
    declared_bytes,
    relative_paths,
    resolve_kernel_path,
    work_of,
)
from pytest_gpuperf.session.device import OpenDevice
from pytest_gpuperf.session.kernel_pairs import Recipe
from pytest_gpuperf.session.profile_child import PROFILED_NOTE, child_plan
from pytest_gpuperf.session.stop_targets import measure_plan, measure_settings, round_deadline

SMOKE_NOTE = "not measured: launched once as a correctness check (run with --gpuperf to measure)"


class GpuBench:
    """The `gpu_bench` fixture: compile, move data, and measure kernels on the session's GPU.

    ```python
    kernel = gpu_bench.kernel("kernels/vector_add.hip", "vector_add")
    result = gpu_bench(kernel, grid=n // 256, block=256, args=(da, db, dc, n),
                       reads=(a, b), writes=(c,))
    ```
    One object per test: it refuses to measure once its test has ended.
    """

    def __init__(
        self,
        session: BenchSession,
        device: OpenDevice,
        test: TestSettings,
        *,
        test_path: Path | None = None,
        progress: Callable[[str], None] | None = None,
        heartbeat: Callable[[str], None] | None = None,
        body: TestBody | None = None,
    ) -> None:
        self._session = session
        self._body = body  # the test function and its fixture values (a callable's base)
        self._progress = progress
        self._heartbeat = heartbeat  # a line while a long measurement samples
        self._device = device
        self.test = test
        self._test_dir = test_path.parent if test_path else None
        self._results: list[BenchResult] = []
        self._taken: list[Taken] = []
        self._recipes: list[Recipe] = []
        self._owned: list[DeviceBuffer] = []
        self._empties: list[tuple[DeviceBuffer, np.dtype]] = []  # outputs made by empty()
        self._loaded: list[tuple[Kernel, Mapping[str, tuple[str, ...]]]] = []  # gpuperf-static
        self._kernel_files: list[Path] = []  # the work tree's files, in order of first use
        self._closed = False
        self._profiled = 0  # an explain pass's child: the gpu_bench calls made so far
        spec = device.match.spec
        if test.peak_bps is not None:
            spec = replace(spec, peak_bps=test.peak_bps, source=f"{spec.source}; peak_gbps marker")
        self._spec = spec

    # The FLOPs of the common shapes, for flops= (engine/roofline.py)
    gemm_flops = staticmethod(gemm_flops)
    attention_flops = staticmethod(attention_flops)

    # -- what the test can look at -------------------------------------------------------
    @property
    def measuring(self) -> bool:
        """True under --gpuperf (or --gpuperf-save): calls measure; else they launch once
        (and in an explain pass's child, which launches once under the profiler)."""
        return self._session.settings.measure and child_plan() is None

    @property
    def backend(self) -> Backend:
        return self._device.backend

    @property
    def info(self) -> DeviceInfo:
        return self._device.info

    @property
    def device(self) -> DeviceSpec:
        """The device spec efficiencies are computed against (peak bandwidth, caches)."""
        return self._spec

    @property
    def simulated(self) -> bool:
        return self._device.info.simulated

    @property
    def results(self) -> tuple[BenchResult, ...]:
        return tuple(self._results)

    @property
    def taken(self) -> tuple[Taken, ...]:
        """The measurements for the gate, with their floors and A/B results."""
        return tuple(self._taken)

    @property
    def bench_session(self) -> BenchSession:
        """The process's session (for kernel_pairs.py and callable_pairs.py)."""
        return self._session

    @property
    def pair_inputs(self) -> callable_pairs.PairInputs:
        """The test's body, kernel files and GPU lock, for callable_pairs.py."""
        return callable_pairs.PairInputs(self._body, tuple(self._kernel_files), self._device.lock)

    # -- code and data -------------------------------------------------------------------
    def kernel(
        self,
        path: str | Path,
        name: str,
        options: Sequence[str] = (),
        defines: Mapping[str, str | int] | None = None,
        expect_isa: Sequence[str] | Mapping[str, Sequence[str]] = (),
    ) -> Kernel:
        """Kernel `name` from a .hip file, found next to the test file, then under the
        rootdir, then among the kernels shipped with the plugin; compiled once per session
        for each (file, options, defines).

        `expect_isa`: instructions the kernel's code must contain, e.g.
        ["global_load_dwordx4"] or ["global_load_dword ... sc0 sc1"] (or a mapping arch ->
        list), checked by the static gate (--gpuperf-static) only."""
        self._check_open("kernel")
        # gpuperf-static: validated in every mode, recorded for the static gate
        expect = expect_isa_spec(expect_isa, f"{self.test.test_id}: gpu_bench.kernel({name!r})")
        source = resolve_kernel_path(path, test_dir=self._test_dir, rootdir=self._session.rootdir)
        if source not in self._kernel_files:
            self._kernel_files.append(source)
        module = self._session.head_module(source, tuple(options), dict(defines or {}))
        kernel = module.kernel(name)
        self._loaded.append((kernel, expect))  # gpuperf-static
        return kernel

    def kernel_files(self, rootdir: Path) -> list[str]:
        """The work tree's kernel files this test asked for (a file that did not compile
        too), relative to `rootdir` where they lie under it: what a change can slow down."""
        return relative_paths(self._kernel_files, rootdir)

    @property
    def loaded(self) -> tuple[tuple[Kernel, Mapping[str, tuple[str, ...]]], ...]:
        """Each kernel this test loaded, with its ISA expectations (for the static gate)."""
        return tuple(self._loaded)

    def kernels_of(self, name: str) -> tuple[Kernel | None, Kernel | None]:
        """(the kernel measured under `name`, the base build it was compared with, timed or
        not) for an explanation of its verdict; None where there is none (a callable, no
        base)."""
        for recipe in self._recipes:
            if recipe.label == name:
                return recipe.kernel, recipe.compared
        return None, None

    def callable_base_of(self, name: str) -> BaseCallable | None:
        """The base measurement `name` (a callable) was timed against, None if none."""
        found = (r.base_fn for r in self._recipes if r.label == name and r.base_fn is not None)
        return next(found, None)

    def callable_launches(self, name: str) -> str:
        """For measurement `name`, a callable timed against its base: which kernels one call
        of each launches, and the change ("" when not a callable pair, or nothing was seen)."""
        return callable_pairs.launches(self, self._recipes, name)

    def uncomputed(self) -> tuple[Kernel, ...]:
        """The kernels this test loaded that the device launched without computing their
        outputs (the simulated device, for a kernel it has no model of)."""
        return tuple(k for k, _ in self._loaded if not self.backend.outputs_computed(k))

    def to_device(self, array: Any) -> DeviceBuffer:
        """A device copy of a host array, freed when the test ends."""
        self._check_open("to_device")
        buffer = self.backend.to_device(np.ascontiguousarray(array))
        self._owned.append(buffer)
        return buffer

    def empty(self, shape: int | Sequence[int], dtype: Any = np.float32) -> DeviceBuffer:
        """An output buffer of `shape` x `dtype`, filled with 0xFF bytes (NaN for floats), so
        an element the kernel forgets to write fails the output check."""
        self._check_open("empty")
        buffer = poisoned_buffer(self.backend, shape, dtype, "empty")
        self._owned.append(buffer)
        self._empties.append((buffer, np.dtype(dtype)))
        return buffer

    def unwritten(self) -> list[Unwritten]:
        """The outputs made by `empty` that still hold elements of its 0xFF fill alone: after
        a failed output check, elements no launch wrote (a grid too small for the data)
        rather than elements written too often (an in-place update repeated by measuring)."""
        self.backend.synchronize()
        return unwritten_outputs(self._empties)

    def fill(self, buffer: DeviceBuffer, byte: int = 0) -> None:
        """Set every byte of `buffer` to `byte`, on the device, asynchronously: what a `setup`
        that resets an accumulator before every timed launch calls."""
        self._check_open("fill")
        self.backend.fill(buffer, byte)

    def copy(self, dst: DeviceBuffer, src: DeviceBuffer) -> None:
        """Copy `src` into `dst` (device buffers of one size) on the device, queued on the
        stream the measurement times, without waiting: what a `setup` that restores the
        input of a kernel that works in place (from a pristine buffer) calls."""
        self._check_open("copy")
        check_copy(dst, src, "gpu_bench.copy(dst, src)")
        self.backend.copy(dst, src)

    def from_device(
        self,
        buffer: DeviceBuffer,
        dtype: Any = np.float32,
        shape: int | Sequence[int] | None = None,
    ) -> np.ndarray:
        """The buffer's contents as a host array of `dtype`, `shape` (default: all of it)."""
        self._check_open("from_device")
        self.backend.synchronize()
        return shaped(buffer.download(dtype), shape, buffer, "from_device")

    def launch(
        self,
        kernel: Kernel,
        *,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Sequence[Any],
        shared_bytes: int = 0,
        wait: bool = True,
    ) -> None:
        """Launch `kernel` once, untimed, and wait for it (set-up work, a reference pass);
        `wait=False` only queues it, on the stream the measurement times: a reset kernel in
        a `setup` (which must not wait: the timed launch would find the GPU idle)."""
        self._check_open("launch")
        self._check_kernel(kernel)
        Launch.of(grid, block, args, shared_bytes=shared_bytes).enqueue(self.backend, kernel)
        if wait:
            self.backend.synchronize()

    # -- measuring -----------------------------------------------------------------------
    def __call__(
        self,
        kernel: Kernel,
        *,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Sequence[Any],
        bytes: int | None = None,
        reads: Any = None,
        writes: Any = None,
        cache: str | None = None,
        name: str | None = None,
        shared_bytes: int = 0,
        floor: float | None = None,
        setup: Callable[[], Any] | None = None,
        flops: int | None = None,
        math: str | None = None,
    ) -> BenchResult:
        """Measure `kernel` (under --gpuperf) or launch it once (otherwise).

        Declare the bytes the kernel must move: `bytes=` a count, or `reads=` / `writes=`
        arrays, device buffers or byte counts (each read once, each written once). A
        compute-bound kernel also declares its work, `flops=` (gemm_flops(m, n, k)) and
        `math=` ("bf16", ...), which puts it on the roofline (min_flops, min_roofline).
        `cache`: "cold" | "hot" | "rotate" (default: the gpuperf marker's, else
        --gpuperf-cache). `name` tells several measurements in one test apart. `floor` is this
        measurement's min_bw (it wins over the test's markers). `setup()` runs before every
        timed launch, untimed: it must only queue device work (e.g. `gpu_bench.fill(acc, 0)`
        for a kernel that accumulates into its output).
        """
        self._check_open("measure")
        self._check_kernel(kernel)
        label = self._claim(name if name is not None else kernel.name)
        bytes_moved = declared_bytes(label, bytes, reads, writes)
        mode = self._cache(cache, label)
        floor_rule = self._floor(floor, label, mode)
        work, work_floors = work_of(self.test, self._spec, label, mode, flops, math)
        check_setup(setup, label)
        launch = Launch.of(grid, block, args, shared_bytes=shared_bytes, setup=setup)
        if child_plan() is not None:  # an explain pass's child: one profiled launch a side
            sides = (kernel, self.base_of(kernel)[0])
            declared = (bytes_moved, launch.args, writes)
            go = partial(launch.enqueue, self.backend)
            profile = profile_child.profile_sides
            self._profile(label, mode, profile, sides, go, declared=declared, setup=setup)
            return self._unmeasured(label, kernel, bytes_moved, mode, PROFILED_NOTE)
        if not self.measuring:
            if setup is not None:
                setup()
            launch.enqueue(self.backend, kernel)
            self.backend.synchronize()
            return self._unmeasured(label, kernel, bytes_moved, mode, SMOKE_NOTE)
        common = {"bytes_moved": bytes_moved, "device": self._spec, "name": label}
        if work is not None:  # the simulated device times the kernel from it; GPUs ignore it
            self.backend.declare_work(kernel, work.flops, work.math)
        with self._device.lock.held(f"{self.test.test_id} [{label}]"):
            base, why, detail = self.base_of(kernel)
            settings = self._measure_settings(mode, label, bytes_moved, floor_rule[0])
            measurement, ab, paired = kernel_pairs.measure_kernel_ab(
                self, kernel, launch, (base, why, detail), settings, common
            )
        measurement = replace(measurement, work=work) if work else measurement
        paired_base = base if paired is not None else None
        recipe = Recipe(
            label, mode, common, kernel=kernel, base=paired_base, compared=base, launch=launch
        )
        self._keep(measurement, floor_rule, ab, recipe, work_floors)
        return self._record(
            BenchResult(
                label,
                kernel.name,
                bytes_moved,
                mode,
                measurement,
                kernel.resources,
                comparison=paired,
            )
        )

    def run(
        self,
        fn: Callable[[], Any],
        *,
        bytes: int | None = None,
        reads: Any = None,
        writes: Any = None,
        cache: str | None = None,
        name: str | None = None,
        floor: float | None = None,
        setup: Callable[[], Any] | None = None,
        flops: int | None = None,
        math: str | None = None,
    ) -> BenchResult:
        """Measure work that `fn()` launches on the default stream (PyTorch, Triton, CuPy);
        `flops=` and `math=` as for a kernel.

        The engine cannot see the callable's buffers, so cache="rotate" is refused. Under
        --gpuperf-compare its base is the test's own Python at the base revision, whose body
        is run again to give base's callable (session/callable_base.py); the two are timed
        in interleaved pairs, or not at all when that code is the same.
        """
        self._check_open("run")
        if not callable(fn):
            raise ConfigError(f"{self.test.test_id}: gpu_bench.run needs a callable, got {fn!r}")
        label = self._claim(name if name is not None else getattr(fn, "__name__", "callable"))
        bytes_moved = declared_bytes(label, bytes, reads, writes)
        mode = self._cache(cache, label)
        floor_rule = self._floor(floor, label, mode)
        work, work_floors = work_of(self.test, self._spec, label, mode, flops, math)
        check_setup(setup, label)
        if child_plan() is not None:  # an explain pass's child: what fn (and base's) launches
            sides = callable_pairs.profiled_sides(self, label, (fn, setup))
            profile = profile_child.profile_callables
            self._profile(label, mode, profile, sides, declared_bytes=bytes_moved)
            return self._record(BenchResult(label, label, bytes_moved, mode, note=PROFILED_NOTE))
        if not self.measuring:
            if setup is not None:
                setup()
            fn()
            self.backend.synchronize()
            return self._record(BenchResult(label, label, bytes_moved, mode, note=SMOKE_NOTE))
        watched = in_place.first_call(self.backend, reads, fn, setup)  # inputs it updates
        self._owned += watched.copies if watched is not None else []
        found = None  # its base, after one call of fn while what the test runs is recorded
        if self._session.settings.compare_ref:
            called = watched is not None and bool(watched.views)  # first_call made it
            found = callable_pairs.find_base(self, label, None if called else (fn, setup))
        ab = ab_without_timing(self.backend, found) if found is not None else None
        captures = None
        if found is not None and ab is None:  # several a side, made and first called unlocked
            captures, ab = callable_pairs.prepare(self, label, found, (fn, setup))
        restoring = in_place.with_restore(setup, watched) if captures is None else setup
        common: dict[str, Any] = {"bytes_moved": bytes_moved, "name": label, "setup": restoring}
        with self._device.lock.held(f"{self.test.test_id} [{label}]"):
            settings = self._measure_settings(mode, label, bytes_moved, floor_rule[0])
            if captures is not None:  # the pairs' limit, from now; alone, the measurement's
                settings = replace(settings, deadline=self.deadline(pairs=True))  # own
            measurement, ab, paired = callable_pairs.measure(
                self, fn, found, captures, ab, settings, common
            )
            in_place.last_call(self.backend, fn, setup, watched)
        measurement = in_place.noted(measurement, watched)
        measurement = replace(measurement, work=work) if work else measurement
        base_fn = found if paired is not None else None
        recipe = Recipe(label, mode, common, fn=fn, base_fn=base_fn)
        self._keep(measurement, floor_rule, ab, recipe, work_floors)
        return self._record(
            BenchResult(label, label, bytes_moved, mode, measurement, comparison=paired)
        )

    def head_kernel(
        self,
        path: str | Path,
        name: str,
        options: Sequence[str] = (),
        defines: Mapping[str, str | int] | None = None,
    ) -> Kernel:
        """Kernel `name` as `kernel` loads it, without recording it as this test's (what the
        base revision's test body asks for when it is run to capture its callable)."""
        source = resolve_kernel_path(path, test_dir=self._test_dir, rootdir=self._session.rootdir)
        return self._session.head_module(source, tuple(options), dict(defines or {})).kernel(name)

    def confirm(self, recheck: Recheck) -> tuple[Taken | None, str]:
        """A second round of measurement `recheck.position`, for the gate to confirm a
        regression before the test fails: the kernel (and its base build) loaded afresh as
        new modules, on fresh device copies of the buffers the call passed (its own buffers
        when it has a `setup=`, which resets those). A callable pair is captured afresh on both
        sides (session/callable_pairs.py); a callable alone is timed again as it is.
        Returns (None, why) when it cannot be measured again."""
        if not 0 <= recheck.position < len(self._recipes):
            return None, f"no measurement {recheck.position} in this test"
        recipe = self._recipes[recheck.position]
        taken = self._taken[recheck.position]
        if self._session.fault:
            return None, f"the device can no longer be used: {self._session.fault}"
        settings = self._measure_settings(
            recipe.mode, recipe.label, taken.measurement.bytes_moved, taken.floor
        )
        settings = replace(settings, confidence=recheck.confidence)
        try:
            # a callable pair's new captures, made and first called outside the lock
            fresh = callable_pairs.captures_again(self, recipe, recheck) if recipe.fn else None
            with self._device.lock.held(f"{self.test.test_id} [{recipe.label}] (confirming)"):
                if recipe.fn is not None:
                    return callable_pairs.again(self, recipe, taken, recheck, settings, fresh)
                assert recipe.kernel is not None
                return kernel_pairs.again(self, recipe, taken, recheck, settings)
        except GpuPerfError as failure:
            return None, f"measuring again failed: {failure}"

    def close(self) -> None:
        """Free the buffers this test allocated through the fixture (best effort: a device
        that already failed must not hide the test's own error behind a cleanup error).
        Afterwards the object refuses to measure: a test that kept it would go ungated."""
        self._closed = True
        with contextlib.suppress(GpuPerfError):
            self.backend.synchronize()
        for buffer in self._owned:
            if not buffer.freed:
                with contextlib.suppress(GpuPerfError):
                    buffer.free()
        self._owned.clear()

    # -- helpers -------------------------------------------------------------------------
    def _keep(
        self,
        measurement: Measurement,
        floor_rule: tuple[float | None, str],
        ab: AbResult | None,
        recipe: Recipe,
        work_floors: WorkFloors,
    ) -> None:
        """Hand a measurement to the gate with the device facts its peak check reads (the
        same for a kernel and a callable) and its roofline floors, and keep how to take it
        again at the same position, where `confirm` looks for it."""
        self._taken.append(
            Taken(
                measurement,
                *floor_rule,
                ab=ab,
                cache_bytes=max(int(self._spec.cache_bytes), int(self.info.l2_bytes)),
                device_peak_bps=self._device.match.spec.peak_bps,
                work_floors=work_floors,
            )
        )
        self._recipes.append(recipe)

    def base_of(self, kernel: Kernel) -> tuple[Kernel | None, str, str]:
        """(`kernel`'s base build, why none, detail): (None, "", "") without a compare."""
        if not self._session.settings.compare_ref:
            return None, "", ""
        return self._session.base_kernel(kernel)

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise ConfigError(
                f"{self.test.test_id}: gpu_bench.{what}(...) on the fixture of a test that has "
                "ended: measurements are gated only inside their own test; request gpu_bench "
                "in the test that measures (do not keep it in a global or a wider-scoped fixture)"
            )

    def _check_kernel(self, kernel: Any) -> None:
        if not isinstance(kernel, Kernel):
            raise ConfigError(
                f"{self.test.test_id}: gpu_bench(...) needs a kernel from "
                f"gpu_bench.kernel(path, name), got {type(kernel).__name__}"
            )

    def _claim(self, name: Any) -> str:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(
                f"{self.test.test_id}: name= must be a non-empty string, got {name!r}"
            )
        if any(result.name == name for result in self._results):
            raise ConfigError(
                f"{self.test.test_id}: a measurement named {name!r} was already taken in this "
                "test; give each gpu_bench(...) call in a test its own name=... (names key the "
                "baselines and the report rows)"
            )
        return name

    def _cache(self, cache: str | None, label: str) -> str:
        if cache is None:
            return self.test.cache
        return parse_cache(cache, f"{self.test.test_id} [{label}]: gpu_bench(cache=...)")

    def _floor(self, floor: Any, label: str, mode: str) -> tuple[float | None, str]:
        if floor is not None:
            where = f"{self.test.test_id} [{label}]: gpu_bench(floor={floor!r})"
            return parse_floor(floor, where), "floor="
        rule = self.test.floor_for(label, self._spec.key, mode)
        return (rule.value, rule.origin) if rule is not None else (None, "")

    def deadline(self, pairs: bool = False, first_calls: bool = False) -> Deadline:
        """A hard limit starting now: stop_targets.round_deadline's for `pairs`, `first_calls`."""
        return round_deadline(
            self._session, self.test, self.backend, pairs=pairs, first_calls=first_calls
        )

    def _measure_settings(
        self, cache: str, label: str, bytes_moved: int, floor: float | None
    ) -> MeasureSettings:
        # sequential rule: how long to sample follows from the decision the measurement serves
        plan = measure_plan(
            self._session, self.test, self.info, self._spec, label=label, cache=cache,
            bytes_moved=bytes_moved, floor=floor,
        )  # fmt: skip
        return measure_settings(
            self._session, self.test, plan, cache=cache, heartbeat=self._heartbeat
        )

    def _profile(
        self, label: str, mode: str, profile: Callable[..., None], *args: Any, **kw: Any
    ) -> None:
        """An explain pass's child: `profile(backend, plan, entry, ...)`, each side once."""
        plan = child_plan()
        assert plan is not None
        entry = {"position": self._profiled, "name": label, "cache": mode}
        self._profiled += 1
        with self._device.lock.held(f"{self.test.test_id} [{label}] (profiled)"):
            profile(self.backend, plan, entry, *args, **kw)

    def _unmeasured(
        self, label: str, kernel: Kernel, bytes_moved: int, mode: str, note: str
    ) -> BenchResult:
        result = BenchResult(label, kernel.name, bytes_moved, mode, None, kernel.resources, note)
        return self._record(result)

    def _record(self, result: BenchResult) -> BenchResult:
        self._results.append(result)
        if self._progress is not None and result.measurement is not None:
            self._progress(progress_line(self.test.test_id, result))
        return result


__all__ = ["BenchResult", "GpuBench"]
