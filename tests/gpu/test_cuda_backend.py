"""The CUDA backend on a real NVIDIA GPU: compile, launch every catalog case, time, graphs,
and the errors a user meets. Skips (with the reason) where there is no usable GPU."""

from __future__ import annotations

import math
import time
import zlib

import numpy as np
import pytest

from pytest_gpuperf.errors import (
    ArgumentError,
    CompileError,
    DeviceUnavailable,
    KernelNotFound,
    LaunchError,
    OutOfDeviceMemory,
)
from pytest_gpuperf.runtime.base import DeviceBuffer
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.session.catalog import KERNELS, KernelCase, bind

pytestmark = pytest.mark.gpu

KERNEL_FILES = sorted(KERNELS_DIR.glob("*.hip"))
CASE_SIZES = (1001, 3 * 2**20 + 3)  # odd: scalar tails and odd shapes; large: many blocks
SEED_N = 32 * 2**20  # the MI300X blog post's vector add: 32M floats


def test_without_a_gpu_open_says_precisely_why():
    from pytest_gpuperf.runtime import cuda

    try:
        backend = cuda.open(0)
    except DeviceUnavailable as unavailable:
        (attempt,) = unavailable.attempts
        assert attempt.backend == "cuda"
        assert attempt.reason.startswith(
            ("cuda-bindings is not installed", "libcuda.so not found", "CUDA_ERROR_NO_DEVICE",
             "cuInit failed: CUDA_ERROR_", "device index 0 out of range")
        )  # fmt: skip
        return
    backend.close()
    pytest.skip("a CUDA GPU is present: the no-GPU message cannot be observed here")


@pytest.fixture(scope="module")
def modules(cuda_backend):
    """Every kernel file, compiled once for this device."""
    return {path.name: cuda_backend.compile(path) for path in KERNEL_FILES}


@pytest.fixture
def device(cuda_backend):
    """Allocates device copies of host arrays and frees them when the test ends."""
    owned: list[DeviceBuffer] = []

    def put(array: np.ndarray) -> DeviceBuffer:
        buffer = cuda_backend.to_device(array)
        owned.append(buffer)
        return buffer

    yield put
    for buffer in owned:
        buffer.free()


def rng_for(*parts: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(parts).encode()))


def test_device_info(cuda_backend):
    info = cuda_backend.info
    assert info.backend == "cuda" and not info.simulated and info.name
    assert info.arch.startswith("sm_") and info.arch[3:].isdigit()
    assert info.compute_units > 0 and info.l2_bytes > 0 and info.memory_bytes > 2**30
    assert info.warp_size == 32 and info.max_threads_per_block >= 1024
    assert info.pci_bus_id and info.driver_version[0].isdigit()
    assert info.reported_peak_bps is None or info.reported_peak_bps > 1e11


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.name)
def test_every_kernel_compiles_and_loads(modules, path):
    module = modules[path.name]
    assert module.binary[:4] == b"\x7fELF" and module.signatures
    for name in module.signatures:
        resources = module.kernel(name).resources
        assert resources.registers and resources.registers > 0
        assert resources.max_threads_per_block and resources.max_threads_per_block >= 256
        assert resources.scratch_bytes == 0, f"{name} spills to local memory: {resources}"


def test_a_second_compile_comes_from_the_cache(cuda_backend):
    source = '#include "gpuperf.h"\nGPUPERF_KERNEL void twice(float* x) { x[0] = 2.0f; }\n'
    first = cuda_backend.compile(source, name="twice.hip", defines={"UNUSED": 1})
    second = cuda_backend.compile(source, name="twice.hip", defines={"UNUSED": 1})
    assert (first.from_cache, second.from_cache) == (False, True)
    assert second.kernel("twice").name == "twice"


def test_a_module_loaded_again_is_a_separate_module_of_the_same_code(
    cuda_backend, device, monkeypatch
):
    """load_again: cuModuleLoadData of the same CUBIN gives another module (another
    function handle) running the same code; unload frees it and only it, once (the base
    class's bookkeeping: a second unload never reaches the driver)."""
    driver = cuda_backend._d
    unloaded = []
    real_unload = driver.cuModuleUnload

    def unload(handle):
        unloaded.append(handle)
        return real_unload(handle)

    monkeypatch.setattr(driver, "cuModuleUnload", unload)
    source = '#include "gpuperf.h"\nGPUPERF_KERNEL void put(float* x) { x[0] = 3.0f; }\n'
    module = cuda_backend.compile(source, name="put.hip")
    again = cuda_backend.load_again(module)
    first, second = module.kernel("put"), again.kernel("put")
    assert again.handle is not module.handle and second.handle is not first.handle
    assert cuda_backend.kernel_fingerprint(first) == cuda_backend.kernel_fingerprint(second)
    out = device(np.zeros(1, np.float32))
    cuda_backend.launch(second, 1, 1, (out,))
    cuda_backend.synchronize()
    assert out.download(np.float32)[0] == 3.0
    cuda_backend.unload(again)
    cuda_backend.unload(again)
    assert unloaded == [again.handle]
    cuda_backend.launch(first, 1, 1, (out,))  # the first load is untouched
    cuda_backend.synchronize()


# -- every catalog case against NumPy ------------------------------------------------------


def launch_and_check(backend, module, name: str, case: KernelCase, put, first_args=None) -> list:
    """Upload the case, launch it, compare its outputs with the reference; the device args."""
    args = bind(case.args, first_args) if first_args is not None else list(case.args)
    device_args = [put(a) if isinstance(a, np.ndarray) else a for a in args]
    backend.launch(module.kernel(name), case.grid, case.block, device_args)
    backend.synchronize()
    for index in case.outputs:
        got = device_args[index].download(np.float32)
        np.testing.assert_allclose(
            got, case.expected[index], rtol=case.rtol, atol=case.atol,
            err_msg=f"{name}: output argument {index} differs from the NumPy reference",
        )  # fmt: skip
    return device_args


@pytest.mark.parametrize("size", CASE_SIZES)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_catalog_case_matches_numpy(cuda_backend, modules, device, name, size):
    entry = KERNELS[name]
    case = entry.make_case(size, rng_for(name, size))
    module = modules[entry.file]
    first = launch_and_check(cuda_backend, module, name, case, device)
    for follow in case.follow_ups:
        launch_and_check(cuda_backend, module, follow.name, follow.case, device, first)


@pytest.mark.parametrize("name", ["vector_add_vec4", "copy_vec4", "triad_vec4"])
def test_float4_kernels_fall_back_for_unaligned_pointers(cuda_backend, modules, name):
    """Every array starts 4 bytes into its allocation: the kernel must not use float4."""
    case = KERNELS[name].make_case(4099, rng_for(name))
    bases, args = [], []
    try:
        for value in case.args:
            if isinstance(value, np.ndarray):
                base = cuda_backend.alloc(value.nbytes + 4)
                bases.append(base)
                view = DeviceBuffer(cuda_backend, base.ptr + 4, value.nbytes)
                view.upload(value)
                args.append(view)
            else:
                args.append(value)
        kernel = modules[KERNELS[name].file].kernel(name)
        cuda_backend.launch(kernel, case.grid, case.block, args)
        cuda_backend.synchronize()
        for index in case.outputs:
            np.testing.assert_allclose(
                args[index].download(np.float32), case.expected[index], rtol=case.rtol,
                atol=case.atol,
            )  # fmt: skip
    finally:
        for base in bases:
            base.free()


# -- timing -------------------------------------------------------------------------------


def time_launches(backend, launch, repeats: int) -> float:
    """Seconds per launch from one event pair around `repeats` back-to-back launches."""
    start, end = backend.create_event(), backend.create_event()
    launch()  # warm-up: module load, clocks
    backend.synchronize()
    backend.record_event(start)
    for _ in range(repeats):
        launch()
    backend.record_event(end)
    return backend.elapsed_s(start, end) / repeats


@pytest.mark.parametrize(
    "name", ["vector_add", "vector_add_bypass", "vector_add_nt", "vector_add_vec4"]
)
def test_event_timing_of_the_seed_vector_add(cuda_backend, modules, device, capsys, name):
    rng = rng_for("timing")
    a, b = rng.random(SEED_N, dtype=np.float32) + 0.5, rng.random(SEED_N, dtype=np.float32) + 0.5
    da, db, dc = device(a), device(b), device(np.full(SEED_N, np.nan, np.float32))
    kernel = modules["vector_add.hip"].kernel(name)
    blocks = math.ceil((math.ceil(SEED_N / 4) if name.endswith("vec4") else SEED_N) / 256)
    per_launch_s = time_launches(
        cuda_backend, lambda: cuda_backend.launch(kernel, blocks, 256, (da, db, dc, SEED_N)), 20
    )
    np.testing.assert_array_equal(dc.download(np.float32), a + b)
    bandwidth_bps = 12 * SEED_N / per_launch_s
    peak_bps = cuda_backend.info.reported_peak_bps
    with capsys.disabled():
        share = f", {bandwidth_bps / peak_bps:.1%} of the reported peak" if peak_bps else ""
        print(
            f"\n[timing] {cuda_backend.info.name} {name} 32M fp32 (hot, 20 launches per event "
            f"pair): {per_launch_s * 1e6:.1f} us, {bandwidth_bps / 1e9:.0f} GB/s{share}; "
            f"{kernel.resources.summary()}"
        )
    if peak_bps:
        # 384 MB cannot come from a 50 MB L2: above the memory's peak means a broken timer;
        # far below it, the plain kernels would be timing something else (the host).
        assert bandwidth_bps < 1.05 * peak_bps
        if name in ("vector_add", "vector_add_vec4"):
            assert bandwidth_bps > 0.25 * peak_bps


# -- graphs -------------------------------------------------------------------------------


def test_a_device_copy_is_queued_in_stream_order_without_waiting(cuda_backend, modules, device):
    """Backend.copy, what `gpu_bench.copy` queues in a setup=: behind a 20 ms spin on the
    default stream it returns at once, and a kernel queued after it reads what it copied
    (the timed launch after a setup's copy sees the restored input)."""
    spin = modules["gpuperf_internal.hip"].kernel("gpuperf_spin")
    copy = modules["stream.hip"].kernel("copy")  # b = a
    n = 1 << 24
    values = np.arange(n, dtype=np.float32)
    src, dst = device(values), device(np.zeros(n, np.float32))
    out = device(np.zeros(n, np.float32))
    cuda_backend.synchronize()
    start = time.perf_counter()
    cuda_backend.launch(spin, 1, 1, (20_000_000,))
    cuda_backend.copy(dst, src)
    queued_s = time.perf_counter() - start
    cuda_backend.launch(copy, n // 256, 256, (dst, out, n))
    cuda_backend.synchronize()
    done_s = time.perf_counter() - start
    assert queued_s < 0.005 and done_s >= 0.02, (queued_s, done_s)
    np.testing.assert_array_equal(out.download(np.float32), values)


def test_graph_capture_and_replay(cuda_backend, modules, device, capsys):
    n = 2**22
    rng = rng_for("graph")
    a, b = rng.random(n, dtype=np.float32) + 0.5, rng.random(n, dtype=np.float32) + 0.5
    da, db, dc = device(a), device(b), device(np.full(n, np.nan, np.float32))
    kernel = modules["vector_add.hip"].kernel("vector_add")
    cuda_backend.launch(kernel, n // 256, 256, (da, db, dc, n))  # outside capture: occupancy
    cuda_backend.synchronize()
    dc.upload(np.full(n, np.nan, np.float32))
    stream = cuda_backend.create_stream()
    graph = cuda_backend.capture_graph(
        lambda s: [cuda_backend.launch(kernel, n // 256, 256, (da, db, dc, n), stream=s)
                   for _ in range(10)],
        stream,
    )  # fmt: skip
    cuda_backend.synchronize()
    assert np.isnan(dc.download(np.float32)).all(), "capturing must not run the kernels"

    cuda_backend.launch_graph(graph, stream)
    cuda_backend.synchronize(stream)
    np.testing.assert_array_equal(dc.download(np.float32), a + b)

    a2 = a * 2  # a replay reads the buffers again
    da.upload(a2)
    start, end = cuda_backend.create_event(), cuda_backend.create_event()
    cuda_backend.record_event(start, stream)
    cuda_backend.launch_graph(graph, stream)
    cuda_backend.record_event(end, stream)
    graph_s = cuda_backend.elapsed_s(start, end)
    np.testing.assert_array_equal(dc.download(np.float32), a2 + b)
    with capsys.disabled():
        print(f"\n[timing] graph of 10 vector_add launches, 4M fp32: {graph_s * 1e5:.1f} us each")

    default = cuda_backend.capture_graph(
        lambda s: cuda_backend.launch(kernel, n // 256, 256, (db, db, dc, n), stream=s)
    )
    cuda_backend.launch_graph(default)  # on the default stream
    cuda_backend.synchronize()
    np.testing.assert_array_equal(dc.download(np.float32), b + b)


# -- occupancy ----------------------------------------------------------------------------


def test_occupancy_is_reported_for_the_block_size_used(cuda_backend, modules, device):
    kernel = modules["vector_add.hip"].kernel("vector_add")
    n = 2**16
    da = device(np.ones(n, np.float32))
    cuda_backend.launch(kernel, n // 128, 128, (da, da, da, n))
    cuda_backend.synchronize()
    resources = kernel.resources
    assert resources.block_threads == 128 and resources.blocks_per_cu >= 1
    assert resources.occupancy == 1.0 and resources.occupancy_limiter  # 12-ish registers
    big = cuda_backend.occupancy(kernel, 1024)
    assert big.block_threads == 1024 and big.occupancy == 1.0
    assert kernel.resources.block_threads == 128  # asking does not change the kernel
    with pytest.raises(LaunchError, match="a block of 2048 threads exceeds the 1024"):
        cuda_backend.launch(kernel, 1, (1024, 2), (da, da, da, n))


# -- the errors a user meets ----------------------------------------------------------------


def test_unknown_kernel_lists_the_kernels(modules):
    with pytest.raises(KernelNotFound) as failure:
        modules["vector_add.hip"].kernel("vectoradd")
    message = str(failure.value)
    assert "'vectoradd'" in message and "vector_add.hip" in message
    assert all(name in message for name in ("vector_add,", "vector_add_bypass", "vector_add_vec4"))


def test_wrong_argument_count_and_host_arrays_are_refused_before_launch(
    modules, cuda_backend, device
):
    kernel = modules["vector_add.hip"].kernel("vector_add")
    a = np.ones(256, np.float32)
    da = device(a)
    with pytest.raises(ArgumentError, match=r"takes 4 arguments .* got 3"):
        cuda_backend.launch(kernel, 1, 256, (da, da, da))
    with pytest.raises(ArgumentError, match=r"argument 1 \(const float\* b\) .* host NumPy array"):
        cuda_backend.launch(kernel, 1, 256, (da, a, da, 256))
    cuda_backend.synchronize()  # nothing was launched, nothing broke


def test_driver_launch_errors_carry_the_driver_error_name(modules, cuda_backend, device):
    kernel = modules["vector_add.hip"].kernel("vector_add")
    da = device(np.ones(256, np.float32))
    with pytest.raises(LaunchError, match="CUDA_ERROR_INVALID_VALUE"):
        cuda_backend.launch(kernel, (1, 2**16 + 1, 1), 256, (da, da, da, 256))  # grid.y too big
    cuda_backend.synchronize()


def test_an_allocation_larger_than_the_device_is_out_of_memory(cuda_backend):
    too_big = 2 * cuda_backend.info.memory_bytes
    with pytest.raises(OutOfDeviceMemory) as failure:
        cuda_backend.alloc(too_big)
    message = str(failure.value)
    assert (
        str(too_big) in message and "free of" in message and "CUDA_ERROR_OUT_OF_MEMORY" in message
    )
    cuda_backend.alloc(1024).free()  # the device is still usable


def test_a_compile_error_names_file_and_line(cuda_backend):
    source = (
        '#include "gpuperf.h"\nGPUPERF_KERNEL void k(float* x) {\n  x[0] = undefined_name;\n}\n'
    )
    with pytest.raises(CompileError) as failure:
        cuda_backend.compile(source, name="broken.hip")
    assert (failure.value.source_path, failure.value.line) == ("broken.hip", 3)
    assert "undefined_name" in failure.value.log
