"""Liger-Kernel's Triton ops, measured as a training step runs them (Llama-3-8B-like: 8192
tokens, hidden 4096, MLP 14336, bf16; a Llama-2 vocabulary of 32000 for the losses).

What these ops do that a kernel written for the plugin does not: the cross-entropy forward
calls `.item()` on a device tensor (a host synchronisation each call) and writes the gradient
into its logits in place; RoPE rotates q and k in place; the JSD forward synchronises on its
labels; DyT autotunes (`@triton.autotune`, from 0.8.0); the backward runs through autograd.
An op that works in place gets a `setup=` that puts its inputs back before every call, and
every output is checked against a torch reference after the measurement.

The library is imported by its package name only: in bench/real_ops.py's scratch repository
`pythonpath = vendor` makes that the vendored release, elsewhere the installed one.
"""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install torch)")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)", allow_module_level=True)
if importlib.util.find_spec("liger_kernel") is None:  # present but broken: an error, not a skip
    pytest.skip("needs liger-kernel (pip install liger-kernel)", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402
from liger_kernel.ops.swiglu import LigerSiLUMulFunction  # noqa: E402
from liger_kernel.transformers import (  # noqa: E402
    LigerCrossEntropyLoss,
    LigerDyT,
    LigerFusedAddRMSNorm,
    LigerJSD,
    LigerLayerNorm,
    LigerRMSNorm,
)
from liger_kernel.transformers.rope import liger_rotary_pos_emb  # noqa: E402

pytestmark = pytest.mark.gpu

BT, HIDDEN, MLP, VOCAB = 8192, 4096, 14336, 32000
EPS = 1e-6
BF16 = torch.bfloat16


def _randn(*shape, dtype=BF16, requires_grad=False):
    return torch.randn(*shape, device="cuda", dtype=dtype, requires_grad=requires_grad)


def _rms_norm_reference(x, weight):
    """Llama's RMSNorm: normalised in fp32, cast back, then scaled (Liger's "llama" mode)."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS)
    return normed.to(x.dtype) * weight


def test_cross_entropy_forward(gpu_bench):
    """The loss of a training step: the logits require grad, so the kernel leaves the
    gradient in them (in place), and `.item()` counts the targets that are not ignored."""
    logits = _randn(BT, VOCAB, requires_grad=True)
    target = torch.randint(0, VOCAB, (BT,), device="cuda")
    target[::16] = -100  # padding
    pristine = logits.detach().clone()
    loss_fn = LigerCrossEntropyLoss()
    out = {}

    def restore():
        with torch.no_grad():
            logits.copy_(pristine)

    def forward():
        out["loss"] = loss_fn(logits, target)

    gpu_bench.run(forward, reads=(logits, target), writes=(logits,), setup=restore, name="ce_fwd")
    expected = pristine.float().requires_grad_()
    loss = F.cross_entropy(expected, target)
    loss.backward()
    torch.testing.assert_close(out["loss"].float(), loss.detach(), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(logits.detach().float(), expected.grad, rtol=2e-2, atol=1e-7)


def test_rms_norm_forward(gpu_bench):
    x = _randn(BT, HIDDEN)
    norm = LigerRMSNorm(HIDDEN, eps=EPS).to("cuda", BF16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    out = {}

    def forward():
        out["y"] = norm(x)

    gpu_bench.run(
        forward, reads=(x, norm.weight), writes=(x.nbytes, 4 * BT), name="rms_norm_fwd"
    )  # y, and the fp32 rstd per row kept for the backward
    expected = _rms_norm_reference(x, norm.weight.detach())
    torch.testing.assert_close(out["y"], expected, rtol=2e-2, atol=2e-2)


def test_fused_add_rms_norm_forward(gpu_bench):
    """A decoder layer's residual add fused with the next RMSNorm: (y, residual sum)."""
    x, residual = _randn(BT, HIDDEN), _randn(BT, HIDDEN)
    norm = LigerFusedAddRMSNorm(HIDDEN, eps=EPS).to("cuda", BF16)
    out = {}

    def forward():
        out["y"], out["s"] = norm(x, residual)

    gpu_bench.run(
        forward,
        reads=(x, residual, norm.weight),
        writes=(x.nbytes, residual.nbytes, 4 * BT),
        name="fused_add_rms_norm_fwd",
    )
    summed = (x.float() + residual.float()).to(BF16)
    torch.testing.assert_close(out["s"], summed, rtol=1e-2, atol=1e-2)
    expected = _rms_norm_reference(summed, norm.weight.detach())
    torch.testing.assert_close(out["y"], expected, rtol=2e-2, atol=2e-2)


def test_fused_add_rms_norm_backward(gpu_bench):
    """The backward through autograd (as a training step calls it), graph kept for the
    repeated calls: dX (which is also the residual's gradient) and dW."""
    x, residual = _randn(BT, HIDDEN, requires_grad=True), _randn(BT, HIDDEN, requires_grad=True)
    norm = LigerFusedAddRMSNorm(HIDDEN, eps=EPS).to("cuda", BF16)
    y, summed = norm(x, residual)
    dy, dsummed = _randn(BT, HIDDEN), _randn(BT, HIDDEN)
    out = {}

    def backward():
        out["dx"], out["dr"], out["dw"] = torch.autograd.grad(
            (y, summed), (x, residual, norm.weight), (dy, dsummed), retain_graph=True
        )

    gpu_bench.run(
        backward,
        reads=(dy, dsummed, summed, norm.weight),
        writes=(x.nbytes,),
        name="fused_add_rms_norm_bwd",
    )
    x32, r32 = x.detach().float().requires_grad_(), residual.detach().float().requires_grad_()
    w32 = norm.weight.detach().float().requires_grad_()
    s32 = x32 + r32
    y32 = s32 * torch.rsqrt(s32.pow(2).mean(-1, keepdim=True) + EPS) * w32
    dx, dw = torch.autograd.grad((y32, s32), (x32, w32), (dy.float(), dsummed.float()))
    torch.testing.assert_close(out["dx"].float(), dx, rtol=5e-2, atol=5e-2)
    torch.testing.assert_close(out["dr"].float(), dx, rtol=5e-2, atol=5e-2)
    torch.testing.assert_close(out["dw"].float(), dw, rtol=5e-2, atol=1.0)


def test_swiglu_forward(gpu_bench):
    """The MLP's activation: silu(gate) * up, over 4096 tokens of a 14336-wide MLP."""
    gate, up = _randn(BT // 2, MLP), _randn(BT // 2, MLP)
    out = {}

    def forward():
        out["y"] = LigerSiLUMulFunction.apply(gate, up)

    gpu_bench.run(forward, reads=(gate, up), writes=(gate.nbytes,), name="swiglu_fwd")
    expected = F.silu(gate.float()).to(BF16) * up
    torch.testing.assert_close(out["y"], expected, rtol=2e-2, atol=2e-2)


def _rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def test_rope_forward(gpu_bench):
    """Rotary embeddings on q and k as a model hands them over (`q_proj(x).view(B, T, H, D)
    .transpose(1, 2)`): Liger rotates them in place, so setup= puts them back each call."""
    heads, kv_heads, head_dim = 32, 8, 128
    q = _randn(1, BT, heads, head_dim).transpose(1, 2)
    k = _randn(1, BT, kv_heads, head_dim).transpose(1, 2)
    q0, k0 = q.clone(), k.clone()
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, device="cuda") / head_dim))
    angles = torch.arange(BT, device="cuda")[:, None].float() * inv_freq[None]
    embedded = torch.cat((angles, angles), dim=-1)[None]
    cos, sin = embedded.cos().to(BF16), embedded.sin().to(BF16)
    out = {}

    def restore():
        q.copy_(q0)
        k.copy_(k0)

    def forward():
        out["q"], out["k"] = liger_rotary_pos_emb(q, k, cos, sin)

    gpu_bench.run(forward, reads=(q, k, cos, sin), writes=(q, k), setup=restore, name="rope_fwd")
    for got, start in ((out["q"], q0), (out["k"], k0)):
        c, s = cos[:, None].float(), sin[:, None].float()
        expected = (start.float() * c + _rotate_half(start.float()) * s).to(BF16)
        torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-2)


def test_layer_norm_forward(gpu_bench):
    x = _randn(BT, HIDDEN)
    norm = LigerLayerNorm(HIDDEN, eps=EPS, bias=True).to("cuda", BF16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    out = {}

    def forward():
        out["y"] = norm(x)

    gpu_bench.run(
        forward,
        reads=(x, norm.weight, norm.bias),
        writes=(x.nbytes, 4 * BT),  # y, and a mean and an rstd per row (2 bytes each at least)
        name="layer_norm_fwd",
    )
    weight, bias = norm.weight.detach().float(), norm.bias.detach().float()
    expected = F.layer_norm(x.float(), (HIDDEN,), weight, bias, EPS).to(BF16)
    torch.testing.assert_close(out["y"], expected, rtol=2e-2, atol=2e-2)


def test_dyt_forward(gpu_bench):
    """Dynamic Tanh, the normalisation-free layer (gamma * tanh(alpha * x) + beta); its
    kernels autotune from Liger 0.8.0 on (the first call tries 18 configs)."""
    x = _randn(BT, HIDDEN)
    dyt = LigerDyT(HIDDEN, beta=True).to("cuda", BF16)
    with torch.no_grad():
        dyt.gamma.uniform_(0.5, 1.5)
        dyt.beta.uniform_(-0.5, 0.5)
    out = {}

    def forward():
        out["y"] = dyt(x)

    gpu_bench.run(forward, reads=(x, dyt.gamma, dyt.beta), writes=(x.nbytes,), name="dyt_fwd")
    alpha, gamma, beta = (p.detach().float() for p in (dyt.alpha, dyt.gamma, dyt.beta))
    expected = (gamma * torch.tanh(alpha * x.float()) + beta).to(BF16)
    torch.testing.assert_close(out["y"], expected, rtol=2e-2, atol=2e-2)


def test_jsd_forward(gpu_bench):
    """Distillation's generalised Jensen-Shannon divergence (beta 0.5) with labels: their
    count of non-ignored rows is read with `.item()`; the forward also makes the gradient."""
    rows = BT // 4
    student = _randn(rows, VOCAB).float().log_softmax(-1).to(BF16).requires_grad_()
    teacher = _randn(rows, VOCAB).float().log_softmax(-1).to(BF16)
    labels = torch.randint(0, VOCAB, (rows,), device="cuda")
    labels[::8] = -100
    jsd = LigerJSD(beta=0.5)
    out = {}

    def forward():
        out["loss"] = jsd(student, teacher, labels)

    gpu_bench.run(
        forward, reads=(student, teacher, labels), writes=(student.nbytes,), name="jsd_fwd"
    )
    log_q, log_p = student.detach().float(), teacher.float()
    q, p = log_q.exp(), log_p.exp()
    mixed = 0.5 * p + 0.5 * q
    per_row = (0.5 * p * log_p + 0.5 * q * log_q - mixed * mixed.log()).sum(-1)
    kept = labels != -100
    expected = per_row[kept].sum() / kept.sum()
    torch.testing.assert_close(out["loss"].float(), expected, rtol=2e-2, atol=1e-3)
