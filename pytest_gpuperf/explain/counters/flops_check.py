"""The FLOPs a test declares, checked against the operations one launch's counters counted.

Compute efficiency is declared FLOPs / time / peak: a declaration 2x off (a GEMM declared as
m n k instead of 2 m n k) gives an efficiency 2x off and a meaningless floor. The profiler
counts what ran: the SASS floating-point instructions per thread (an FMA two FLOPs) and the
tensor path's operations on NVIDIA (a bf16 1024^3 matmul counts 2 x 1024^3), the VALU's and
the MFMA's on AMD. A gap beyond BOUND is reported, as the declared bytes' check does
(bytes_check.py). Integer work (int8) is not among the counters asked for: not checked,
and said so. A kernel may legitimately count more than the minimum (a causal attention
computing the masked half, padding to the tile): the line says which way the gap goes, and
what it does to the efficiency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.explain.counters.bytes_check import plain_check

BOUND = 0.05
WITHIN, OVER, UNDER, NOT_CHECKED = "within", "over", "under", "not-checked"
# Types whose work runs on the tensor (matrix) path: without its counter the vector counters
# alone would call any such kernel's declaration too high.
TENSOR_TYPES = ("tf32", "bf16", "fp16", "fp8")


def _flop_amount(value: float) -> str:
    """'1,099.5 GFLOP' (three significant digits in GFLOP or TFLOP)."""
    if value >= 1e12:
        return f"{value / 1e12:,.2f} TFLOP"
    return f"{value / 1e9:,.2f} GFLOP"


@dataclass(frozen=True)
class FlopsCheck:
    """One launch's counted operations against the declaration; `tensor_flops` the part the
    tensor (matrix) path did (None: not counted), `math` the declared type."""

    declared_flops: int
    counted_flops: float | None
    math: str
    tensor_flops: float | None = None

    @property
    def gap(self) -> float | None:
        """(counted - declared) / declared: -0.5 is half the operations declared."""
        if self.counted_flops is None:
            return None
        return (self.counted_flops - self.declared_flops) / self.declared_flops

    @property
    def outcome(self) -> str:
        gap = self.gap
        untensored = self.math in TENSOR_TYPES and self.tensor_flops is None
        if gap is None or self.math == "int8" or untensored:
            return NOT_CHECKED
        if gap > BOUND:
            return OVER
        if gap < -BOUND:
            return UNDER
        return WITHIN

    @property
    def warns(self) -> bool:
        return self.outcome in (OVER, UNDER)

    def line(self) -> str:
        outcome = self.outcome
        if outcome == NOT_CHECKED:
            if self.math == "int8":
                why = "the counters asked for count floating-point operations, not int8 ones"
            elif self.counted_flops is not None and self.tensor_flops is None:
                why = f"the profiler gave no tensor-path counter for {self.math} on this GPU"
            else:
                why = "the profiler gave no floating-point counter for this launch"
            return f"declared FLOPs not checked: {why}"
        assert self.counted_flops is not None and self.gap is not None
        tensor = ""
        if self.tensor_flops is not None:
            tensor = f" ({_flop_amount(self.tensor_flops)} of it on the tensor path)"
        counted = (
            f"{_flop_amount(self.counted_flops)} counted{tensor} against "
            f"{_flop_amount(self.declared_flops)} declared ({self.gap:+.1%})"
        )
        if outcome == WITHIN:
            return f"declared FLOPs match the counters: {counted}, within {BOUND:.0%}"
        if outcome == OVER:
            return (
                f"declared FLOPs look too low: {counted}: the kernel does more operations than "
                "the test declares (padding, a masked half computed anyway, or a declaration "
                "short of 2 per multiply-add), so its compute efficiency is understated"
            )
        return (
            f"declared FLOPs look too high: {counted}, beyond {BOUND:.0%}: the compute "
            "efficiency is overstated; declare the operations the kernel does (2 m n k for a "
            "GEMM: gpu_bench.gemm_flops)"
        )

    def plain(self) -> dict[str, Any]:
        return plain_check(self)


__all__ = ["BOUND", "FlopsCheck"]
