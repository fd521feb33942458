"""Which points does the processes part measure? Its sizes and its points (one kernel file
each), and what HEAD does to each."""

from __future__ import annotations

from dataclasses import dataclass

LONG_ELEMENTS = 32 << 20  # the reference 32M fp32 vector add: 384 MiB moved
MID_ELEMENTS = 6 << 20  # 72 MiB moved: ~30 us cold on an H100
SHORT_ELEMENTS = 1 << 20  # 12 MiB moved: ~8 us cold on an H100
SIZES = ("long", "mid", "short")

AA, AA_OTHER, SLOWER = "A/A", "A/A'", "slower"


@dataclass(frozen=True)
class Point:
    """One kernel file of the throwaway project: its size and what HEAD does to it."""

    name: str
    size: str  # "long" | "mid" | "short"
    kind: str  # AA | AA_OTHER | SLOWER
    slowdown: float = 0.0  # the kernel-time slowdown HEAD is calibrated to

    @property
    def label(self) -> str:
        if self.kind == AA:
            return f"{self.size} A/A (identical code)"
        if self.kind == AA_OTHER:
            return f"{self.size} A/A' (other code, same work)"
        return f"{self.size} +{self.slowdown:.0%} time"


POINTS = (
    *(Point(f"{size}_same", size, AA) for size in SIZES),
    *(Point(f"{size}_equiv", size, AA_OTHER) for size in SIZES),
    *(Point(f"{size}_slow1", size, SLOWER, 0.01) for size in SIZES),
    *(Point(f"{size}_slow2", size, SLOWER, 0.02) for size in SIZES),
    Point("long_slow3", "long", SLOWER, 0.03),
)
POINT = {point.name: point for point in POINTS}
