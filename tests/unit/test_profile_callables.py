"""The explain pass's child for a `gpu_bench.run`: what it launches, in order, through the
simulated backend (the one the CPU has; the real profiler's side is
tests/gpu/test_explain_traffic_on_gpu.py). Each side is called once outside the profiler,
then profiled between two markers: one before its range (outside it) and one after, in a range
of its own, so ncu (ranges) and rocprofv3 (every dispatch) both find a side's launches."""

from __future__ import annotations

import json
from functools import partial

import pytest

from pytest_gpuperf.errors import CompileError
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.session.profile_child import MARKER, MARKER_SIDE, profile_callables

# the kernels here are strings with no model: the simulated device says so; what is tested is
# the order of the launches, not their outputs
pytestmark = pytest.mark.filterwarnings(
    "ignore::pytest_gpuperf.simulate.kernel_models.SimulationWarning"
)

VADD = '#include "gpuperf.h"\nGPUPERF_KERNEL void vadd(float* a, int n) { a[0] += n; }\n'


@pytest.fixture
def backend():
    opened = open_backend("sim", seed=1)
    yield opened
    opened.close()


@pytest.mark.parametrize("cache", ["cold", "hot"])
def test_each_side_is_warmed_then_profiled_between_two_markers(backend, tmp_path, cache):
    kernel = backend.compile(VADD, name="vadd.hip").kernel("vadd")
    buffer = backend.alloc(64)
    events: list[str] = []
    original = backend.launch

    def recording(launched, *args, **options):
        events.append(launched.name)
        original(launched, *args, **options)

    backend.launch = recording
    backend.profile_start = lambda: events.append("[")
    backend.profile_stop = lambda: events.append("]")

    def side(times: int):
        def call() -> None:
            for _ in range(times):
                backend.launch(kernel, 1, 1, (buffer, 1))

        return call

    plan = tmp_path / "plan.jsonl"
    plan.write_text("")
    entry = {"position": 0, "name": "op", "cache": cache}
    sides = [("head", side(2), None), ("base", side(1), None)]
    profile_callables(backend, plan, entry, sides, declared_bytes=128)

    hot_warm = ["vadd", "vadd"] if cache == "hot" else []
    head = ["vadd", "vadd", *hot_warm, MARKER, "[", "vadd", "vadd", "]", "[", MARKER, "]"]
    hot_warm = ["vadd"] if cache == "hot" else []
    base = ["vadd", *hot_warm, MARKER, "[", "vadd", "]", "[", MARKER, "]"]
    assert events == head + base
    planned = [json.loads(line) for line in plan.read_text().splitlines()]
    assert [(p["side"], p["kernel"]) for p in planned] == [
        ("head", ""), (MARKER_SIDE, MARKER), ("base", ""), (MARKER_SIDE, MARKER)
    ]  # fmt: skip
    assert {p["declared_bytes"] for p in planned} == {128}


def test_a_base_that_raises_is_left_out_and_head_is_profiled(backend, tmp_path):
    kernel = backend.compile(VADD, name="vadd.hip").kernel("vadd")
    buffer = backend.alloc(64)

    def head() -> None:
        backend.launch(kernel, 1, 1, (buffer, 1))

    def base() -> None:
        raise RuntimeError("a module that REF's Triton cannot compile")

    plan = tmp_path / "plan.jsonl"
    plan.write_text("")
    entry = {"position": 0, "name": "op", "cache": "cold"}
    sides = [("head", head, None), ("base", base, None)]
    profile_callables(backend, plan, entry, sides, declared_bytes=128)
    planned = [json.loads(line) for line in plan.read_text().splitlines()]
    assert [p["side"] for p in planned] == ["head", MARKER_SIDE]
    with pytest.raises(RuntimeError):  # head's own failure is the test's
        profile_callables(backend, plan, entry, [("head", base, None)], declared_bytes=128)


def test_without_a_compiler_for_the_marker_head_alone_is_profiled(backend, tmp_path):
    """A torch-only install may have no kernel compiler: the marker cannot be built, so
    head's side is profiled alone and unmarked (the parent gives it the launches left over)
    and base's is not, since the two could not be told apart."""
    kernel = backend.compile(VADD, name="vadd.hip").kernel("vadd")
    buffer = backend.alloc(64)

    def no_compiler(*args, **options):
        raise CompileError("NVRTC was not found")

    backend.compile = no_compiler
    plan = tmp_path / "plan.jsonl"
    plan.write_text("")
    entry = {"position": 0, "name": "op", "cache": "cold"}
    launch = partial(backend.launch, kernel, 1, 1, (buffer, 1))
    sides = [("head", launch, None), ("base", launch, None)]
    profile_callables(backend, plan, entry, sides, declared_bytes=128)
    planned = [json.loads(line) for line in plan.read_text().splitlines()]
    assert [(p["side"], p["kernel"]) for p in planned] == [("head", "")]
