"""The kernels the benchmarks time, as source text, and the simulated device's models of
them (the simulated device runs no kernel code: a model computes the outputs, the file's
`gpuperf-sim: efficiency=` directive or the model's traffic sets the time).

vector_add_more (kernels/bench_variants.hip): c = a + b reading EXTRA_PERMILLE per mille more
bytes than it declares, with a code-object salt (GQ_SALT): the heads of gate_quality.py,
vs_pytest_benchmark.py and bisect_demo.py. scale: a user's y = a * x with an optional read of
`extra` for its first n_extra elements (real traffic the declared 8 n bytes do not count):
stored_lengths.py's kernel. The STREAM ops (copy, vector add, triad of kernels/): what
fidelity.py and sweep.py time at every size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lab import KERNELS_DIR


@dataclass(frozen=True)
class StreamOp:
    """A kernel of kernels/ that streams fp32 buffers: its file and symbol, the buffers it
    reads and writes (each once: its declared bytes), triad's scalar, and what it computes."""

    file: str
    symbol: str
    inputs: int
    outputs: int
    scalar: float | None = None

    @property
    def buffers(self) -> int:
        return self.inputs + self.outputs

    @property
    def bytes_per_element(self) -> int:
        return 4 * self.buffers

    def expected(self, inputs: Sequence[np.ndarray]) -> np.ndarray:
        if self.symbol == "copy":
            return inputs[0]
        if self.symbol == "triad":
            return inputs[0] + np.float32(self.scalar) * inputs[1]
        return inputs[0] + inputs[1]


STREAM_OPS = {
    "vector_add": StreamOp("vector_add.hip", "vector_add", inputs=2, outputs=1),
    "copy": StreamOp("stream.hip", "copy", inputs=1, outputs=1),
    "triad": StreamOp("stream.hip", "triad", inputs=2, outputs=1, scalar=3.0),
}

KERNEL = "vector_add_more"
BLOCK = 256
MAX_PERMILLE = 333  # vector_add_more reads at most one extra float per element
# The simulated device's stand-in for the extra bytes: SIM_EFFICIENCY / (1 + EXTRA_PERMILLE /
# 1000), where SIM_EFFICIENCY is the reference 71.85% for vector add on MI300X.
SIM_EFFICIENCY = 0.7185
BEGIN, END = "// gate-quality kernel: begin", "// gate-quality kernel: end"


def kernel_block() -> str:
    """vector_add_more and its comments, as kernels/bench_variants.hip holds it."""
    text = (KERNELS_DIR / "bench_variants.hip").read_text()
    return text[text.index(BEGIN) : text.index(END) + len(END)] + "\n"


def sim_efficiency(permille: int) -> float:
    """The simulated device's stand-in for reading `permille` per mille more bytes."""
    return round(SIM_EFFICIENCY / (1.0 + permille / 1000.0), 6)


def kernel_source(permille: int = 0, salt: int = 1) -> str:
    """A kernel file: vector_add_more reading `permille` per mille more bytes than it declares,
    with code-object salt `salt`, and the simulated device's directive for the same."""
    if not 0 <= permille <= MAX_PERMILLE:
        raise ValueError(f"EXTRA_PERMILLE must be in [0, {MAX_PERMILLE}], not {permille}")
    declaration = f"GPUPERF_KERNEL void {KERNEL}("
    directive = f"// gpuperf-sim: efficiency={sim_efficiency(permille)}\n"
    block = kernel_block().replace(declaration, directive + declaration, 1)
    return (
        '#include "gpuperf.h"\n'
        f"#define EXTRA_PERMILLE {permille}\n"
        f"#define GQ_SALT {salt}\n\n" + block
    )


def extra_floats(elements: int, permille: int) -> int:
    """The floats of `extra` vector_add_more reads (its own integer arithmetic)."""
    return 3 * elements * permille // 1000


def vector_add_more_model(folder: str = "") -> str:
    """A project's conftest.py: the simulated device's model of vector_add_more for every
    .hip file in `folder`; $BENCH_TEST_ORDER, where set, shuffles the tests with that seed
    (so that a kernel's place in a process cannot bias what is scored)."""
    return f'''\
"""Written by a bench script: the simulated device's model of vector_add_more (on a GPU it
is not used), and the tests in the order $BENCH_TEST_ORDER seeds."""

import os
import random
from pathlib import Path

from pytest_gpuperf import simulate


def _vector_add_more(args, launch):
    a, b, c, extra, n = args
    count = min(n, launch.threads_x)
    c[:count] = a[:count] + b[:count]


for _path in sorted((Path(__file__).parent / {folder!r}).glob("*.hip")):
    simulate.register(_path, "vector_add_more", _vector_add_more)


def pytest_collection_modifyitems(items):
    order = os.environ.get("BENCH_TEST_ORDER")
    if order:
        random.Random(int(order)).shuffle(items)
'''


SCALE_KERNEL = """\
#include "gpuperf.h"

// y = a * x, plus extra[i] for i < n_extra (zeros: y is unchanged): real traffic that the
// declared bytes (8 n) do not count.
// gpuperf-sim: efficiency=0.72
GPUPERF_KERNEL void scale(const float* x, float* y, const float* extra, float a, int n,
                          int n_extra) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a * x[i];
        if (i < n_extra) v += extra[i];
        y[i] = v;
    }
}
"""

SCALE_MODEL = '''\
"""Written by a bench script: the simulated device's model of scale()."""

from pytest_gpuperf import simulate


def _traffic(args):
    x, y, extra, a, n, n_extra = args
    return 8 * int(n) + 4 * int(n_extra)


@simulate.model("scale.hip", "scale", traffic_bytes=_traffic)
def scale(args, launch):
    x, y, extra, a, n, n_extra = args
    y[:n] = a * x[:n]
'''
