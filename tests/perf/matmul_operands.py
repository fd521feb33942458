"""The operands of the perf suite's bf16 matmuls (torch.matmul and the Triton kernel): one
seeded pair of random inputs and an output, on the GPU gpu_bench measures, and the check of
the product against an fp32 one."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install torch)")


def bf16_operands(gpu_bench: Any, size: int, what: str) -> tuple[Any, Any, Any]:
    """a and b (random, seed 56) and an empty c, size x size bf16 on gpu_bench's GPU; skips,
    naming `what`, unless gpu_bench measures on a CUDA GPU torch can use."""
    if gpu_bench.backend.name != "cuda" or not torch.cuda.is_available():
        pytest.skip(f"needs {what} on a CUDA GPU; gpu_bench measures on {gpu_bench.backend.name}")
    device = torch.device("cuda", gpu_bench.info.index)
    generator = torch.Generator(device=device).manual_seed(56)
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=generator)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=generator)
    return a, b, torch.empty(size, size, device=device, dtype=torch.bfloat16)


def check_product(result: Any, a: Any, b: Any, c: Any) -> None:
    """c is a @ b to bf16's precision, and a measured result stands under the compute roof."""
    torch.cuda.synchronize(c.device)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=0.25)
    if result.measured:
        assert result.roofline is not None and result.roofline.bound == "compute"
