"""One measurement's `explain.traffic`, `explain.bytes_check` and `explain.flops_check`, as
plain data and lines.

`traffic` holds the profiler, how it treated the caches, what the pass cost, head's and
base's counters and the lines that compare them (or `problem`, the one line that says why
there are none), a compute-bound kernel's pipes and FLOPs first; `bytes_check` holds the
check of the declared bytes and `flops_check` of the declared FLOPs (None when not asked
for, nothing was counted, or no FLOPs were declared). The failure text, the JSON report and
the Markdown summary read the same lines.
"""

from __future__ import annotations

from typing import Any

from pytest_gpuperf.engine.roofline import Work
from pytest_gpuperf.explain.counters.bytes_check import BytesCheck
from pytest_gpuperf.explain.counters.flops_check import FlopsCheck
from pytest_gpuperf.explain.counters.profile import LAUNCH_JOINER, NOTHING_LAUNCHED, Profiled
from pytest_gpuperf.explain.counters.traffic import (
    CALLABLE_L2_STEADY,
    STEADY,
    Traffic,
    traffic_lines,
)
from pytest_gpuperf.session.callable_pairs import launch_change
from pytest_gpuperf.session.profile_child import BASE, CALLABLE, HEAD

_CACHE_WORDS = {
    "all": "caches flushed before each profiled launch (ncu --cache-control all)",
    "none": "caches warmed by one launch before the profiled one (ncu --cache-control none)",
}


def explanation(
    profiled: Profiled,
    position: int,
    *,
    check_bytes: bool,
    l2_bytes: int,
    stored_commit: str = "",
    work: Work | None = None,
) -> dict[str, Any]:
    """The `traffic`, `bytes_check` and `flops_check` of measurement `position` of the test.
    `stored_commit`: the base was built at that commit of a stored baseline's latest save
    (not at the run's --gpuperf-compare REF), said in `traffic.against` and in a first line.
    `work`: what the measurement declared it computes (its counters then lead with the
    pipes' utilisation, and its FLOPs are checked)."""
    traffic: dict[str, Any] = {
        "profiler": profiled.tool,
        "cache_control": _CACHE_WORDS.get(profiled.cache_control, profiled.cache_control),
        "cost_s": round(profiled.cost_s, 2),
        "problem": profiled.problem,
        "head": None,
        "base": None,
        "lines": [profiled.problem] if profiled.problem else [],
    }
    unknown = [
        f"{profiled.tool} does not know {metric.split('.', 1)[0]} on this GPU: not counted "
        "(the other counters are)"
        for metric in profiled.unknown_metrics
    ]
    head, base = profiled.of(position, HEAD), profiled.of(position, BASE)
    planned = profiled.planned(position)
    if head is None or planned is None:
        if not profiled.problem:
            traffic["problem"] = "not explained: this measurement launched nothing to profile"
            traffic["lines"] = [traffic["problem"]]
        return {"traffic": traffic, "bytes_check": None, "flops_check": None}
    traffic["head"], traffic["base"] = head.plain(), None if base is None else base.plain()
    steady = CALLABLE_L2_STEADY if planned.kernel == CALLABLE else STEADY
    compute = work is not None
    lines = traffic_lines(head, base, l2_bytes=l2_bytes, l2_steady=steady, compute=compute)
    traffic["lines"] = lines + (unknown if compute else [])
    if planned.kernel == CALLABLE and base is not None:
        # which kernels a callable launched is known to the profiler alone (a Triton or torch
        # launch bypasses the plugin): one launched twice as often is the likely cause
        change = launch_change(_launched(head), _launched(base))
        if change.startswith("launches per call"):
            traffic["lines"].insert(0, change)
    if stored_commit and base is not None:
        traffic["against"] = f"the stored baseline's commit {stored_commit[:12]}"
        made = "callable loaded" if planned.kernel == CALLABLE else "kernel built"
        traffic["lines"].insert(
            0, f"base: the {made} at the stored baseline's commit {stored_commit[:12]}"
        )
    check = None
    if check_bytes and head.dram_read_bytes is not None and head.dram_write_bytes is not None:
        check = BytesCheck(
            declared_bytes=planned.declared_bytes,
            read_bytes=head.dram_read_bytes,
            written_bytes=head.dram_write_bytes,
            l2_bytes=l2_bytes,
            cache=planned.cache,
            uniform_args=planned.uniform_args,
            uniform_arg_bytes=planned.uniform_arg_bytes,
        ).plain()
    flops = None
    if check_bytes and work is not None:
        flops = FlopsCheck(work.flops, head.flops, work.math, head.tensor_flops).plain()
    return {"traffic": traffic, "bytes_check": check, "flops_check": flops}


def _launched(traffic: Traffic) -> list[str]:
    """The kernels a callable's profiled side launched, in order (summed's name parts), each
    without the return type and parameter list ncu's demangled names carry ("void
    at::vectorized_elementwise_kernel<4, ...>(int, T2, T3)"): the template arguments say
    which kernel it is, the rest only lengthens the line."""
    if traffic.kernel == NOTHING_LAUNCHED:
        return []
    return [_short(name) for name in traffic.kernel.split(LAUNCH_JOINER)]


def _short(name: str) -> str:
    name = name.removeprefix("void ")
    if name.endswith(")") and "(" in name:
        depth = 0
        for position in range(len(name) - 1, -1, -1):  # the parameter list's own "("
            depth += {")": 1, "(": -1}.get(name[position], 0)
            if depth == 0:
                return name[:position] or name
    return name


__all__ = ["explanation"]
