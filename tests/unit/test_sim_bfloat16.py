"""The simulated device's bfloat16 helpers (simulate/bfloat16.py), the host side of a bf16
kernel's model: they round as the integer reference does (tests/half_precision.py), which
tests/compile checks the device headers against too, and a bf16 pointer reaches a model as
its bit patterns."""

from __future__ import annotations

import numpy as np

from pytest_gpuperf import simulate
from pytest_gpuperf.simulate.bfloat16 import from_bfloat16, to_bfloat16
from pytest_gpuperf.simulate.device import open as open_sim
from tests.half_precision import bf16_bits, conversion_inputs


def test_to_bfloat16_rounds_as_the_integer_reference():
    inputs = conversion_inputs(4000)
    got = to_bfloat16(np.array(inputs, dtype=np.uint32).view(np.float32))
    assert got.dtype == np.uint16
    wrong = [hex(b) for b, g in zip(inputs, got.tolist(), strict=True) if bf16_bits(b) != g]
    assert not wrong, wrong[:5]


def test_from_bfloat16_is_exact_and_inverts_to_bfloat16():
    every = np.arange(1 << 16, dtype=np.uint16)
    values = from_bfloat16(every)
    assert values.dtype == np.float32
    assert (values.view(np.uint32) == every.astype(np.uint32) << 16).all()
    finite_or_inf = ~np.isnan(values)
    assert (to_bfloat16(values)[finite_or_inf] == every[finite_or_inf]).all()
    assert np.isnan(from_bfloat16(to_bfloat16(values[~finite_or_inf]))).all()


def test_float64_inputs_are_taken_as_float32_first():
    # 1 + 2^-8 + 2^-30 is above the tie between 1 and 1 + 2^-7 in float64, but float32 holds
    # only the tie, which goes to even (1.0): as __float2bfloat16(float) sees it
    assert to_bfloat16(np.array([1 + 2.0**-8 + 2.0**-30])).tolist() == [0x3F80]


def test_a_bf16_pointer_reaches_a_model_as_bit_patterns(tmp_path):
    source = tmp_path / "scale_bf16.hip"
    source.write_text(
        '#include "gpuperf.h"\n#include <hip/hip_bf16.h>\n'
        "GPUPERF_KERNEL void scale_bf16(const __hip_bfloat16* x, __hip_bfloat16* y, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = __float2bfloat16(__bfloat162float(x[i]) * 3.0f);\n"
        "}\n"
    )
    seen = []

    def scale(args, launch):
        x, y, n = args
        seen.append((x.dtype, y.dtype))
        y[:n] = to_bfloat16(from_bfloat16(x[:n]) * np.float32(3.0))

    backend = open_sim(device="mi300x", seed=1)
    try:
        with simulate.scoped():
            simulate.register(source, "scale_bf16", scale)
            kernel = backend.compile(source).kernel("scale_bf16")
            x = to_bfloat16(np.linspace(-2, 2, 256, dtype=np.float32))
            dx, dy = backend.to_device(x), backend.alloc(x.nbytes)
            backend.launch(kernel, 1, 256, (dx, dy, 256))
            got = from_bfloat16(dy.download(np.uint16))
    finally:
        backend.close()
    assert seen == [(np.dtype(np.uint16), np.dtype(np.uint16))]
    np.testing.assert_array_equal(got, from_bfloat16(to_bfloat16(from_bfloat16(x) * 3.0)))
