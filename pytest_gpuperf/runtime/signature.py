"""Kernel signatures read from the source, and launch arguments checked against them.

Both hiprtc and NVRTC load kernels by name without telling the host their parameter types,
so we read `__global__` declarations from the source. That lets every backend reject a wrong
argument count, or a host array where a device pointer belongs, *before* launching, and
convert a plain Python number to the C type the kernel declares.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_gpuperf.errors import ArgumentError
from pytest_gpuperf.runtime.device_buffer import DeviceBuffer

# C scalar types a kernel parameter may have, with the NumPy dtype we pass them as.
SCALAR_DTYPES: dict[str, np.dtype] = {
    "bool": np.dtype(np.bool_),
    "char": np.dtype(np.int8),
    "signed char": np.dtype(np.int8),
    "unsigned char": np.dtype(np.uint8),
    "int8_t": np.dtype(np.int8),
    "uint8_t": np.dtype(np.uint8),
    "short": np.dtype(np.int16),
    "unsigned short": np.dtype(np.uint16),
    "int16_t": np.dtype(np.int16),
    "uint16_t": np.dtype(np.uint16),
    "int": np.dtype(np.int32),
    "unsigned": np.dtype(np.uint32),
    "unsigned int": np.dtype(np.uint32),
    "int32_t": np.dtype(np.int32),
    "uint32_t": np.dtype(np.uint32),
    "long": np.dtype(np.int64),
    "long long": np.dtype(np.int64),
    "unsigned long": np.dtype(np.uint64),
    "unsigned long long": np.dtype(np.uint64),
    "int64_t": np.dtype(np.int64),
    "uint64_t": np.dtype(np.uint64),
    "size_t": np.dtype(np.uint64),
    "ptrdiff_t": np.dtype(np.int64),
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
    "__half": np.dtype(np.float16),
    "half": np.dtype(np.float16),
}

_CTYPES = {
    np.dtype(np.bool_): ctypes.c_bool,
    np.dtype(np.int8): ctypes.c_int8,
    np.dtype(np.uint8): ctypes.c_uint8,
    np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.uint16): ctypes.c_uint16,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.float16): ctypes.c_uint16,  # passed as its bit pattern
}

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct"}

_KERNEL_RE = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^)]*)\)",
    re.S,
)
_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter: its name, C type as written, and whether it is a pointer."""

    name: str
    ctype: str
    is_pointer: bool

    @property
    def dtype(self) -> np.dtype | None:
        """The NumPy dtype of a scalar parameter, or of a pointer's element (None: unknown)."""
        return SCALAR_DTYPES.get(self.base_type)

    @property
    def base_type(self) -> str:
        words = [w for w in self.ctype.replace("*", " ").split() if w not in _QUALIFIERS]
        return " ".join(words)


def _parse_param(text: str, index: int) -> KernelParam:
    text = " ".join(text.split())
    is_pointer = "*" in text or "[" in text
    match = re.match(r"(?P<type>.*?)(?P<name>[A-Za-z_]\w*)\s*(\[\s*\])?$", text)
    if not match or not match.group("type").strip():
        return KernelParam(name=f"arg{index}", ctype=text, is_pointer=is_pointer)
    ctype = match.group("type").strip()
    if match.group(3):
        ctype += "*"
    return KernelParam(name=match.group("name"), ctype=ctype, is_pointer=is_pointer)


def parse_signatures(source: str) -> dict[str, tuple[KernelParam, ...]]:
    """All `__global__` kernels in `source` (macros like GPUPERF_KERNEL already expanded

    by the caller where they are used) mapped to their parameters, in order.
    """
    clean = _COMMENT_RE.sub(" ", source)
    clean = clean.replace("GPUPERF_KERNEL", "__global__")
    signatures: dict[str, tuple[KernelParam, ...]] = {}
    for match in _KERNEL_RE.finditer(clean):
        raw = match.group("params").strip()
        items = [p for p in raw.split(",") if p.strip()] if raw and raw != "void" else []
        signatures[match.group("name")] = tuple(_parse_param(p, i) for i, p in enumerate(items))
    return signatures


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"a host NumPy array (shape {value.shape}, {value.dtype})"
    return f"{type(value).__name__} {value!r}"[:80]


def check_arguments(kernel_name: str, params: Sequence[KernelParam], args: Sequence[Any]) -> list:
    """Validate `args` against the signature and return them as C-typed values.

    Device buffers become `ctypes.c_void_p` of their address; numbers become the ctypes
    scalar of the declared C type. Raises `ArgumentError` (nothing has been launched).
    """
    if len(args) != len(params):
        listing = ", ".join(f"{p.ctype} {p.name}" for p in params) or "no parameters"
        raise ArgumentError(
            f"kernel {kernel_name!r} takes {len(params)} arguments ({listing}); got {len(args)}"
        )
    packed: list = []
    for position, (param, value) in enumerate(zip(params, args, strict=True)):
        where = f"argument {position} ({param.ctype} {param.name}) of kernel {kernel_name!r}"
        if param.is_pointer:
            if isinstance(value, DeviceBuffer):
                if value.freed:
                    raise ArgumentError(f"{where}: the device buffer was already freed")
                packed.append(ctypes.c_void_p(value.ptr))
            elif isinstance(value, np.ndarray):
                raise ArgumentError(
                    f"{where} needs a device buffer, got {_describe(value)}; "
                    "copy it to the device first (gpu_bench.to_device(array) or "
                    "backend.to_device(array))"
                )
            else:
                raise ArgumentError(f"{where} needs a device buffer, got {_describe(value)}")
            continue
        dtype = param.dtype
        if dtype is None:
            raise ArgumentError(f"{where}: unsupported parameter type {param.ctype!r}")
        if isinstance(value, (np.ndarray, DeviceBuffer, str, bytes)) or not np.isscalar(value):
            raise ArgumentError(f"{where} needs a number, got {_describe(value)}")
        number: Any = value  # a Python or NumPy real number, as checked above
        if dtype.kind in "iu" and not float(number).is_integer():
            raise ArgumentError(f"{where} needs an integer, got {value!r}")
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            if not info.min <= int(number) <= info.max:
                raise ArgumentError(f"{where}: {value!r} does not fit in {param.ctype}")
        scalar = np.array(value).astype(dtype)
        if dtype == np.float16:
            packed.append(ctypes.c_uint16(int(scalar.view(np.uint16))))
        else:
            packed.append(_CTYPES[dtype](scalar.item()))
    return packed


def pack_arguments(values: Sequence[Any]) -> bytes:
    """Lay ctypes values out as the C ABI does for a kernel's parameter buffer.

    Used with the `extra` launch parameter (HIP_LAUNCH_PARAM_BUFFER_POINTER /
    CU_LAUNCH_PARAM_BUFFER_POINTER). No padding after the last argument: CUDA rejects a
    buffer longer than the kernel's parameters (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, seen
    on an H100 through the HIP shim), and hip-python's own packing does not pad either.
    """
    blob = bytearray()
    for value in values:
        align = ctypes.alignment(value)
        blob.extend(b"\0" * ((-len(blob)) % align))
        blob.extend(bytes(value))
    return bytes(blob)
