"""bf16 and fp16 kernels through every compiler the plugin drives without a GPU: clang-19
for gfx942 with the static gate's own hip_bf16.h and hip_fp16.h (no ROCm), NVRTC for sm_90
with CUDA's cuda_bf16.h and cuda_fp16.h behind the same include names; the code facts of a
bf16 RMSNorm; and the headers' conversions and arithmetic, as clang-19 evaluates them for
gfx942, against integer arithmetic on the bits (tests/half_precision.py)."""

from __future__ import annotations

import random
import re

import pytest

from pytest_gpuperf.errors import CompileError
from pytest_gpuperf.explain.code.code_facts import amd_facts, nvidia_facts
from pytest_gpuperf.explain.code.ptxas import PTXAS_VERBOSE
from pytest_gpuperf.gate.static import compile_static, kernel_asm
from pytest_gpuperf.runtime import cuda_compiler
from pytest_gpuperf.runtime.compile import compile_source, source_request
from tests.half_precision import (
    HALF_KERNELS,
    bf16_bits,
    bits_float,
    conversion_inputs,
    float_bits,
    fp16_bits,
    is_nan_bits,
)
from tests.toolchains import need

pytestmark = pytest.mark.compile

KERNELS = ("rmsnorm_bf16", "silu_and_mul_bf16x2", "axpy_half2")


@pytest.fixture
def source(tmp_path, monkeypatch):
    """The kernels as a file, compiled into a private cache (really compiled)."""
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "half_kernels.hip"
    path.write_text(HALF_KERNELS)
    return path


def test_the_kernels_build_for_gfx942_with_the_plugins_headers(clang19, source):
    build = compile_static(source, "gfx942", clang=clang19)
    rmsnorm = amd_facts(build, "rmsnorm_bf16", block_threads=256)
    # bf16 elements are 16-bit loads and stores; the float sum stays in registers
    assert dict(rmsnorm.global_loads or ())["b16"] >= 2
    assert dict(rmsnorm.global_stores or ()) == {"b16": 1}
    assert rmsnorm.local_bytes == 0 and rmsnorm.occupancy == 1.0 and rmsnorm.registers
    pairs = amd_facts(build, "silu_and_mul_bf16x2", block_threads=256)
    assert dict(pairs.global_loads or ()) == {"b32": 2}
    assert dict(pairs.global_stores or ()) == {"b32": 1}
    code = "\n".join(kernel_asm(build.asm, "rmsnorm_bf16").instructions())
    # float -> bf16 rounds to nearest even (+0x7fff and the kept bit), NaN kept quiet, as
    # clang compiles ROCm's own header: never a plain truncation of the float
    assert "v_add3_u32" in code and "0x7fff" in code and "v_cmp_u_f32" in code
    # half pairs use gfx9's packed half instructions
    packed = kernel_asm(build.asm, "axpy_half2").instructions()
    assert any(line.startswith("v_pk_fma_f16") for line in packed)


def test_a_name_the_headers_do_not_declare_fails_naming_it(clang19, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "cache"))
    source = HALF_KERNELS.replace("__hfma2(", "__hfma2_relu(")
    with pytest.raises(CompileError) as failure:
        compile_static(source, "gfx942", clang=clang19, name="relu.hip")
    assert "use of undeclared identifier '__hfma2_relu'" in failure.value.first_error


def test_the_kernels_build_for_sm_90_through_the_cuda_backends_path(source):
    need("nvrtc", "cuda-headers")
    request = source_request("nvrtc", source, None, "sm_90", PTXAS_VERBOSE)
    result = compile_source(request, use_cache=False)
    for kernel in KERNELS:
        assert kernel.encode() + b"\0" in result.binary, kernel
    facts = nvidia_facts(
        result.binary, result.log, "rmsnorm_bf16", "sm_90",
        toolchain=result.compiler_version, block_threads=256,
    )  # fmt: skip
    assert facts.registers and facts.spill_bytes == 0


def test_without_cudas_headers_nvrtc_says_where_to_get_them(source, monkeypatch):
    need("nvrtc")
    monkeypatch.setattr(cuda_compiler, "cuda_headers_dir", lambda: None)
    request = source_request("nvrtc", source, None, "sm_90")
    with pytest.raises(cuda_compiler.CompilerFailed) as failure:
        cuda_compiler.compile(request)
    message = str(failure.value)
    assert 'could not open source file "cuda_bf16.h"' in failure.value.log
    assert "pip install nvidia-cuda-runtime" in message and "CUDA_HOME" in message


# -- the conversions and arithmetic, evaluated by clang-19 for gfx942 ------------------------

CHECKS = """\
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>

constexpr int COUNT = {count};
constexpr unsigned int INPUTS[COUNT] = {{{inputs}}};
constexpr unsigned short BF16[COUNT] = {{{bf16}}};
constexpr unsigned short FP16[COUNT] = {{{fp16}}};  // 0xFFFF: a NaN, payload not compared

// The index of the first input whose conversions disagree with the expected bits, else -1.
constexpr int first_wrong_conversion() {{
    for (int i = 0; i < COUNT; ++i) {{
        const float f = __builtin_bit_cast(float, INPUTS[i]);
        if (__bfloat16_as_ushort(__float2bfloat16(f)) != BF16[i]) return i;
        const __hip_bfloat16 b = __ushort_as_bfloat16(BF16[i]);
        if (!__hisnan(b) && __builtin_bit_cast(unsigned int, __bfloat162float(b)) !=
                                (unsigned int)BF16[i] << 16) return i;
        const __half h = __float2half(f);
        if (FP16[i] == 0xFFFF ? !__hisnan(h) : __half_as_ushort(h) != FP16[i]) return i;
        if (FP16[i] != 0xFFFF && __half2float(h) != (float)__builtin_bit_cast(_Float16, FP16[i]))
            return i;
    }}
    return -1;
}}
static_assert(first_wrong_conversion() == -1, "a conversion rounds differently");

constexpr int PAIRS = {pairs};
constexpr unsigned short A[PAIRS] = {{{a}}};
constexpr unsigned short B[PAIRS] = {{{b}}};
constexpr unsigned short C[PAIRS] = {{{c}}};
constexpr unsigned short D[PAIRS] = {{{d}}};
constexpr unsigned short BF16_SUM[PAIRS] = {{{bf16_sum}}};
constexpr unsigned short BF16_PRODUCT[PAIRS] = {{{bf16_product}}};
constexpr unsigned short FP16_SUM[PAIRS] = {{{fp16_sum}}};
constexpr unsigned short FP16_PRODUCT[PAIRS] = {{{fp16_product}}};

// The index of the first pair whose sum or product (as bf16 and as fp16) is not the exact
// result rounded once to nearest even, else -1.
constexpr int first_wrong_arithmetic() {{
    for (int i = 0; i < PAIRS; ++i) {{
        const __hip_bfloat16 x = __ushort_as_bfloat16(A[i]), y = __ushort_as_bfloat16(B[i]);
        if (__bfloat16_as_ushort(__hadd(x, y)) != BF16_SUM[i]) return i;
        if (__bfloat16_as_ushort(x * y) != BF16_PRODUCT[i]) return i;
        const __half p = __ushort_as_half(C[i]), q = __ushort_as_half(D[i]);
        if (__half_as_ushort(p + q) != FP16_SUM[i]) return i;
        if (__half_as_ushort(__hmul(p, q)) != FP16_PRODUCT[i]) return i;
    }}
    return -1;
}}
static_assert(first_wrong_arithmetic() == -1, "an operation rounds differently");
"""


def _hex(values) -> str:
    return ", ".join(f"0x{v:X}" for v in values)


def _operands(count: int, exponents: tuple[int, int], shift: int) -> tuple[list, list]:
    """`count` pairs of 16-bit floats (`shift` mantissa bits, an exponent field within
    `exponents`) whose exponents differ by at most 6: a float32 holds their exact sum and
    product, so the reference rounds once, as the device does."""
    rng = random.Random(5858 + shift)
    a, b = [], []
    low, high = exponents
    for _ in range(count):
        exponent = rng.randint(low, high)
        other = min(max(exponent + rng.randint(-6, 6), low), high)
        for out, field in ((a, exponent), (b, other)):
            sign = rng.getrandbits(1) << 15
            out.append(sign | (field << shift) | rng.getrandbits(shift))
    return a, b


def _half(bits: int) -> float:
    """The value of IEEE half `bits` (finite, normal or subnormal)."""
    sign = -1.0 if bits & 0x8000 else 1.0
    exponent, mantissa = (bits >> 10) & 0x1F, bits & 0x3FF
    if exponent == 0:
        return sign * mantissa * 2.0**-24
    return sign * (1024 + mantissa) * 2.0 ** (exponent - 25)


def test_the_conversions_and_arithmetic_round_as_integer_arithmetic_says(clang19, tmp_path):
    """2,000 float32 patterns (ties to even and odd for both formats, their neighbours,
    float16 subnormals and overflow, infinities, NaNs, random ones) and 500 operand pairs a
    format, checked at compile time: clang-19 evaluates the very functions of the headers for
    gfx942, and the expected bits come from integer arithmetic here."""
    inputs = conversion_inputs(2000)
    bf16 = [bf16_bits(bits) for bits in inputs]
    fp16 = [0xFFFF if is_nan_bits(bits) else fp16_bits(bits) for bits in inputs]
    a, b = _operands(500, (100, 150), shift=7)  # bf16: 8 exponent bits, 7 mantissa bits
    c, d = _operands(500, (1, 29), shift=10)  # fp16: 5 exponent bits, 10 mantissa bits
    bf16_value = [bits_float(x << 16) for x in a], [bits_float(y << 16) for y in b]
    half_value = [_half(x) for x in c], [_half(y) for y in d]
    source = CHECKS.format(
        count=len(inputs), inputs=_hex(inputs), bf16=_hex(bf16), fp16=_hex(fp16), pairs=len(a),
        a=_hex(a), b=_hex(b), c=_hex(c), d=_hex(d),
        bf16_sum=_hex(bf16_bits(float_bits(x + y)) for x, y in zip(*bf16_value, strict=True)),
        bf16_product=_hex(bf16_bits(float_bits(x * y)) for x, y in zip(*bf16_value, strict=True)),
        fp16_sum=_hex(fp16_bits(float_bits(x + y)) for x, y in zip(*half_value, strict=True)),
        fp16_product=_hex(fp16_bits(float_bits(x * y)) for x, y in zip(*half_value, strict=True)),
    )  # fmt: skip
    try:
        compile_static(source, "gfx942", clang=clang19, name="rounding.hip", use_cache=False)
        return
    except CompileError as failure:
        said, log = failure.first_error, failure.log
    index = re.search(r"evaluates to '(\d+) == -1'", log)
    pytest.fail(f"{said} (entry #{index[1] if index else '?'} of its table)", pytrace=False)


NAN_RULE = r"""
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>

// The index of the first case whose __hmax or __hmin disagrees, else -1.
constexpr int first_wrong_nan_rule() {
    const __half n = __ushort_as_half(0x7E01), m = __ushort_as_half(0xFE02);
    const __half one = __ushort_as_half(0x3C00), two = __ushort_as_half(0x4000);
    const __hip_bfloat16 bn = __ushort_as_bfloat16(0x7FC1), bm = __ushort_as_bfloat16(0xFFC2);
    const __hip_bfloat16 b1 = __ushort_as_bfloat16(0x3F80), b2 = __ushort_as_bfloat16(0x4000);
    const bool right[] = {
        __half_as_ushort(__hmax(n, one)) == 0x3C00,
        __half_as_ushort(__hmax(one, n)) == 0x3C00,
        __half_as_ushort(__hmin(n, two)) == 0x4000,
        __half_as_ushort(__hmin(two, m)) == 0x4000,
        __half_as_ushort(__hmax(n, m)) == 0x7FFF,
        __half_as_ushort(__hmin(n, m)) == 0x7FFF,
        __half_as_ushort(__hmax(one, two)) == 0x4000,
        __half_as_ushort(__hmin(one, two)) == 0x3C00,
        __bfloat16_as_ushort(__hmax(bn, b1)) == 0x3F80,
        __bfloat16_as_ushort(__hmin(b2, bm)) == 0x4000,
        __bfloat16_as_ushort(__hmax(bn, bm)) == 0x7FFF,
        __bfloat16_as_ushort(__hmin(bn, bm)) == 0x7FFF,
        __bfloat16_as_ushort(__hmax(b1, b2)) == 0x4000,
        __bfloat16_as_ushort(__hmin(b1, b2)) == 0x3F80,
    };
    for (int i = 0; i < (int)(sizeof(right) / sizeof(right[0])); ++i)
        if (!right[i]) return i;
    return -1;
}
static_assert(first_wrong_nan_rule() == -1, "__hmax or __hmin treats a NaN differently");
"""


def test_hmax_and_hmin_return_the_other_operand_of_a_nan_and_a_canonical_nan_of_two(
    clang19, tmp_path, monkeypatch
):
    """ROCm's rule for __hmax and __hmin, on both types, evaluated by clang-19 for gfx942:
    one NaN operand gives the other operand, two give the canonical NaN 0x7FFF."""
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "cache"))
    compile_static(NAN_RULE, "gfx942", clang=clang19, name="nan_rule.hip", use_cache=False)


def test_the_reference_is_itself_right(tmp_path):
    """The integer reference agrees with NumPy's float16 conversion (IEEE's rounding) on
    every non-NaN input, and bf16_bits with the definition on a hand-checked few."""
    np = pytest.importorskip("numpy")
    inputs = conversion_inputs(2000)
    values = np.array(inputs, dtype=np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        halves = values.astype(np.float16).view(np.uint16)
    for bits, half in zip(inputs, halves.tolist(), strict=True):
        if not is_nan_bits(bits):
            assert fp16_bits(bits) == half, hex(bits)
    assert bf16_bits(0x3F808000) == 0x3F80  # a tie, kept bit even: down
    assert bf16_bits(0x3F818000) == 0x3F82  # a tie, kept bit odd: up
    assert bf16_bits(0x7F7FFFFF) == 0x7F80  # the largest float rounds to infinity
    assert bf16_bits(0x7F800001) == 0x7FC0  # a signalling NaN becomes quiet
