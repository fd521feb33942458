"""The explain pass's child, the fixture's side: in a pytest process started under the
vendor's profiler with `PLAN_ENV` set, each gpu_bench call launches head once and base once
inside the profiler's range (a callable's base: its test's Python at the base revision), with
the test's own inputs and cache mode, and appends what it launched to the plan file; the
parent (explain/counters/profile.py) pairs the plan with the profiler's report. Here, below
the session layer, because the fixture calls it. Which process is that child (not any that
inherits the variable): session/profile_plan.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, Kernel
from pytest_gpuperf.session.profile_plan import KEY_ENV, PLAN_ENV, child_plan

HEAD, BASE = "head", "base"
PROFILED_NOTE = "not measured: head and base launched once each under the profiler (explain pass)"
_POISON = 0xFFFFFFFF
CALLABLE = ""  # the kernel name of a planned gpu_bench.run: whatever the callable launches
# After each side of a gpu_bench.run, a one-thread kernel of the plugin's in a profiler range of
# its own: the plugin cannot see what a callable launches, so the parent ends a side's
# launches at the marker (explain/counters/profile.py). Planned as side MARKER_SIDE.
MARKER = "gpuperf_side_marker"
MARKER_SIDE = "marker"
_MARKER_SOURCE = '#include "gpuperf.h"\nGPUPERF_KERNEL void gpuperf_side_marker(int unused) {}\n'
_UNIFORM_SAMPLE_BYTES = 1 << 30  # buffers past this are not read back to look for one value


def uniform_args(args: Sequence[Any], skip: Sequence[Any] = ()) -> tuple[int, ...]:
    """The positions of the buffer arguments whose bytes all repeat one 4-byte value (zeros,
    one constant): data the GPU may compress. Buffers in `skip` (the declared outputs, filled
    with a poison value before the launch) are not looked at."""
    found = []
    for position, arg in enumerate(args):
        if not isinstance(arg, DeviceBuffer) or any(arg is s for s in skip):
            continue
        if arg.freed or arg.nbytes < 4 or arg.nbytes > _UNIFORM_SAMPLE_BYTES:
            continue
        words = arg.download(np.uint32)
        # all 0xFF bytes: gpu_bench.empty's poison, an output the launch will overwrite
        if words.size and bool(np.all(words == words[0])) and words[0] != _POISON:
            found.append(position)
    return tuple(found)


def profile_launch(
    backend: Backend,
    plan: Path,
    entry: Mapping[str, Any],
    launch: Callable[[], None],
    *,
    setup: Callable[[], Any] | None = None,
    opening: Callable[[], Any] | None = None,
) -> None:
    """Launch once inside the profiler's range and append `entry` to the plan. cache="hot"
    launches once before, outside the range, so the profiled launch finds its data cached;
    cold and rotate launches are made cold by the profiler (ncu's --cache-control all).
    `opening` is launched right before the range opens, after everything else."""
    if entry.get("cache") == "hot":
        if setup is not None:
            setup()
        launch()
        backend.synchronize()
    if setup is not None:
        setup()
    if opening is not None:
        opening()
    backend.synchronize()
    backend.profile_start()
    try:
        launch()
    finally:
        backend.profile_stop()
    # appended to the file the parent made, never through a link (nor made anew)
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(plan, flags), "a", encoding="utf-8") as out:
        out.write(json.dumps(dict(entry)) + "\n")


def profile_sides(
    backend: Backend,
    plan: Path,
    entry: Mapping[str, Any],
    kernels: tuple[Kernel, Kernel | None],
    launch: Callable[..., Any],
    *,
    declared: tuple[int, Sequence[Any], Any],
    setup: Callable[[], Any] | None = None,
) -> None:
    """One gpu_bench.measure call in the child: head, then base (None: no base), each
    launched once in the profiler's range by `launch(kernel)`. `declared`: the bytes the call
    declares, its arguments and its `writes=` (outputs, not looked at for uniform data)."""
    known = _planned(entry, declared)
    for side, kernel in zip((HEAD, BASE), kernels, strict=True):
        if kernel is not None:
            sided = {**known, "side": side, "kernel": kernel.name}
            profile_launch(backend, plan, sided, partial(launch, kernel), setup=setup)


def profile_callables(
    backend: Backend,
    plan: Path,
    entry: Mapping[str, Any],
    sides: Sequence[tuple[str, Callable[[], Any], Callable[[], Any] | None]],
    *,
    declared_bytes: int,
) -> None:
    """One gpu_bench.run in the child: each side's (side, callable, setup), head's then
    base's when the run compares, profiled once in its own range, each followed by the
    marker kernel in a range of its own. Every callable is called once first, outside the
    profiler: a Triton kernel compiles and autotunes on its first call, and the launches its
    autotuner times are not the work. The marker is launched right before each side's range
    too, outside it: rocprofv3, which has no ranges, counts every dispatch, and a side is then
    the dispatches between two markers. A base whose first call raises is left out: a base
    that cannot run at REF must not cost head its counters. Where no marker can be built
    (no kernel compiler), head's side is profiled alone, as before there were markers."""
    known = _planned(entry, (declared_bytes, (), ()))
    try:
        marker = backend.compile(_MARKER_SOURCE, name=f"{MARKER}.hip").kernel(MARKER)
        mark: Callable[[], None] | None = partial(backend.launch, marker, 1, 1, (0,))
    except GpuPerfError:  # no kernel compiler here (a torch-only install)
        mark = None
    for side, fn, setup in sides:
        try:
            if setup is not None:
                setup()
            fn()
            backend.synchronize()
        except Exception:  # whatever the user's code at REF raised
            if side == HEAD:
                raise  # the test's own callable: the run fails as the test would
            continue  # base's, loaded at REF, fails there: head's counters stand alone
        sided = {**known, "side": side, "kernel": CALLABLE}
        if mark is None:  # unmarked: the parent gives it the launches left over, so one side
            profile_launch(backend, plan, sided, fn, setup=setup)
            return
        profile_launch(backend, plan, sided, fn, setup=setup, opening=mark)
        # launched once, whatever the test's cache mode (a hot launch's warm-up would be a
        # second marker, and rocprofv3's side would end at it)
        closing = {**known, "side": MARKER_SIDE, "kernel": MARKER, "cache": "cold"}
        profile_launch(backend, plan, closing, mark)


def _planned(entry: Mapping[str, Any], declared: tuple[int, Sequence[Any], Any]) -> dict[str, Any]:
    """`entry` with what the check of its declared bytes needs: the bytes, and which of its
    arguments hold uniform data (its `writes=`, outputs, not looked at)."""
    bytes_moved, args, writes = declared
    outputs = writes if isinstance(writes, list | tuple) else (writes,)
    uniform = uniform_args(args, skip=outputs)
    return {
        **entry,
        "declared_bytes": bytes_moved,
        "uniform_args": list(uniform),
        # a uniform input excuses a shortfall only up to its own size (4 bytes: 4 bytes)
        "uniform_arg_bytes": [int(args[i].nbytes) for i in uniform],
    }


__all__ = [
    "BASE",
    "CALLABLE",
    "HEAD",
    "KEY_ENV",
    "MARKER",
    "MARKER_SIDE",
    "PLAN_ENV",
    "PROFILED_NOTE",
    "child_plan",
    "profile_callables",
    "profile_launch",
    "profile_sides",
    "uniform_args",
]
