"""explain/code/cupy_facts.py against real CuPy kernels on an NVIDIA GPU (issue 44 item 3):
CuPy's memo of compiled modules is where cupy_facts looks for it (so a launched RawKernel is
read), the driver's attributes come back through CuPy's properties (registers > 0, the
local memory of a local array, the largest block `__launch_bounds__` allows), and a kernel
never launched is neither read nor compiled by the reading. And, with CuPy but no device,
that CuPy's own memoize keeps its memo where cupy_facts finds it.

Needs CuPy and a CUDA GPU; skips without them (the memoize check needs CuPy alone). Run on
the GPU machine:
`PYTHONPATH=. python3 -m pytest -s tests/gpu/test_cupy_facts_on_gpu.py`.
"""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from pytest_gpuperf.explain.code.cupy_facts import (
    _memos,
    compiled_sources,
    cupy_changes,
    cupy_facts,
)
from tests.gpu.conftest import module_from_source

KERNELS = r'''
import cupy

scale_kernel = cupy.RawKernel(r"""
extern "C" __global__ void scale_kernel(const float* src, float* dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = 2.0f * src[i];
}
""", "scale_kernel")

# a local array indexed at run time lives in local memory; the block is bounded at 256
local_kernel = cupy.RawKernel(r"""
extern "C" __global__ void __launch_bounds__(256) local_kernel(const float* src, float* dst,
                                                                int n) {
    float table[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < 64; ++k) table[k] = src[(i + k) % n];
    if (i < n) dst[i] = table[(int)src[i] & 63];
}
""", "local_kernel")

never_kernel = cupy.RawKernel(r"""
extern "C" __global__ void never_kernel(float* dst) { dst[threadIdx.x] = 1.0f; }
""", "never_kernel")

pair = cupy.RawModule(code=r"""
extern "C" __global__ void first(float* dst) { dst[threadIdx.x] = 1.0f; }
extern "C" __global__ void second(float* dst) { dst[threadIdx.x] = 2.0f; }
""")
'''


def needs_cuda_cupy() -> None:
    """Skip unless cupy imports and sees a CUDA GPU."""
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("needs cupy (pip install cupy-cuda12x)")
    import cupy

    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as failure:  # CUDARuntimeError without a driver or a device
        pytest.skip(f"needs a CUDA GPU through cupy: {failure}")
    if count < 1 or cupy.cuda.runtime.is_hip:
        pytest.skip("needs a CUDA GPU through cupy")


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The module of KERNELS after one launch of scale_kernel, local_kernel and the
    RawModule's `first` (which compiles the module); never_kernel is never launched."""
    needs_cuda_cupy()
    import cupy

    kernels = module_from_source(
        tmp_path_factory.mktemp("cupykernels"), "gpuperf_cupy_kernels", KERNELS
    )
    n = 1 << 16
    src, dst = cupy.random.rand(n, dtype=cupy.float32), cupy.empty(n, dtype=cupy.float32)
    kernels.scale_kernel((n // 256,), (256,), (src, dst, cupy.int32(n)))
    kernels.local_kernel((n // 256,), (256,), (src, dst, cupy.int32(n)))
    kernels.pair.get_function("first")((1,), (32,), (dst,))
    cupy.cuda.runtime.deviceSynchronize()
    return kernels


@pytest.mark.gpu
def test_launched_kernels_are_read_from_the_driver(launched):
    facts = cupy_facts([launched])
    for found in facts.values():
        print(found)
    assert sorted(facts) == ["first", "local_kernel", "scale_kernel", "second"], facts
    scale, local = facts["scale_kernel"], facts["local_kernel"]
    assert scale.registers and scale.registers > 0, scale
    assert scale.registers == launched.scale_kernel.attributes["num_regs"]
    assert scale.local_bytes == 0 and scale.shared_bytes == 0, scale
    assert scale.max_threads_per_block and scale.max_threads_per_block >= 256, scale
    assert local.local_bytes and local.local_bytes >= 64 * 4, local
    assert local.max_threads_per_block == 256, local
    line = cupy_changes({"local_kernel": local}, {"local_kernel": scale})[0]
    print(line)
    assert line.startswith(f"cupy local_kernel: registers {scale.registers} -> ")
    assert f"local memory 0 -> {local.local_bytes} bytes (spills)" in line


@pytest.mark.gpu
def test_a_kernel_never_launched_is_not_read_nor_compiled(launched):
    sources = compiled_sources()
    assert sources is not None, "CuPy's memo of compiled modules was not found"
    never = launched.never_kernel
    assert all(source[0] != never.code for source in sources)
    assert "never_kernel" not in cupy_facts([launched])
    assert all(source[0] != never.code for source in compiled_sources() or ())


def test_the_memo_is_found_in_cupys_own_memoize():
    """Without a device: CuPy's Cython memoize (the decorator of _get_raw_module) keeps its
    memo where cupy_facts looks, within the closure the garbage collector shows."""
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("needs cupy (pip install cupy-cuda12x)")
    from cupy import _util

    memoized = _util.memoize(False)(lambda *args: "a Module")
    args = ("code", None, (), "nvrtc", False, False, False, None, None)
    memoized(*args)
    assert _memos(memoized) == [{(-1, args): "a Module"}]
