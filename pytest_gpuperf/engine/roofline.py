"""The roofline: a measurement's declared work against the roof that bounds it.

A kernel that declares the FLOPs it must do (`Work`) has an arithmetic intensity, FLOPs per
declared byte. The device's ridge point is its peak FLOP/s for the declared math type over
its peak bandwidth: below it the memory roof binds (the most the kernel can do is intensity x
peak bandwidth), above it the compute roof (the peak FLOP/s). `Roofline` holds what a
measurement achieved against both (Williams, Waterman and Patterson, "Roofline: an insightful
visual performance model for multicore architectures", CACM 52(4), 2009): the compute
efficiency (achieved FLOP/s over the type's peak, what `min_flops` floors) and the roofline
efficiency (achieved over the attainable at its intensity, what `min_roofline` floors). Below
the ridge the roofline efficiency equals the bandwidth efficiency, by construction.

A bf16 8192 x 8192 x 8192 matmul moves about 400 MB and does 1.1 TFLOP: at 75% of an
MI300X's bf16 roof it uses 7% of the peak bandwidth, and at 10% of the roof under 1%, so a
bandwidth floor cannot tell the fast kernel from the slow one; its compute efficiency can.
Nothing here measures or judges: the gate reads these numbers.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.runtime.compute_peaks import MATH_TYPES, math_problem, peak_flops_per_s

COMPUTE_BOUND, MEMORY_BOUND = "compute", "memory"


@dataclass(frozen=True)
class Work:
    """What a test declared a kernel must compute: at least `flops` operations (int8: integer
    operations) in `math`, against the device's dense peak for that type, `peak_flops_per_s`
    (runtime/compute_peaks.py), recorded with the measurement as its peak bandwidth is."""

    flops: int
    math: str
    peak_flops_per_s: float


@dataclass(frozen=True)
class Roofline:
    """A measurement against the roofline (derived: never stored apart from its Work).

    `intensity` is FLOPs per declared byte, `ridge` the device's peak FLOP/s over its peak
    bandwidth for this math type; `bound` which roof binds at this intensity ("compute" at or
    above the ridge, else "memory"); `attainable_flops_per_s` that roof's height there. The
    intervals follow from the time's (the slow end of the time gives the low end)."""

    flops: int
    math: str
    flops_per_s: float
    flops_per_s_ci: tuple[float, float]
    peak_flops_per_s: float
    peak_bps: float
    compute_efficiency: float
    compute_efficiency_ci: tuple[float, float]
    intensity: float
    ridge: float
    bound: str
    attainable_flops_per_s: float
    roofline_efficiency: float
    roofline_efficiency_ci: tuple[float, float]

    @property
    def tflops(self) -> float:
        return self.flops_per_s / 1e12


def attainable(intensity: float, peak_flops_per_s: float, peak_bps: float) -> float:
    """The roofline's height at `intensity` FLOP/byte: min(peak FLOP/s, intensity x peak B/s)."""
    return min(peak_flops_per_s, intensity * peak_bps)


def roofline_of(
    work: Work,
    bytes_moved: int,
    time_s: float,
    time_ci_s: tuple[float, float],
    peak_bps: float,
) -> Roofline:
    """Where one measurement (its declared bytes, median time and interval, the peak bandwidth
    it was measured against) stands against the roofline of its declared work."""
    low_s, high_s = time_ci_s
    achieved = work.flops / time_s
    achieved_ci = (work.flops / high_s, work.flops / low_s)
    peak = work.peak_flops_per_s
    intensity = work.flops / bytes_moved
    ridge = peak / peak_bps
    roof = attainable(intensity, peak, peak_bps)
    return Roofline(
        flops=work.flops,
        math=work.math,
        flops_per_s=achieved,
        flops_per_s_ci=achieved_ci,
        peak_flops_per_s=peak,
        peak_bps=peak_bps,
        compute_efficiency=achieved / peak,
        compute_efficiency_ci=(achieved_ci[0] / peak, achieved_ci[1] / peak),
        intensity=intensity,
        ridge=ridge,
        bound=COMPUTE_BOUND if intensity >= ridge else MEMORY_BOUND,
        attainable_flops_per_s=roof,
        roofline_efficiency=achieved / roof,
        roofline_efficiency_ci=(achieved_ci[0] / roof, achieved_ci[1] / roof),
    )


# -- declared work, checked ------------------------------------------------------------------


def flop_count(value: Any, where: str) -> int:
    """A FLOP count: a positive whole number (a NumPy integer too, imported by nobody here:
    loading the plugin stays free of NumPy). A float, even a whole one,
    is refused: a FLOP count computed in floating point may already have lost its last digits
    (2 * 8192**3 is exact, 2.0 * 8192.0**3 * 1.1 is not a count)."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()  # a NumPy scalar or 0-d array from a reduction
    if _boolean(value):
        raise ConfigError(f"{where} got {value!r}, not a FLOP count")
    if isinstance(value, numbers.Integral):
        if value <= 0:
            raise ConfigError(
                f"{where} must be a positive whole number of floating-point operations, got {value}"
            )
        return int(value)
    if isinstance(value, numbers.Real):
        whole = float(value).is_integer()
        hint = f" (use int({value!r}) if it is a count)" if whole else ""
        raise ConfigError(f"{where} got the float {value!r}; a FLOP count is a whole number{hint}")
    raise ConfigError(f"{where} takes a whole number of operations, got {type(value).__name__}")


def declared_work(
    flops: Any, math: Any, *, device_key: str, device_name: str, label: str
) -> Work | None:
    """The work `gpu_bench(..., flops=, math=)` declares for measurement `label` on the device,
    None when neither is given; ConfigError (one line naming the measurement) for a
    declaration that cannot be right: a count that is not a positive whole number, a math
    type that is unknown or one the device table has no peak for, one without the other."""
    if flops is None and math is None:
        return None
    if math is None:
        raise ConfigError(
            f"{label}: flops= needs math=, the type the kernel computes in "
            f"({', '.join(MATH_TYPES)}): its peak is the compute roof"
        )
    if flops is None:
        raise ConfigError(
            f"{label}: math={math!r} without flops=: declare the operations the kernel must do "
            "(flops=gpu_bench.gemm_flops(m, n, k) for a GEMM)"
        )
    count = flop_count(flops, f"{label}: flops=")
    problem = math_problem(math)
    if problem:
        raise ConfigError(f"{label}: math=: {problem}")
    try:
        peak = peak_flops_per_s(device_key, device_name, math)
    except ConfigError as unknown:
        raise ConfigError(f"{label}: math={math!r}: {unknown}") from None
    return Work(flops=count, math=math, peak_flops_per_s=peak)


# -- the common shapes -----------------------------------------------------------------------


def _boolean(value: Any) -> bool:
    """True and False (Python's or NumPy's) are integers to Python, never counts here."""
    return isinstance(value, bool) or type(value).__name__ in ("bool_", "bool")


def _dimension(value: Any, name: str, helper: str) -> int:
    if _boolean(value) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{helper}: {name} must be a whole number, got {value!r}")
    if value <= 0:
        raise ConfigError(f"{helper}: {name} must be positive, got {value}")
    return int(value)


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> int:
    """The FLOPs of C[m, n] = A[m, k] @ B[k, n], `batch` times: 2 m n k each (one multiply and
    one add per term), the count cuBLAS, hipBLASLt-bench and triton's matmul tutorial use."""
    helper = "gemm_flops"
    dims = [_dimension(v, name, helper) for v, name in ((m, "m"), (n, "n"), (k, "k"))]
    return 2 * dims[0] * dims[1] * dims[2] * _dimension(batch, "batch", helper)


def attention_flops(
    batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, *, causal: bool = False
) -> int:
    """The FLOPs of an attention forward pass: two matmuls, S = Q K^T and O = P V, each
    2 x batch x heads x seq_q x seq_k x head_dim; the softmax is not counted. Causal halves
    it, the convention of FlashAttention's benchmarks (the masked half is not computed)."""
    helper = "attention_flops"
    values = (batch, heads, seq_q, seq_k, head_dim)
    names = ("batch", "heads", "seq_q", "seq_k", "head_dim")
    b, h, sq, sk, d = (_dimension(v, n, helper) for v, n in zip(values, names, strict=True))
    if not isinstance(causal, bool):
        raise ConfigError(f"{helper}: causal must be True or False, got {causal!r}")
    total = 4 * b * h * sq * sk * d
    return total // 2 if causal else total


__all__ = [
    "COMPUTE_BOUND",
    "MEMORY_BOUND",
    "Roofline",
    "Work",
    "attainable",
    "attention_flops",
    "declared_work",
    "flop_count",
    "gemm_flops",
    "roofline_of",
]
