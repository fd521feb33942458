"""The op two of Liger-Kernel's cross-entropy commits changed: the loss forward of a training
step (8192 tokens, a vocabulary of 32000, bf16 logits that require grad, so the kernel also
leaves the gradient in them, in place; `.item()` synchronises the host each call).

- 8832b2e7 ("perf(ce): hardware exp2 (ex2.approx) for softmax", #1266; -13.9% fwd+bwd for
  bf16 on an H100), taken with 37c91c0e, which makes its LOG2_E a constexpr: without it the
  kernel does not compile on Triton 3.6 ("Cannot access global variable LOG2_E").
- 0b93bc94 ("perf(ce): dtype-aware num_warps (Blackwell-gated)", #1267): 8 warps on sm_100+
  only; on Hopper both sides launch 32 warps and compile to the same machine code.

`case()` makes the inputs and the callable: the test measures it (setup= puts the logits back
before every call), and bench/real_commits.py times the same callable of both revisions in
one process (the truth; do_bench has no untimed setup, so there the logits hold the previous
call's gradient: the kernel's time does not depend on their values).
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

import torch.nn.functional as F  # noqa: E402
from liger_kernel.transformers import LigerCrossEntropyLoss  # noqa: E402

pytestmark = pytest.mark.gpu

TOKENS, VOCAB = 8192, 32000


def case() -> SimpleNamespace:
    logits = torch.randn(TOKENS, VOCAB, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, VOCAB, (TOKENS,), device="cuda")
    target[::16] = -100
    pristine = logits.detach().clone()
    loss_fn = LigerCrossEntropyLoss()
    out = {}

    def restore():
        with torch.no_grad():
            logits.copy_(pristine)

    def forward():
        out["loss"] = loss_fn(logits, target)

    def check():
        expected = pristine.float().requires_grad_()
        loss = F.cross_entropy(expected, target)
        loss.backward()
        torch.testing.assert_close(out["loss"].float(), loss.detach(), rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(logits.detach().float(), expected.grad, rtol=2e-2, atol=1e-7)

    return SimpleNamespace(
        fn=forward, setup=restore, reads=(logits, target), writes=(logits,), check=check
    )


def test_cross_entropy_forward(gpu_bench):
    op = case()
    gpu_bench.run(op.fn, reads=op.reads, writes=op.writes, setup=op.setup, name="ce_fwd")
    op.check()
