"""The op Liger-Kernel's b7025a70 ("Improve bwd kernel for fused_add_rms_norm", #1187)
changed: the fused residual-add RMSNorm's backward, at the shape its pull request measured
(2048 rows of hidden 16384, fp32: 1.006 -> 0.300 ms on an H100, the register-bound case).

`case()` makes the inputs and the callable: the test measures it, and bench/real_commits.py
times the same callable of the commit and of its parent in one process (the truth). The
library is imported by its package name only; the scratch repository's `pythonpath = vendor`
picks the revision.
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install torch)")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)", allow_module_level=True)
if importlib.util.find_spec("liger_kernel") is None:  # present but broken: an error, not a skip
    pytest.skip("needs liger-kernel (pip install liger-kernel)", allow_module_level=True)

from liger_kernel.transformers import LigerFusedAddRMSNorm  # noqa: E402

pytestmark = pytest.mark.gpu

ROWS, HIDDEN, EPS = 2048, 16384, 1e-6


def case() -> SimpleNamespace:
    """The backward through autograd, graph kept for the repeated calls."""
    x = torch.randn(ROWS, HIDDEN, device="cuda", requires_grad=True)
    residual = torch.randn(ROWS, HIDDEN, device="cuda", requires_grad=True)
    norm = LigerFusedAddRMSNorm(HIDDEN, eps=EPS).to("cuda")
    y, summed = norm(x, residual)
    dy, dsummed = torch.randn_like(y), torch.randn_like(summed)
    out = {}

    def backward():
        out["dx"], out["dw"] = torch.autograd.grad(
            (y, summed), (x, norm.weight), (dy, dsummed), retain_graph=True
        )

    def check():
        x64 = (x.detach() + residual.detach()).double().requires_grad_()
        w64 = norm.weight.detach().double().requires_grad_()
        y64 = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS) * w64
        dx, dw = torch.autograd.grad((y64, x64), (x64, w64), (dy.double(), dsummed.double()))
        torch.testing.assert_close(out["dx"].double(), dx, rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(out["dw"].double(), dw, rtol=1e-3, atol=1e-2)

    return SimpleNamespace(
        fn=backward, setup=None, reads=(dy, dsummed, summed, norm.weight), writes=(x,),
        check=check,
    )  # fmt: skip


def test_fused_add_rms_norm_backward(gpu_bench):
    op = case()
    gpu_bench.run(
        op.fn, reads=op.reads, writes=op.writes, setup=op.setup, name="fused_add_rms_norm_bwd"
    )
    op.check()
