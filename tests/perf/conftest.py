"""The perf suite's shared parts: per-device floors, the opt-in size sweep, and `catalog_bench`,
which runs a kernel of pytest_gpuperf.session.catalog through `gpu_bench` and checks its outputs.

Floors. A test names its kernel and working set with `@pytest.mark.perf_floor(kernel,
working_set_bytes)`; at collection this conftest turns that into the plugin's
`@pytest.mark.min_bw(x)` for the device the session measures (`floor_for`). A floor is the
fraction of the datasheet peak the kernel must reach when streaming from HBM, lowered for
small working sets by a fixed per-launch allowance (a kernel is granted its launch allowance
on top of moving its bytes at the floor's bandwidth); where that leaves less than NO_FLOOR_BELOW
the size is launch-bound and gets no floor at all.

Sweep. Sizes beyond the default ones carry `@pytest.mark.sweep` and are deselected unless the
`-m` expression names `sweep` (`pytest --gpuperf -m sweep tests/perf`) or GPUPERF_SWEEP=1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.session.catalog import (
    KERNELS,
    KernelCase,
    check_on_device,
    device_args,
)
from pytest_gpuperf.session.device_data import Mismatch
from pytest_gpuperf.simulate.shipped_kernels import wrong_elements

# -- floors ----------------------------------------------------------------------------------
#
# h100-sxm: measured. The whole suite, sweep included, ran on the project's H100 SXM (3.35 TB/s
#   datasheet peak) on 2026-11-23 (`GPUPERF_SWEEP=1 pytest --gpuperf --gpuperf-backend=cuda
#   tests/perf`); tests/perf/measured/h100-sxm.json keeps every row. A kernel's HBM floor is
#   the lowest efficiency it reached at a working set of 200 MB or more (four times the 50 MB
#   L2; cold, hot and rotate alike) less 0.06, rounded down to 0.01: about 7% under it, the
#   run-to-run spread reported for MI300X (below), where the H100's own is under 1% at those
#   sizes (the margin covers another board, clocks, driver). scale ran only at 64 MB and takes
#   copy's floor (the same traffic). tests/unit/test_perf_floors.py checks every floor against
#   every measured row: at least 7% headroom everywhere, at most 20% at HBM-bound sizes.
# mi300x: reported, not measured (no AMD GPU is available to the project). The only figures
#   are those of the blog post "Making memory bound kernels go brr on a MI300X" (rocprof, 32M
#   fp32 vector add): 0.7185 plain, 0.8270 with the L2 bypass, "+/- 7%" between runs.
#   Reading +/-7% as a 95% range (sigma 3.5%, as the simulated device does), 4 sigma below
#   the plain figure is 0.7185 x 0.87 = 0.625; less a 0.025 safety margin -> 0.60, which
#   every streaming kernel must reach (the blog's plain kernel is the least efficient MI300X
#   figure there is). The bypass kernel:
#   0.827 x 0.87 = 0.72, less the margin -> 0.70. On the simulated MI300X (same figures, 2 us
#   launch overhead, +/-7% drift) these hold at 4 sigma of its drift at the default sizes.
FLOORS: dict[str, dict[str, float]] = {
    "vector_add": {"h100-sxm": 0.74, "mi300x": 0.60},  # H100 lowest 0.807 (32M, hot)
    "vector_add_nt": {"h100-sxm": 0.74, "mi300x": 0.60},  # 0.804 (32M, hot)
    "vector_add_bypass": {"h100-sxm": 0.74, "mi300x": 0.70},  # 0.806 (32M, hot)
    "vector_add_vec4": {"h100-sxm": 0.82, "mi300x": 0.60},  # 0.888 (32M, hot)
    "copy": {"h100-sxm": 0.65, "mi300x": 0.60},  # 0.715 (256 MiB buffers)
    "scale": {"h100-sxm": 0.65, "mi300x": 0.60},  # copy's; 0.697 at 64 MB
    "triad": {"h100-sxm": 0.76, "mi300x": 0.60},  # 0.828 (256 MiB)
    "copy_vec4": {"h100-sxm": 0.84, "mi300x": 0.60},  # 0.909 (2 GiB)
    "triad_vec4": {"h100-sxm": 0.85, "mi300x": 0.60},  # 0.919 (2 GiB)
    "dot": {"h100-sxm": 0.82, "mi300x": 0.60},  # 0.881 (256 MiB)
    "rmsnorm": {"h100-sxm": 0.60, "mi300x": 0.60},  # 0.668 (32768 x 4096)
    "silu_and_mul": {"h100-sxm": 0.85, "mi300x": 0.60},  # 0.920 (131072 x 2048)
    "rope": {"h100-sxm": 0.82, "mi300x": 0.60},  # 0.887 (524288 x 8 x 128)
}
# Every launch costs device time besides its bytes (ramp-up, tail; the simulated device models
# 2 us). A floor grants the kernel this much on top of moving its bytes at the floor's
# bandwidth, so mid-sized working sets are held to what a latency + bandwidth model allows
# instead of getting no floor at all: 1.25x the kernel's launch-bound time on the H100 (4 KiB
# working sets), rounded up to 0.5 us. One launch of a streaming kernel took 4.5-4.9 us; dot
# (a block reduction, then a second launch) and rmsnorm (two passes over each row and a block
# reduction) took 7.8-8.0 us.
LAUNCH_ALLOWANCE_S = 6e-6
LAUNCH_ALLOWANCES_S = {"dot": 10e-6, "rmsnorm": 10e-6}
NO_FLOOR_BELOW = 0.05  # a floor this low says nothing: the size is launch-bound
SWEEP_ENV = "GPUPERF_SWEEP"

# The instructions a variant exists for, asserted by the static gate (--gpuperf-static) in
# each kernel's own gfx942 code: the L2 bypass is system-scope loads and stores (sc0 sc1),
# the nontemporal variant's accesses carry nt, the float4 variant moves 128 bits at a time.
EXPECT_ISA: dict[str, dict[str, tuple[str, ...]]] = {
    "vector_add_bypass": {
        "gfx942": ("global_load_dword ... sc0 sc1", "global_store_dword ... sc0 sc1")
    },
    "vector_add_nt": {"gfx942": ("global_load_dword ... nt", "global_store_dword ... nt")},
    "vector_add_vec4": {"gfx942": ("global_load_dwordx4", "global_store_dwordx4")},
    "copy_vec4": {"gfx942": ("global_load_dwordx4", "global_store_dwordx4")},
    "triad_vec4": {"gfx942": ("global_load_dwordx4", "global_store_dwordx4")},
}


def floor_for(kernel: str, working_set_bytes: int, device_key: str | None, peak_bps: float):
    """The min_bw floor for `kernel` moving `working_set_bytes` on `device_key`, or None when
    the size is launch-bound. A device without its own floors (or an unknown one) gets the
    lowest floor in the table: a known-safe bar until that device has been measured."""
    per_device = FLOORS[kernel]
    hbm_floor = per_device.get(device_key or "", min(per_device.values()))
    stream_s = working_set_bytes / (hbm_floor * peak_bps)
    allowance_s = LAUNCH_ALLOWANCES_S.get(kernel, LAUNCH_ALLOWANCE_S)
    floor = hbm_floor * stream_s / (stream_s + allowance_s)
    return round(floor, 3) if floor >= NO_FLOOR_BELOW else None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "perf_floor(kernel, working_set_bytes): tests/perf/conftest.py turns it into a "
        "per-device min_bw floor",
    )
    config.addinivalue_line(
        "markers",
        f"sweep: a size of the opt-in sweep (4 KB .. 2 GB); run with -m sweep or {SWEEP_ENV}=1",
    )


@pytest.hookimpl(tryfirst=True)  # before the plugin reads the min_bw markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _sweep_enabled(config):
        dropped = [item for item in items if item.get_closest_marker("sweep")]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if not item.get_closest_marker("sweep")]
    floored = [item for item in items if item.get_closest_marker("perf_floor")]
    if not floored:
        return
    device_key, peak_bps = _floor_device(config)
    cache_bytes = _cache_bytes(device_key)
    for item in floored:
        kernel, working_set_bytes = item.get_closest_marker("perf_floor").args
        floor = floor_for(kernel, working_set_bytes, device_key, peak_bps)
        if floor is None:
            continue
        # A floor against the HBM peak means something in hot mode only where the working
        # set is too large for the caches to serve it (a hot 12 MiB run reads 200% of peak).
        modes = (
            ("cold", "rotate", "hot")
            if working_set_bytes >= 2 * cache_bytes
            else (
                "cold",
                "rotate",
            )
        )
        for mode in modes:
            item.add_marker(pytest.mark.min_bw(floor, cache=mode))


def _cache_bytes(device_key: str | None) -> int:
    from pytest_gpuperf.runtime.devices import get_device

    try:
        return int(get_device(device_key or "mi300x").cache_bytes)
    except GpuPerfError:
        return int(get_device("mi300x").cache_bytes)


def _sweep_enabled(config: pytest.Config) -> bool:
    return os.environ.get(SWEEP_ENV) == "1" or "sweep" in (config.option.markexpr or "")


def _floor_device(config: pytest.Config) -> tuple[str | None, float]:
    """The device key and peak the floors are for: --gpuperf-device, else the device the
    session measures on (opened now; the plugin opens it right after collection anyway),
    else (smoke mode, --collect-only, the xdist controller, no GPU) none: floors are only
    read when measuring, and each xdist worker collects, and decides, for itself."""
    from pytest_gpuperf.plugin.state import STATE
    from pytest_gpuperf.runtime.devices import get_device

    state = config.stash.get(STATE, None)
    settings = state.session.settings if state is not None else None
    key = settings.device_key if settings is not None else None
    controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(
        config, "workerinput"
    )
    collecting_only = bool(config.option.collectonly)
    if (
        key is None
        and settings is not None
        and settings.measure
        and not (controller or collecting_only)
    ):
        try:
            key = state.session.device().match.spec.key
        except GpuPerfError:
            key = None  # the gpu_bench fixture skips these tests and says why
    if key is not None:
        try:
            return key, get_device(key).peak_bps
        except GpuPerfError:
            pass
    return key, get_device("mi300x").peak_bps


# -- catalog_bench -----------------------------------------------------------------------------


EXPLAINED = 5  # wrong elements a failure lists with their values


@dataclass
class CatalogBench:
    """Runs a catalog kernel through gpu_bench: inputs made on the device (the counter-based
    hash of kernels/gpuperf_check.hip, seeded), the declared bytes from the catalog, and,
    after the measurement, every output compared on the device with a float64 reference
    computed there (the caller's buffers hold a real launch's output then, in every cache
    mode). Only a failure brings data to the host: NumPy makes the same inputs and explains
    which elements are wrong. Host work per test is a few launches, not 32M-element arrays."""

    gpu_bench: Any
    node: pytest.Item
    seed: int = 20250601

    def case(self, kernel: str, n: int) -> KernelCase:
        return KERNELS[kernel].make_case(n, np.random.default_rng(self.seed))

    def measure(self, kernel: str, n: int, *, cache: str | None = None, name: str | None = None):
        """Measure `kernel` at size `n` (elements, as the catalog counts them)."""
        entry = KERNELS[kernel]
        case = self.case(kernel, n)
        self._check_floor_size(case)
        bench = self.gpu_bench
        compiled = bench.kernel(
            f"kernels/{entry.file}", entry.name, expect_isa=EXPECT_ISA.get(entry.name)
        )
        args = self.device_args(case.layout)
        label = name or kernel
        if case.follow_ups:
            result = self._measure_scheme(entry.file, compiled, case, args, cache, label)
        else:
            result = bench(
                compiled,
                grid=case.grid,
                block=case.block,
                args=args,
                bytes=case.bytes_moved,
                cache=cache,
                name=label,
            )
            self.check_outputs(case, args)
        return result

    def device_args(self, layout: tuple, first: tuple = ()) -> tuple:
        """The launch's arguments on the device, inputs made there (catalog.device_args);
        gpu_bench frees the buffers when the test ends."""
        bench = self.gpu_bench
        return device_args(bench.backend, layout, first, lambda count: bench.empty(count))

    def _measure_scheme(self, file, first, case, args, cache, label):
        """A multi-launch scheme (dot, then dot_finish) measured as one piece of work: both
        launches inside every timed interval, bytes declared for both."""
        bench = self.gpu_bench
        launches = [(first, case, args)]
        for follow in case.follow_ups:
            kernel = bench.kernel(f"kernels/{file}", follow.name)
            launches.append((kernel, follow.case, self.device_args(follow.case.layout, args)))

        def scheme() -> None:
            for kernel, part, part_args in launches:
                bench.backend.launch(kernel, part.grid, part.block, part_args)

        total_bytes = sum(part.bytes_moved for _, part, _ in launches)
        result = bench.run(scheme, bytes=total_bytes, cache=cache, name=label)
        for _, part, part_args in launches:
            self.check_outputs(part, part_args)
        return result

    def check_outputs(self, case: KernelCase, args: tuple) -> None:
        """Each output against its float64 reference, both on the device; a failure names
        the count of wrong elements and the first, and NumPy shows their values."""
        for index, found in check_on_device(self.gpu_bench.backend, case, args).items():
            if found.wrong:
                self.explain(case, index, args[index], found)

    def explain(self, case: KernelCase, index: int, buffer: Any, found: Mismatch) -> None:
        """Raise for output `index`: the device's count and first bad index, and NumPy's view
        of the wrong elements (the same inputs made on the host, the NumPy reference)."""
        host = case.args[index]  # the host's copy of the inputs: the same bits as the device's
        got = self.gpu_bench.from_device(buffer, host.dtype, host.shape)
        expected = case.expected[index]
        bad = wrong_elements(got, expected, case.rtol, case.atol)
        flat_got, flat_expected = got.reshape(-1), np.asarray(expected).reshape(-1)
        shown = "; ".join(
            f"[{i}] got {float(flat_got[i]):.9g}, expected {float(flat_expected[i]):.17g}"
            for i in bad[:EXPLAINED]
        )
        what = (
            f"output {index} of {self.node.nodeid}: {found.wrong} of {got.size} elements wrong "
            f"(checked on the device), the first at index {found.first_index}"
            + (f"; NumPy: {shown}" if shown else "")
        )
        if bad.size:  # assert_allclose words the message from the bad elements alone
            np.testing.assert_allclose(
                flat_got[bad],
                flat_expected[bad],
                rtol=case.rtol,
                atol=case.atol,
                err_msg=what,
            )
        first = found.first_index or 0
        raise AssertionError(
            f"{what}: got {float(flat_got[first]):.9g}; NumPy's reference "
            f"({float(flat_expected[first]):.17g} there) accepts every element: the device's "
            "reference kernel and NumPy's disagree"
        )

    def _check_floor_size(self, case: KernelCase) -> None:
        """The floor was computed from the working set the test declared at collection;
        it must be the one the catalog declares, or the floor is for another size."""
        mark = self.node.get_closest_marker("perf_floor")
        if mark is None:
            return
        declared = mark.args[1]
        if abs(declared - case.bytes_moved) > 0.02 * case.bytes_moved:
            raise AssertionError(
                f"{self.node.nodeid}: perf_floor says {declared} bytes, the catalog case "
                f"declares {case.bytes_moved}; fix the test's bytes per element"
            )


@pytest.fixture
def catalog_bench(gpu_bench, request) -> CatalogBench:
    return CatalogBench(gpu_bench, request.node)
