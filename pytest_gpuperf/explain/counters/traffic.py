"""What the vendor's profiler counted for one launch of a kernel, and head against base in words.

Counters are far steadier than times (Nsight Compute's DRAM byte counts of a 256 MiB copy
agreed to 0.01% over launches on an H200 while the times moved by 2%), so they can say *what*
changed when a time moved by 1%. A quantity is called unchanged within `STEADY` of its base.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Relative change below which a counter is "unchanged" (ten times the launch-to-launch spread
# of DRAM byte counts measured on an H200: 0.01%).
STEADY = 0.001
# Written bytes still in L2 when a kernel ends are not counted, and how many are varies between
# launches: an H100 wrote 59.1-59.3 MB and 61.7 MB of one 64 MiB output in launches of the same
# code (2026-11-27). A change of written bytes within this share of the L2 is not called one.
WRITE_SLACK_OF_L2 = 0.1
WRITE_SLACK_WORDS = "within what the L2 still holds at the kernel's end"
# What a counter's move is ranked against when the DRAM bytes did not move (the first line
# names the largest): byte and instruction counts against STEADY, a register count in steps of
# 5% (allocation granularity makes smaller moves common and harmless), achieved occupancy
# against one point of the warp slots (its launch-to-launch spread under ncu).
REGISTER_STEP = 0.05
# A callable's sides each run on the buffers their own test body made, and where those landed
# moves the L2's byte count with the same code: four unchanged Triton adds (H200, 2026-11-28)
# read -0.9% to -1.8% against base. Their L2 bytes are unchanged within this.
CALLABLE_L2_STEADY = 0.02
OCCUPANCY_NOISE = 0.01


@dataclass(frozen=True)
class Traffic:
    """One profiled launch. None: the profiler did not report that quantity (rocprofv3 has
    no achieved occupancy, for instance)."""

    kernel: str
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    l2_bytes: float | None = None
    registers_per_thread: int | None = None
    achieved_occupancy: float | None = None  # a fraction of the SM's (CU's) warp slots
    instructions: float | None = None  # warp (wavefront) instructions executed
    local_bytes: float | None = None  # local-memory traffic: register spills (NVIDIA)
    l2_hits: float | None = None  # L2 (TCC) requests that hit, and missed (AMD)
    l2_misses: float | None = None
    scalar_registers: int | None = None  # SGPRs (AMD)
    scratch_per_thread_bytes: int | None = None  # scratch a work-item was given (AMD)
    time_s: float | None = None  # under the profiler's clock and cache control: not the gate's
    shared_bytes_per_block: int | None = None  # static + dynamic shared memory (NVIDIA)
    # A compute-bound kernel's counters (asked for a test that declared its FLOPs): the
    # tensor (matrix) pipe's utilisation, a fraction of its peak while the SM (CU) was
    # active, and which instruction family kept it busiest; the FP32 FMA pipe's; the
    # floating-point operations counted (vector and tensor) and the tensor part of them.
    tensor_pipe: float | None = None
    tensor_pipe_kind: str = ""
    fma_pipe: float | None = None
    flops: float | None = None
    tensor_flops: float | None = None

    @property
    def dram_bytes(self) -> float | None:
        if self.dram_read_bytes is None or self.dram_write_bytes is None:
            return None
        return self.dram_read_bytes + self.dram_write_bytes

    def plain(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def megabytes(value: float) -> str:
    return f"{value / 1e6:.1f} MB"


def _change(head: float, base: float) -> float:
    return (head - base) / base if base else (0.0 if head == base else float("inf"))


def _moved(head: float, base: float, slack_bytes: float = 0.0) -> str:
    """'unchanged (247.0 MB)' or '+1.5% (268.4 -> 272.5 MB)'; a move within `slack_bytes`
    is unchanged too, with both numbers."""
    change = _change(head, base)
    if abs(change) < STEADY:
        return f"unchanged ({megabytes(head)})"
    if abs(head - base) <= slack_bytes:
        return f"unchanged ({base / 1e6:.1f} -> {megabytes(head)}: {WRITE_SLACK_WORDS})"
    return f"{change:+.1%} ({base / 1e6:.1f} -> {megabytes(head)})"


def traffic_lines(
    head: Traffic,
    base: Traffic | None,
    *,
    l2_bytes: int = 0,
    l2_steady: float = STEADY,
    compute: bool = False,
) -> list[str]:
    """Head against base, one line a quantity that moved, the DRAM bytes first when they moved
    (else the counter that moved most against its noise, "... with the same DRAM bytes"):
    'head moved +1.5% DRAM bytes: read +1.5% (268.4 -> 272.5 MB), write unchanged (247.0 MB)'
    (the bytes that moved beyond the noise of each, over base's read and written bytes; a
    device with `l2_bytes` of L2 leaves some of the written bytes uncounted; L2 bytes are
    unchanged within `l2_steady`). Without a base, what head moved. `compute` (the test
    declared its FLOPs): the pipes' utilisation and the FLOPs counted lead (compute_lines)."""
    if base is None:
        return [_head_alone(head), *([_compute_alone(head)] if compute else [])]
    lines = compute_lines(head, base) if compute else []
    lead = len(lines)
    h_read, b_read = head.dram_read_bytes, base.dram_read_bytes
    h_write, b_write = head.dram_write_bytes, base.dram_write_bytes
    if h_read is not None and b_read is not None and h_write is not None and b_write is not None:
        slack = WRITE_SLACK_OF_L2 * l2_bytes
        moved_read = h_read - b_read if abs(_change(h_read, b_read)) >= STEADY else 0.0
        moved_write = h_write - b_write
        if abs(_change(h_write, b_write)) < STEADY or abs(moved_write) <= slack:
            moved_write = 0.0
        total = (moved_read + moved_write) / (b_read + b_write) if b_read + b_write else 0.0
        verb = "the same" if moved_read == moved_write == 0.0 else f"{total:+.1%}"
        lines.append(
            f"head moved {verb} DRAM bytes: read {_moved(h_read, b_read)}, "
            f"write {_moved(h_write, b_write, slack)}"
        )
    others: list[tuple[float, str]] = []  # (how far it moved against its noise, the line)
    h_l2, b_l2 = head.l2_bytes, base.l2_bytes
    if h_l2 is not None and b_l2 is not None and abs(_change(h_l2, b_l2)) >= l2_steady:
        others.append((abs(_change(h_l2, b_l2)) / l2_steady, f"L2 bytes {_moved(h_l2, b_l2)}"))
    h_reg, b_reg = head.registers_per_thread, base.registers_per_thread
    if h_reg is not None and b_reg is not None and h_reg != b_reg:
        others.append((abs(_change(h_reg, b_reg)) / REGISTER_STEP, f"registers {b_reg} -> {h_reg}"))
    h_shared, b_shared = head.shared_bytes_per_block, base.shared_bytes_per_block
    if h_shared is not None and b_shared is not None and h_shared != b_shared:
        score = abs(_change(h_shared, b_shared)) / REGISTER_STEP
        others.append((score, f"shared memory per block {b_shared:,} -> {h_shared:,} bytes"))
    h_occ, b_occ = head.achieved_occupancy, base.achieved_occupancy
    if h_occ is not None and b_occ is not None and abs(h_occ - b_occ) >= OCCUPANCY_NOISE:
        score = abs(h_occ - b_occ) / OCCUPANCY_NOISE
        others.append((score, f"achieved occupancy {b_occ:.0%} -> {h_occ:.0%}"))
    h_inst, b_inst = head.instructions, base.instructions
    if h_inst is not None and b_inst is not None and abs(_change(h_inst, b_inst)) >= STEADY:
        change = _change(h_inst, b_inst)
        others.append(
            (
                abs(change) / STEADY,
                f"instructions executed {change:+.1%} ({b_inst:,.0f} -> {h_inst:,.0f})",
            )
        )
    h_local, b_local = head.local_bytes, base.local_bytes
    if h_local is not None and b_local is not None and h_local != b_local:
        others.append(
            (
                abs(_change(h_local, b_local)) / STEADY,
                f"local-memory (spill) bytes {megabytes(b_local)} -> {megabytes(h_local)}",
            )
        )
    lines += [line for _, line in others]
    first = lines[lead] if len(lines) > lead else ""
    if len(lines) == 1 and lead == 0 and "the same" in first:
        lines[lead] += "; no counter moved: the time changed without the traffic"
    elif "the same DRAM bytes" in first and others:
        # The bytes did not move: what moved most against its own noise leads (issue: an
        # `instructions executed +381%` listed fourth of five lines under unchanged bytes).
        _, moved = max(others, key=lambda pair: pair[0])
        lines.remove(moved)
        lines.insert(lead, f"{moved} with the same DRAM bytes")
    return lines


# A pipe's utilisation moves by a point or so between profiled launches of the same code (as
# achieved occupancy does): a move of less is not called one.
PIPE_NOISE = 0.01


def _flop_words(value: float) -> str:
    """'1.10 PFLOP', '17.2 GFLOP', '0 FLOP'."""
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} FLOP"


def compute_lines(head: Traffic, base: Traffic) -> list[str]:
    """What a compute-bound kernel's counters say, head against base, the pipe that moved most
    first: 'tensor pipe utilisation fell 78% -> 2% (wgmma (GMMA))', 'FP32 FMA pipe
    utilisation rose 3% -> 71%', 'tensor-path FLOPs 1.1 TFLOP -> 0 FLOP', and the FLOP/s
    the counted FLOPs give under the profiler."""
    moves: list[tuple[float, str]] = []
    busier = head if (head.tensor_pipe or 0.0) >= (base.tensor_pipe or 0.0) else base
    for name, h, b, kind in (
        ("tensor pipe", head.tensor_pipe, base.tensor_pipe, busier.tensor_pipe_kind),
        ("FP32 FMA pipe", head.fma_pipe, base.fma_pipe, ""),
    ):
        if h is None or b is None or abs(h - b) < PIPE_NOISE:
            continue
        verb = "fell" if h < b else "rose"
        detail = f" ({kind})" if kind else ""  # the instruction family of the busier side
        moves.append((abs(h - b), f"{name} utilisation {verb} {b:.0%} -> {h:.0%}{detail}"))
    lines = [line for _, line in sorted(moves, key=lambda pair: -pair[0])]
    h_tensor, b_tensor = head.tensor_flops, base.tensor_flops
    if h_tensor is not None and b_tensor is not None and abs(_change(h_tensor, b_tensor)) >= STEADY:
        lines.append(f"tensor-path FLOPs {_flop_words(b_tensor)} -> {_flop_words(h_tensor)}")
    rates = [
        t.flops / t.time_s
        for t in (base, head)
        if t.flops is not None and t.time_s is not None and t.time_s > 0
    ]
    if len(rates) == 2:
        lines.append(
            f"counted FLOPs at the profiler's times: {rates[0] / 1e12:.1f} -> "
            f"{rates[1] / 1e12:.1f} TFLOP/s"
        )
    return lines


def _compute_alone(head: Traffic) -> str:
    """A compute-bound launch's counters without a base to compare with."""
    parts = []
    if head.tensor_pipe is not None:
        kind = f" ({head.tensor_pipe_kind})" if head.tensor_pipe_kind else ""
        parts.append(f"tensor pipe utilisation {head.tensor_pipe:.0%}{kind}")
    if head.fma_pipe is not None:
        parts.append(f"FP32 FMA pipe utilisation {head.fma_pipe:.0%}")
    if head.flops is not None:
        parts.append(f"{_flop_words(head.flops)} counted")
    return "compute: " + ("; ".join(parts) if parts else "no compute counter the profiler gave")


def _head_alone(head: Traffic) -> str:
    parts = []
    if head.dram_read_bytes is not None and head.dram_write_bytes is not None:
        parts.append(
            f"DRAM read {megabytes(head.dram_read_bytes)}, "
            f"written {megabytes(head.dram_write_bytes)}"
        )
    if head.registers_per_thread is not None:
        parts.append(f"{head.registers_per_thread} registers")
    if head.achieved_occupancy is not None:
        parts.append(f"achieved occupancy {head.achieved_occupancy:.0%}")
    return "one launch moved " + ("; ".join(parts) if parts else "no counter the profiler gave")


__all__ = [
    "CALLABLE_L2_STEADY",
    "PIPE_NOISE",
    "STEADY",
    "Traffic",
    "compute_lines",
    "megabytes",
    "traffic_lines",
]
