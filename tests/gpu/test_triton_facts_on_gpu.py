"""explain/code/triton_facts.py against real Triton builds on an NVIDIA GPU (issue 44 item 3):
the attributes it reads duck-typed are where the installed Triton keeps them (registers,
the target, `num_warps`, the PTX), so every fact is known on an H100/H200; and the global
loads and stores it counts in the PTX agree with the SASS nvdisasm prints for the same
CUBIN (count_sass, what a HIP/CUDA kernel's facts use), for a copy, a masked extra load,
half precision and a block of 8 warps.

Needs CUDA, torch and triton; skips without them (and the SASS check without nvdisasm, which
Triton's wheel ships). Run on the GPU machine:
`PYTHONPATH=. python3 -m pytest -s tests/gpu/test_triton_facts_on_gpu.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf.explain.code.memory_ops import (
    DisassemblyFailed,
    count_ptx,
    count_sass,
    disassemble,
    find_nvdisasm,
    sass_function,
)
from pytest_gpuperf.explain.code.triton_facts import compiled_facts, triton_facts
from tests.gpu.conftest import module_from_source, needs_cuda_torch_triton

KERNELS = """\
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def extra_kernel(src, dst, extra, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(src + offs, mask=mask)
    x = x + tl.load(extra + offs, mask=offs < n * 3 // 100, other=0.0)
    tl.store(dst + offs, x, mask=mask)


@triton.jit
def scale_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(src + offs, mask=mask).to(tl.float32)
    tl.store(dst + offs, (x * 2.0).to(tl.float16), mask=mask)
"""


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The module of KERNELS after one launch of each kernel (so Triton compiled and loaded
    them: `n_regs` is set at the first launch)."""
    needs_cuda_torch_triton()
    import torch

    kernels = module_from_source(
        tmp_path_factory.mktemp("tritonkernels"), "gpuperf_triton_kernels", KERNELS
    )
    n = 1 << 20
    src, dst = torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
    grid = (n // 1024,)
    kernels.copy_kernel[grid](src, dst, n, BLOCK=1024)
    kernels.extra_kernel[grid](src, dst, torch.zeros_like(src), n, BLOCK=1024, num_warps=8)
    half = torch.rand(n, device="cuda").half()
    kernels.scale_kernel[grid](half, torch.empty_like(half), n, BLOCK=1024)
    torch.cuda.synchronize()
    return kernels


def _compiled(function):
    caches = getattr(function, "device_caches", None)
    if caches:
        entry = next(iter(caches.values()))
        return list(entry[0].values())[-1]
    return list(next(iter(function.cache.values())).values())[-1]


def _nvdisasm() -> str | None:
    found = find_nvdisasm()
    if found:
        return found
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    return str(bundled) if bundled.is_file() else None


@pytest.mark.gpu
def test_every_fact_is_known_for_the_installed_triton(launched):
    import torch

    facts = triton_facts([launched])
    assert sorted(facts) == ["copy_kernel", "extra_kernel", "scale_kernel"], facts
    major, minor = torch.cuda.get_device_capability()
    for name, found in facts.items():
        print(f"{name} on sm_{major}{minor}: {found}")
        assert found.registers and found.registers > 0, found
        assert found.spills == 0 and found.shared_bytes is not None, found
        assert found.loads and found.stores, found
        if (major, minor) in ((8, 0), (8, 6), (8, 9), (9, 0)):  # nvidia_occupancy.py's table
            assert found.occupancy is not None and 0 < found.occupancy <= 1, found
    # the bits one thread moves, however Triton vectorized them: 1024 elements a block, 4
    # warps (8 a thread) or 8 warps (4 a thread); the extra load's mask may keep it scalar
    assert _bits(facts["copy_kernel"].loads) == _bits(facts["copy_kernel"].stores) == 8 * 32
    assert _bits(facts["extra_kernel"].loads) == 2 * _bits(facts["extra_kernel"].stores) == 256
    assert _bits(facts["scale_kernel"].loads) == _bits(facts["scale_kernel"].stores) == 8 * 16


def _bits(widths) -> int:
    return sum(int(width[1:]) * count for width, count in widths or ())


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["copy_kernel", "extra_kernel", "scale_kernel"])
def test_ptx_counts_agree_with_the_sass_of_the_same_cubin(launched, name):
    compiled = _compiled(getattr(launched, name))
    tool = _nvdisasm()
    if tool is None:
        pytest.skip("needs nvdisasm (pip install nvidia-cuda-nvdisasm) to read the SASS")
    try:
        sass, version = disassemble(compiled.asm["cubin"], tool=tool)
    except DisassemblyFailed as failure:
        pytest.skip(str(failure))
    from_sass = count_sass(sass_function(sass, compiled.metadata.name))
    from_ptx = count_ptx(compiled.asm["ptx"])
    print(f"{name}: PTX {from_ptx}, SASS ({version}) {from_sass}")
    assert from_ptx == from_sass
    assert compiled_facts(name, compiled).loads == from_ptx[0]
