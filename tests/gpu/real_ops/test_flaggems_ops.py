"""FlagGems' Triton ops, called directly (`flag_gems.softmax(x, -1)`), never through
`flag_gems.enable()`, which would patch every torch op of the process, the references
included. Shapes of a Llama-style model: 8192 tokens, hidden 4096, MLP 14336, a vocabulary
of 32000, bf16.

What they do that a kernel written for the plugin does not: FlagGems tunes its kernels with
its own autotuner, whose results it keeps in an SQLite file (hence its SQLAlchemy
dependency); `masked_select` sizes its output from a count on the device, a host
synchronisation each call; every op allocates its output each call.

The library is imported by its package name only: in bench/real_ops.py's scratch repository
`pythonpath = vendor` makes that the vendored release, elsewhere the installed one.
"""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install torch)")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)", allow_module_level=True)
if importlib.util.find_spec("flag_gems") is None:  # present but broken: an error, not a skip
    pytest.skip("needs FlagGems (pip install flag-gems)", allow_module_level=True)

import flag_gems  # noqa: E402

pytestmark = pytest.mark.gpu

BT, HIDDEN, MLP, VOCAB = 8192, 4096, 14336, 32000
BF16 = torch.bfloat16


def _randn(*shape, dtype=BF16):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def test_softmax_over_the_vocabulary(gpu_bench):
    """Sampling's (or distillation's) probabilities over the vocabulary, 4096 rows."""
    logits = _randn(BT // 2, VOCAB)
    out = {}

    def forward():
        out["p"] = flag_gems.softmax(logits, -1)

    gpu_bench.run(forward, reads=(logits,), writes=(logits.nbytes,), name="softmax")
    expected = torch.softmax(logits.float(), -1).to(BF16)
    torch.testing.assert_close(out["p"], expected, rtol=2e-2, atol=1e-7)


def test_layer_norm_forward(gpu_bench):
    x = _randn(BT, HIDDEN)
    weight = torch.empty(HIDDEN, device="cuda", dtype=BF16).uniform_(0.5, 1.5)
    bias = torch.empty(HIDDEN, device="cuda", dtype=BF16).uniform_(-0.5, 0.5)
    out = {}

    def forward():
        out["y"], out["mean"], out["rstd"] = flag_gems.layer_norm(x, [HIDDEN], weight, bias, 1e-5)

    gpu_bench.run(
        forward,
        reads=(x, weight, bias),
        writes=(x.nbytes, 4 * BT),  # y, and a mean and an rstd per row (2 bytes each at least)
        name="layer_norm_fwd",
    )
    expected = torch.nn.functional.layer_norm(
        x.float(), (HIDDEN,), weight.float(), bias.float(), 1e-5
    ).to(BF16)
    torch.testing.assert_close(out["y"], expected, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(out["mean"].float(), x.float().mean(-1), rtol=2e-2, atol=2e-3)


def test_bias_gradient_reduction(gpu_bench):
    """A linear layer's bias gradient: the output gradient summed over the tokens (a
    reduction down the columns of an 8192 x 14336 matrix)."""
    grad_output = _randn(BT, MLP)
    out = {}

    def reduce():
        out["db"] = flag_gems.sum_dim(grad_output, [0])

    gpu_bench.run(reduce, reads=(grad_output,), writes=(2 * MLP,), name="sum_dim0")
    expected = grad_output.float().sum(0)
    torch.testing.assert_close(out["db"].float(), expected, rtol=2e-2, atol=1.0)


def test_masked_select_of_real_tokens(gpu_bench):
    """The hidden states of the tokens that are not padding: the output's size is a count
    made on the device, which the host reads before it allocates (a synchronisation)."""
    hidden = _randn(BT, HIDDEN)
    keep = (torch.rand(BT, 1, device="cuda") > 0.25).expand(BT, HIDDEN).contiguous()
    kept = int(keep.sum())
    out = {}

    def select():
        out["h"] = flag_gems.masked_select(hidden, keep)

    gpu_bench.run(select, reads=(hidden, keep), writes=(2 * kept,), name="masked_select")
    assert torch.equal(out["h"], torch.masked_select(hidden, keep))
