"""The op Liger-Kernel's 65de9582 ("perf(dyt): enable triton.autotune for DyT forward and
backward kernels", #1208) changed: DyT's forward, which now autotunes over 18 configs (the
pull request: +1-5% on an A10G at hidden 2048-8192), at Llama-3-8B's hidden 4096, 8192
tokens, bf16.

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

from liger_kernel.transformers import LigerDyT  # noqa: E402

pytestmark = pytest.mark.gpu

TOKENS, HIDDEN = 8192, 4096


def case() -> SimpleNamespace:
    x = torch.randn(TOKENS, HIDDEN, device="cuda", dtype=torch.bfloat16)
    dyt = LigerDyT(HIDDEN, beta=True).to("cuda", torch.bfloat16)
    with torch.no_grad():
        dyt.gamma.uniform_(0.5, 1.5)
        dyt.beta.uniform_(-0.5, 0.5)
    out = {}

    def forward():
        out["y"] = dyt(x)

    def check():
        alpha, gamma, beta = (p.detach().float() for p in (dyt.alpha, dyt.gamma, dyt.beta))
        expected = (gamma * torch.tanh(alpha * x.float()) + beta).to(torch.bfloat16)
        torch.testing.assert_close(out["y"], expected, rtol=2e-2, atol=2e-2)

    return SimpleNamespace(
        fn=forward, setup=None, reads=(x, dyt.gamma, dyt.beta), writes=(x,), check=check
    )


def test_dyt_forward(gpu_bench):
    op = case()
    gpu_bench.run(op.fn, reads=op.reads, writes=op.writes, setup=op.setup, name="dyt_fwd")
    op.check()
