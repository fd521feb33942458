"""PyTorch's own ops, as model code calls them in eager mode (a Llama-style model: 8192 tokens,
hidden 4096, MLP 14336, bf16).

What they do that a kernel written for the plugin does not: boolean-mask indexing and
`torch.unique` size their outputs from the data (a host synchronisation each call); the
attention is a library kernel picked at run time; the SwiGLU allocates its intermediate and
its output each call; the embedding-gradient accumulation works in place on the test's own
tensor; the projection forks a copy onto a side stream and joins it back, so one call is
kernels on two streams.

Each op is a small function of this module, as a model's code would hold it: bench/real_ops.py
edits two of them for its A/B (torch itself cannot be vendored at an older release), one to do
1.5x the work and one into an equivalent spelling.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install torch)")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

pytestmark = pytest.mark.gpu

BT, HIDDEN, MLP, VOCAB = 8192, 4096, 14336, 32000
BF16 = torch.bfloat16


def real_tokens(hidden, keep):
    return hidden[keep]


def token_counts(ids):
    return torch.unique(ids, return_counts=True)


def causal_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def swiglu(gate, up):
    return F.silu(gate) * up


def accumulate_embedding_grad(weight_grad, ids, grad):
    weight_grad.index_add_(0, ids, grad)


def project_while_prefetching(x, weight, next_weight, staged, side):
    """This layer's projection on the current stream while the next layer's weight is
    copied on a side stream; the current stream waits for the copy before it goes on."""
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        staged.copy_(next_weight)
    y = x @ weight
    torch.cuda.current_stream().wait_stream(side)
    return y


def _randn(*shape, dtype=BF16):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def test_boolean_mask_indexing(gpu_bench):
    """The hidden states of the tokens that are not padding (`hidden[mask]`)."""
    hidden = _randn(BT, HIDDEN)
    keep = torch.rand(BT, device="cuda") > 0.25
    kept = int(keep.sum())
    out = {}

    def select():
        out["h"] = real_tokens(hidden, keep)

    gpu_bench.run(
        select, reads=(kept * HIDDEN * 2, keep), writes=(kept * HIDDEN * 2,), name="mask_index"
    )
    assert torch.equal(out["h"], hidden[keep.nonzero().squeeze(1)])


def test_unique_token_counts(gpu_bench):
    """Token frequencies of a batch of 128 sequences of 8192 tokens."""
    ids = torch.randint(0, VOCAB, (128 * BT,), device="cuda")
    out = {}

    def count():
        out["values"], out["counts"] = token_counts(ids)

    gpu_bench.run(count, reads=(ids,), writes=(16 * VOCAB,), name="unique")
    histogram = torch.bincount(ids, minlength=VOCAB)
    present = histogram.nonzero().squeeze(1)
    assert torch.equal(out["values"], present)
    assert torch.equal(out["counts"], histogram[present])


def test_causal_attention(gpu_bench):
    """scaled_dot_product_attention: 4 sequences of 2048 tokens, 32 heads of 128."""
    q, k, v = (_randn(4, 32, 2048, 128) for _ in range(3))
    out = {}

    def attend():
        out["o"] = causal_attention(q, k, v)

    gpu_bench.run(attend, reads=(q, k, v), writes=(q.nbytes,), name="sdpa_causal")
    scores = (q.float() @ k.float().transpose(-1, -2)) / 128**0.5
    future = torch.ones(2048, 2048, device="cuda", dtype=torch.bool).triu(1)
    expected = scores.masked_fill(future, float("-inf")).softmax(-1) @ v.float()
    torch.testing.assert_close(out["o"].float(), expected, rtol=2e-2, atol=2e-2)


def test_swiglu_allocating(gpu_bench):
    """Eager SwiGLU: silu's output and the product are allocated anew each call."""
    gate, up = _randn(BT // 2, MLP), _randn(BT // 2, MLP)
    out = {}

    def forward():
        out["y"] = swiglu(gate, up)

    gpu_bench.run(forward, reads=(gate, up), writes=(gate.nbytes,), name="swiglu_eager")
    expected = (F.silu(gate.float()) * up.float()).to(BF16)
    torch.testing.assert_close(out["y"], expected, rtol=2e-2, atol=2e-2)


def test_embedding_grad_index_add_in_place(gpu_bench):
    """The embedding's weight gradient: the output gradient of each token added into its
    row, in place; setup= zeroes the gradient before every call, as a step's zero_grad."""
    weight_grad = torch.zeros(VOCAB, HIDDEN, device="cuda")
    ids = torch.randint(0, VOCAB, (BT,), device="cuda")
    grad = _randn(BT, HIDDEN, dtype=torch.float32)
    rows = ids.unique().numel() * HIDDEN * 4  # each touched row read and written once

    gpu_bench.run(
        lambda: accumulate_embedding_grad(weight_grad, ids, grad),
        reads=(grad, ids, rows),
        writes=(rows,),
        setup=weight_grad.zero_,
        name="index_add_",
    )
    expected = torch.zeros_like(weight_grad).index_add_(0, ids, grad)
    torch.testing.assert_close(weight_grad, expected, rtol=1e-5, atol=1e-5)


def test_projection_with_side_stream_prefetch(gpu_bench):
    """Kernels on two streams in one call: a matmul here, a weight copy on a side stream."""
    x, weight = _randn(BT, HIDDEN), _randn(HIDDEN, HIDDEN) / HIDDEN**0.5
    next_weight, staged = _randn(HIDDEN, MLP), torch.empty(HIDDEN, MLP, device="cuda", dtype=BF16)
    side = torch.cuda.Stream()
    out = {}

    def forward():
        out["y"] = project_while_prefetching(x, weight, next_weight, staged, side)

    gpu_bench.run(
        forward,
        reads=(x, weight, next_weight),
        writes=(x.nbytes, staged.nbytes),
        name="matmul_side_copy",
    )
    torch.testing.assert_close(out["y"].float(), x.float() @ weight.float(), rtol=2e-2, atol=2e-2)
    assert torch.equal(staged, next_weight)
