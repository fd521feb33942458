"""Kernel signatures parsed from the shipped sources, and launch arguments checked against them."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from pytest_gpuperf.errors import ArgumentError
from pytest_gpuperf.runtime.base import DeviceBuffer
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.signature import check_arguments, pack_arguments, parse_signatures

# The fixed kernel names of /work/prompts/kernels.md, file by file.
SHIPPED = {
    "vector_add.hip": ["vector_add", "vector_add_bypass", "vector_add_nt", "vector_add_vec4"],
    "stream.hip": ["copy", "scale", "triad", "copy_vec4", "triad_vec4"],
    "dot.hip": ["dot", "dot_finish"],
    "rmsnorm.hip": ["rmsnorm"],
    "silu_and_mul.hip": ["silu_and_mul"],
    "rope.hip": ["rope"],
    "gpuperf_internal.hip": ["gpuperf_flush", "gpuperf_spin", "gpuperf_copy_ref"],
}
KERNEL_FILES = sorted(KERNELS_DIR.glob("*.hip"))


def signatures_of(file: str) -> dict:
    return parse_signatures((KERNELS_DIR / file).read_text())


def described(params) -> list[str]:
    return [f"{p.ctype} {p.name}" for p in params]


@pytest.mark.parametrize("file", sorted(SHIPPED))
def test_each_shipped_file_declares_exactly_its_kernels(file):
    assert list(signatures_of(file)) == SHIPPED[file]


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.name)
def test_every_kernel_file_parses_with_known_parameter_types(path):
    signatures = parse_signatures(path.read_text())
    assert signatures, f"{path.name} declares no GPUPERF_KERNEL"
    for name, params in signatures.items():
        for param in params:
            # scalars need a dtype to be passed; pointers may point at vector types (uint4)
            assert param.is_pointer or param.dtype is not None, (name, param)


def test_parameters_keep_their_declared_types_and_order():
    vector = signatures_of("vector_add.hip")
    expected = ["const float* a", "const float* b", "float* c", "int n"]
    for name in SHIPPED["vector_add.hip"]:
        assert described(vector[name]) == expected
    assert described(signatures_of("stream.hip")["triad"]) == [
        "const float* a", "const float* b", "float* c", "float s", "int n",
    ]  # fmt: skip
    assert described(signatures_of("rope.hip")["rope"]) == [
        "const float* x", "const float* cos", "const float* sin", "float* y",
        "int tokens", "int heads", "int head_dim",
    ]  # fmt: skip
    internal = signatures_of("gpuperf_internal.hip")
    assert described(internal["gpuperf_flush"]) == [
        "const uint4* src", "unsigned long long count", "unsigned int* sink",
    ]  # fmt: skip
    assert internal["gpuperf_spin"][0].dtype == np.uint64


def test_comments_and_non_kernels_are_ignored():
    source = """
        // GPUPERF_KERNEL void commented_out(int n) {}
        /* GPUPERF_KERNEL void also_commented(int n) {} */
        __device__ float helper(float v) { return v; }
        GPUPERF_KERNEL void real(const float* __restrict__ x, unsigned int count) {}
    """
    signatures = parse_signatures(source)
    assert list(signatures) == ["real"]
    assert described(signatures["real"]) == ["const float* __restrict__ x", "unsigned int count"]


# -- check_arguments ---------------------------------------------------------------------

PARAMS = signatures_of("stream.hip")[
    "triad"
]  # (const float* a, const float* b, float* c, float s, int n)


def buffer(ptr: int = 0x10000) -> DeviceBuffer:
    return DeviceBuffer(backend=None, ptr=ptr, nbytes=64)  # type: ignore[arg-type]


def test_good_arguments_become_ctypes_of_the_declared_types():
    packed = check_arguments("triad", PARAMS, [buffer(0x100), buffer(0x200), buffer(0x300), 2, 7])
    assert [type(v) for v in packed] == [ctypes.c_void_p] * 3 + [ctypes.c_float, ctypes.c_int32]
    assert [packed[0].value, packed[3].value, packed[4].value] == [0x100, 2.0, 7]
    assert check_arguments("triad", PARAMS, [buffer()] * 3 + [0.5, np.int64(3)])[4].value == 3


def test_wrong_argument_count_lists_the_signature():
    with pytest.raises(ArgumentError) as failure:
        check_arguments("triad", PARAMS, [buffer(), buffer(), buffer(), 2.0])
    message = str(failure.value)
    assert "'triad' takes 5 arguments" in message and "got 4" in message
    assert "float s" in message and "int n" in message


def test_host_array_where_a_device_buffer_belongs_says_copy_it_first():
    host = np.ones(16, dtype=np.float32)
    with pytest.raises(ArgumentError) as failure:
        check_arguments("triad", PARAMS, [host, buffer(), buffer(), 2.0, 16])
    message = str(failure.value)
    assert "argument 0 (const float* a)" in message and "host NumPy array" in message
    assert "to_device" in message


def test_number_where_a_device_buffer_belongs():
    with pytest.raises(ArgumentError, match=r"argument 1 .* needs a device buffer, got int"):
        check_arguments("triad", PARAMS, [buffer(), 12345, buffer(), 2.0, 16])


def test_freed_buffer_is_rejected():
    gone = buffer()
    gone.freed = True
    with pytest.raises(ArgumentError, match="already freed"):
        check_arguments("triad", PARAMS, [buffer(), gone, buffer(), 2.0, 16])


@pytest.mark.parametrize("value", [2.5, "16", None, np.ones(2)])
def test_non_integer_for_int_is_rejected(value):
    with pytest.raises(ArgumentError, match=r"argument 4 \(int n\)"):
        check_arguments("triad", PARAMS, [buffer(), buffer(), buffer(), 2.0, value])


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_int_overflow_is_rejected(value):
    with pytest.raises(ArgumentError, match=f"{value} does not fit in int"):
        check_arguments("triad", PARAMS, [buffer(), buffer(), buffer(), 2.0, value])


def test_negative_count_for_unsigned_is_rejected():
    spin = signatures_of("gpuperf_internal.hip")["gpuperf_spin"]
    assert check_arguments("gpuperf_spin", spin, [2**64 - 1])[0].value == 2**64 - 1
    with pytest.raises(ArgumentError, match="does not fit in unsigned long long"):
        check_arguments("gpuperf_spin", spin, [-1])


def test_pack_arguments_follows_the_c_abi():
    packed = check_arguments("triad", PARAMS, [buffer(1), buffer(2), buffer(3), 1.0, 5])
    blob = pack_arguments(packed)
    assert len(blob) == 3 * 8 + 4 + 4
    assert int.from_bytes(blob[16:24], "little") == 3
    assert np.frombuffer(blob[24:28], np.float32)[0] == 1.0
    assert int.from_bytes(blob[28:32], "little") == 5


def test_pack_arguments_has_no_trailing_padding():
    """CUDA rejects a parameter buffer longer than the kernel's parameters."""
    params = signatures_of("vector_add.hip")["vector_add"]
    blob = pack_arguments(
        check_arguments("vector_add", params, [buffer(1), buffer(2), buffer(3), 7])
    )
    assert len(blob) == 3 * 8 + 4
