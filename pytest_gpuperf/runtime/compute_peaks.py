"""Dense peak compute per device and math type: the compute roof of the roofline.

A kernel that declares its FLOPs (`gpu_bench(..., flops=, math=)`) is judged against the
datasheet's peak for the type it computes in, as a memory-bound one is against the peak
bandwidth (devices.py). Every figure here is **dense**: vendors print the tensor (matrix)
peaks with 2:4 structured sparsity beside, or instead of, the dense ones, and a dense GEMM can
never reach a sparsity figure, so where a datasheet gives only the sparse figure it is halved
here and the entry says so. Each device cites the data sheet its row comes from.

What a type's peak means: the most the device does in that type by any path: for `fp64` the
FP64 Tensor Core / matrix figure where there is one (what a DGEMM reaches), for `fp32` the
vector (CUDA core) figure on NVIDIA, where fp32 has no tensor path (`tf32` is its own type),
and the FP32 matrix (or packed) figure on AMD; `int8` is in operations per second. A type a
device has no figure for is absent: asked for, it is one clear error ("no fp8 peak known for
NVIDIA A100 SXM4 80GB"), never a guess. The per-GCD rows of the MI200 parts are half of the
two-GCD card's figures, as their bandwidth is (each GCD is one HIP device).
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_gpuperf.errors import ConfigError

# The math types a test may declare, in the order messages list them.
MATH_TYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")
T = 1e12  # tera: the data sheets' unit

# -- the data sheets -------------------------------------------------------------------------

_MI300X = (
    "AMD Instinct MI300X data sheet: FP64 matrix 163.4, FP32 163.4, TF32 653.7, FP16 and BF16 "
    "1307.4, FP8 2614.9 TFLOPS, INT8 2614.9 TOPS (dense; the sparsity figures are twice these)"
)
_MI325X = (
    "AMD Instinct MI325X data sheet: FP64 matrix 163.4, FP32 163.4, TF32 653.7, FP16 and BF16 "
    "1307.4, FP8 2614.9 TFLOPS, INT8 2614.9 TOPS (dense)"
)
_MI300A = (
    "AMD Instinct MI300A data sheet: FP64 matrix 122.6, FP32 122.6, TF32 490.3, FP16 and BF16 "
    "980.6, FP8 1961.2 TFLOPS, INT8 1961.2 TOPS (dense)"
)
_MI250X = (
    "AMD Instinct MI250X data sheet, halved for one GCD: FP64 and FP32 matrix 95.7, FP16 and "
    "BF16 383, INT8 383 TOPS for both GCDs (no TF32 or FP8)"
)
_MI250 = (
    "AMD Instinct MI250 data sheet, halved for one GCD: FP64 and FP32 matrix 90.5, FP16 and "
    "BF16 362.1, INT8 362.1 TOPS for both GCDs (no TF32 or FP8)"
)
_MI210 = (
    "AMD Instinct MI210 data sheet: FP64 and FP32 matrix 45.3, FP16 and BF16 181.0 TFLOPS, "
    "INT8 181.0 TOPS (no TF32 or FP8)"
)
_H100_SXM = (
    "NVIDIA H100 Tensor Core GPU data sheet (SXM): FP64 Tensor Core 67, FP32 67 TFLOPS; TF32 "
    "989, BF16 and FP16 1,979, FP8 3,958 TFLOPS and INT8 3,958 TOPS with sparsity, halved here"
)
_H100_PCIE = (
    "NVIDIA H100 Tensor Core GPU data sheet (PCIe): FP64 Tensor Core 51, FP32 51 TFLOPS; TF32 "
    "756, BF16 and FP16 1,513, FP8 3,026 TFLOPS and INT8 3,026 TOPS with sparsity, halved here"
)
_H200 = (
    "NVIDIA H200 Tensor Core GPU data sheet (SXM): FP64 Tensor Core 67, FP32 67 TFLOPS; TF32 "
    "989, BF16 and FP16 1,979, FP8 3,958 TFLOPS and INT8 3,958 TOPS with sparsity, halved here"
)
_A100 = (
    "NVIDIA A100 Tensor Core GPU data sheet (SXM and PCIe alike): FP64 Tensor Core 19.5, FP32 "
    "19.5, TF32 156, BF16 and FP16 312 TFLOPS, INT8 624 TOPS (dense; no FP8)"
)
_B200 = (
    "NVIDIA HGX B200 specifications, one Blackwell GPU: FP64 and FP64 Tensor Core 37, FP32 75 "
    "TFLOPS; TF32 2.2, FP16 and BF16 4.5, FP8 9 PFLOPS and INT8 9 POPS with sparsity, halved "
    "here"
)


def _amd_cdna3(fp64: float, tf32: float, bf16: float, fp8: float) -> dict[str, float]:
    """The CDNA3 parts' types: FP32 runs at the FP64 matrix rate, INT8 at the FP8 rate."""
    return {
        "fp64": fp64 * T,
        "fp32": fp64 * T,
        "tf32": tf32 * T,
        "bf16": bf16 * T,
        "fp16": bf16 * T,
        "fp8": fp8 * T,
        "int8": fp8 * T,
    }


def _amd_cdna2(fp64: float, bf16: float) -> dict[str, float]:
    """The CDNA2 parts' types (no TF32, no FP8): FP32 matrix at the FP64 rate, INT8 at FP16's."""
    return {
        "fp64": fp64 * T,
        "fp32": fp64 * T,
        "bf16": bf16 * T,
        "fp16": bf16 * T,
        "int8": bf16 * T,
    }


def _nvidia(fp64: float, fp32: float, tf32: float, bf16: float, fp8: float | None, int8: float):
    """An NVIDIA part's dense figures (fp8 None: the part has no FP8)."""
    peaks = {
        "fp64": fp64 * T,
        "fp32": fp32 * T,
        "tf32": tf32 * T,
        "bf16": bf16 * T,
        "fp16": bf16 * T,
        "int8": int8 * T,
    }
    if fp8 is not None:
        peaks["fp8"] = fp8 * T
    return peaks


# device key (devices.KNOWN_DEVICES): (peak FLOP/s by math type, the source)
COMPUTE_PEAKS: dict[str, tuple[dict[str, float], str]] = {
    "mi300x": (_amd_cdna3(163.4, 653.7, 1307.4, 2614.9), _MI300X),
    "mi325x": (_amd_cdna3(163.4, 653.7, 1307.4, 2614.9), _MI325X),
    "mi300a": (_amd_cdna3(122.6, 490.3, 980.6, 1961.2), _MI300A),
    "mi250x": (_amd_cdna2(95.7 / 2, 383.0 / 2), _MI250X),
    "mi250": (_amd_cdna2(90.5 / 2, 362.1 / 2), _MI250),
    "mi210": (_amd_cdna2(45.3, 181.0), _MI210),
    "h100-sxm": (_nvidia(67, 67, 989 / 2, 1979 / 2, 3958 / 2, 3958 / 2), _H100_SXM),
    "h100-pcie": (_nvidia(51, 51, 756 / 2, 1513 / 2, 3026 / 2, 3026 / 2), _H100_PCIE),
    "h200": (_nvidia(67, 67, 989 / 2, 1979 / 2, 3958 / 2, 3958 / 2), _H200),
    "a100-sxm-80gb": (_nvidia(19.5, 19.5, 156, 312, None, 624), _A100),
    "a100-sxm-40gb": (_nvidia(19.5, 19.5, 156, 312, None, 624), _A100),
    "a100-pcie-80gb": (_nvidia(19.5, 19.5, 156, 312, None, 624), _A100),
    "a100-pcie-40gb": (_nvidia(19.5, 19.5, 156, 312, None, 624), _A100),
    "b200": (_nvidia(37, 75, 2200 / 2, 4500 / 2, 9000 / 2, 9000 / 2), _B200),
}


def math_problem(raw: object) -> str:
    """The one sentence every unknown math type gets, wherever it was given ("" when known)."""
    if isinstance(raw, str) and raw in MATH_TYPES:
        return ""
    return f"unknown math type {raw!r}; valid types: {', '.join(MATH_TYPES)}"


def peaks_of(device_key: str) -> Mapping[str, float]:
    """The device's dense peaks by math type (empty for a device the table has none for)."""
    found = COMPUTE_PEAKS.get(device_key)
    return found[0] if found else {}


def source_of(device_key: str) -> str:
    """Where the device's compute peaks come from ("" when the table has none)."""
    found = COMPUTE_PEAKS.get(device_key)
    return found[1] if found else ""


def peak_flops_per_s(device_key: str, device_name: str, math: str) -> float:
    """The dense peak of `math` on the device; ConfigError for an unknown type, or a type the
    table has no figure for on this device (stated, never guessed)."""
    problem = math_problem(math)
    if problem:
        raise ConfigError(problem)
    peaks = peaks_of(device_key)
    if math not in peaks:
        known = ", ".join(t for t in MATH_TYPES if t in peaks)
        where = (
            f"the device table has {known} there"
            if known
            else "the device table has no compute peaks for it"
        )
        raise ConfigError(
            f"no {math} peak known for {device_name} ({device_key}): {where}; declare the "
            "type the kernel computes in, or run on a device whose data sheet gives that peak "
            "(--gpuperf-device=KEY names one)"
        )
    return peaks[math]


__all__ = [
    "COMPUTE_PEAKS",
    "MATH_TYPES",
    "math_problem",
    "peak_flops_per_s",
    "peaks_of",
    "source_of",
]
