"""Head against base in words, the declared bytes against the counters, and a profile lined up
with the launches a test planned. The byte counts are those the H100 measured on 2026-11-27
(bench/explain_on_gpu.sh): the user kernel `gather4` of bench/explain_demo.py, whose head reads
1.5% more, and a 64 MiB output of which 59.1 MB or 61.7 MB reached DRAM by the kernel's end."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_gpuperf.explain.counters.bytes_check import BytesCheck
from pytest_gpuperf.explain.counters.profile import PlannedLaunch, _aligned, _by_name
from pytest_gpuperf.explain.counters.traffic import Traffic, traffic_lines
from pytest_gpuperf.session.profile_child import CALLABLE, MARKER, MARKER_SIDE

H100_L2 = 52_428_800
BASE = Traffic("gather4", 268_435_456, 59_100_000, 505_700_000, 16, 0.90, 18_874_368, 0.0)


def test_extra_reads_are_named_and_a_write_back_within_the_l2_is_not_a_change():
    head = Traffic("gather4", 272_461_312, 61_700_000, 512_800_000, 16, 0.90, 26_738_688, 0.0)
    lines = traffic_lines(head, BASE, l2_bytes=H100_L2)
    assert lines[0] == (
        "head moved +1.2% DRAM bytes: read +1.5% (268.4 -> 272.5 MB), write unchanged "
        "(59.1 -> 61.7 MB: within what the L2 still holds at the kernel's end)"
    )
    assert lines[1:] == [
        "L2 bytes +1.4% (505.7 -> 512.8 MB)",
        "instructions executed +41.7% (18,874,368 -> 26,738,688)",
    ]


def test_a_write_change_beyond_the_l2_is_one():
    head = Traffic("gather4", 268_435_456, 59_100_000 + 20_000_000)
    assert "write +33.8% (59.1 -> 79.1 MB)" in traffic_lines(head, BASE, l2_bytes=H100_L2)[0]


def test_registers_occupancy_and_spills_are_named_when_they_move():
    head = Traffic("gather4", 268_435_456, 59_100_000, 505_700_000, 40, 0.62, 18_874_368, 4e6)
    lines = traffic_lines(head, BASE, l2_bytes=H100_L2)
    # the bytes did not move: what moved most against its noise (spills from none) leads
    assert lines[0] == "local-memory (spill) bytes 0.0 MB -> 4.0 MB with the same DRAM bytes"
    assert lines[1].startswith("head moved the same DRAM bytes: read unchanged (268.4 MB)")
    assert "registers 16 -> 40" in lines
    assert "achieved occupancy 90% -> 62%" in lines


def test_with_the_same_bytes_the_counter_that_moved_most_leads():
    """A kernel whose time rose with unchanged bytes and registers: the instructions that
    rose +381% lead, not a fourth line under the bytes."""
    head = Traffic("gather4", 268_435_456, 59_100_000, 506_000_000, 16, 0.89, 90_784_711, 0.0)
    lines = traffic_lines(head, BASE, l2_bytes=H100_L2)
    assert lines[0] == (
        "instructions executed +381.0% (18,874,368 -> 90,784,711) with the same DRAM bytes"
    )
    assert lines[1].startswith("head moved the same DRAM bytes")
    assert "achieved occupancy 90% -> 89%" in lines


def test_a_change_of_shared_memory_is_named_and_leads_with_the_same_bytes():
    """A kernel the plugin did not build (a torch extension's) has no code facts: the launch
    tells its shared memory per block, head against base."""
    base = Traffic("reduce", 268_435_456, 4096, shared_bytes_per_block=4096)
    head = replace(base, shared_bytes_per_block=16_384)
    lines = traffic_lines(head, base)
    assert lines[0] == "shared memory per block 4,096 -> 16,384 bytes with the same DRAM bytes"
    assert not any("shared" in line for line in traffic_lines(base, base))


def test_counters_that_did_not_move_say_so():
    (line,) = traffic_lines(BASE, BASE, l2_bytes=H100_L2)
    assert line.endswith("no counter moved: the time changed without the traffic")


def test_without_a_base_head_is_described_alone():
    (line,) = traffic_lines(BASE, None)
    assert line == "one launch moved DRAM read 268.4 MB, written 59.1 MB; 16 registers; " + (
        "achieved occupancy 90%"
    )


@pytest.mark.parametrize(
    ("read", "written", "uniform", "cache", "outcome"),
    [
        (33_559_808, 17_395_200, (), "cold", "within"),  # STREAM copy: writes still in L2
        (268_460_000, 124_640_000, (), "cold", "within"),  # vector_add, 384 MiB
        (268_460_000 * 1.4, 124_640_000, (), "cold", "over"),  # moves 30% more than declared
        (6_400, 1_000, (), "cold", "under"),  # declared far more than it moves
        (6_400, 1_000, (0, 1), "cold", "compressed"),  # ...and its inputs hold one value
        (268_460_000, 136_960_000, (), "hot", "hot"),
    ],
)
def test_the_declared_bytes_check(read, written, uniform, cache, outcome):
    declared = 67_108_864 if read < 40e6 and read > 1e6 else 402_653_184
    sizes = tuple(268_435_456 for _ in uniform)
    check = BytesCheck(declared, read, written, H100_L2, cache, uniform, sizes)
    assert check.outcome == outcome
    assert check.warns == (outcome in ("over", "under"))
    assert check.plain()["line"] == check.line()


def test_the_words_of_each_outcome():
    over = BytesCheck(402_653_184, 268_460_000 * 1.4, 124_640_000, H100_L2)
    assert over.line().startswith("declared bytes look too low: DRAM read 375.8 MB + written")
    compressed = BytesCheck(
        268_435_456, 6_400, 0, H100_L2, uniform_args=(0, 2), uniform_arg_bytes=(268_435_456, 4)
    )
    assert "argument(s) 0, 2 hold one value" in compressed.line()
    assert "6.4 KB" in compressed.line()


def test_a_tiny_uniform_input_does_not_excuse_a_large_shortfall():
    """Issue 45 item 8: 1.07 GB declared, 0.80 GB moved, argument 2 a 4-byte buffer of one
    value: the declaration is too high; the 4 bytes cannot have been compressed into 270 MB."""
    check = BytesCheck(
        1_073_741_824, 536_870_912, 268_435_456, H100_L2,
        uniform_args=(2,), uniform_arg_bytes=(4,),
    )  # fmt: skip
    assert check.outcome == "under"
    assert check.warns
    assert check.line().startswith("declared bytes look too high")
    assert "argument(s) 2 hold one value, but 4 B compressed away cannot explain" in check.line()
    # the same shortfall with a uniform input as large as the gap is compression
    big = BytesCheck(
        1_073_741_824, 536_870_912, 268_435_456, H100_L2,
        uniform_args=(2,), uniform_arg_bytes=(268_435_456,),
    )  # fmt: skip
    assert big.outcome == "compressed"
    # a uniform argument of unknown size excuses nothing
    unknown = BytesCheck(1_073_741_824, 536_870_912, 268_435_456, H100_L2, uniform_args=(2,))
    assert unknown.outcome == "under"


def _plan(*kernels: str) -> list[PlannedLaunch]:
    return [PlannedLaunch(i, f"m{i}", "head", k, "cold", 100) for i, k in enumerate(kernels)]


def test_one_callable_takes_the_launches_left_over_summed():
    every = [Traffic("copy", 10, 5), Traffic("dot", 100, 1, registers_per_thread=32),
             Traffic("dot_finish", 2, 1, registers_per_thread=20)]  # fmt: skip
    found = _aligned(every, _plan("copy", ""))
    assert found is not None
    assert found[0].kernel == "copy"
    assert (found[1].kernel, found[1].dram_read_bytes) == ("dot + dot_finish", 102)
    assert found[1].registers_per_thread == 32


def test_each_side_of_a_callable_ends_at_the_childs_marker():
    """A callable under --gpuperf-compare: head's launches, the marker, base's, the marker
    (session/profile_child.py); each side is the launches up to its marker, summed, and a
    side that launched nothing is empty, not its neighbour's."""
    plan = [
        PlannedLaunch(0, "op", "head", CALLABLE, "cold", 100),
        PlannedLaunch(0, "op", MARKER_SIDE, MARKER, "cold", 100),
        PlannedLaunch(0, "op", "base", CALLABLE, "cold", 100),
        PlannedLaunch(0, "op", MARKER_SIDE, MARKER, "cold", 100),
        PlannedLaunch(1, "k", "head", "copy", "cold", 100),
        PlannedLaunch(2, "none", "head", CALLABLE, "cold", 100),
        PlannedLaunch(2, "none", MARKER_SIDE, MARKER, "cold", 100),
    ]
    every = [Traffic("add", 10, 5), Traffic("add", 10, 5), Traffic(MARKER, 0, 0),
             Traffic("add", 10, 5), Traffic(MARKER, 0, 0), Traffic("copy", 7, 7),
             Traffic(MARKER, 0, 0)]  # fmt: skip
    found = _aligned(every, plan)
    assert found is not None
    assert [(t.kernel, t.dram_read_bytes) for t in found] == [
        ("add + add", 20), (MARKER, 0), ("add", 10), (MARKER, 0), ("copy", 7),
        ("(nothing launched)", None), (MARKER, 0),
    ]  # fmt: skip
    # a marker missing from the profile: which launch is whose side cannot be told
    assert _aligned([t for t in every if t.kernel != MARKER][:3] + every[4:], plan) is None


def test_rocprofv3s_every_dispatch_gives_each_side_the_launches_between_its_markers():
    """rocprofv3 counts the warm-up call and everything else too: a side is what ran
    between the marker launched before its range and the one after."""
    plan = [
        PlannedLaunch(0, "op", "head", CALLABLE, "cold", 100),
        PlannedLaunch(0, "op", MARKER_SIDE, MARKER, "cold", 100),
        PlannedLaunch(0, "op", "base", CALLABLE, "cold", 100),
        PlannedLaunch(0, "op", MARKER_SIDE, MARKER, "cold", 100),
    ]
    names = ["compile_probe", "add", "add", MARKER, "add", "add", MARKER,  # head: warm, side
             "add", MARKER, "add", MARKER]  # fmt: skip
    every = [Traffic(name, float(i), 1.0) for i, name in enumerate(names)]
    picked = _by_name(every, plan)
    assert [t.dram_read_bytes for t in picked] == [4.0, 5.0, 6.0, 9.0, 10.0]
    found = _aligned(picked, plan)
    assert found is not None
    assert [(t.kernel, t.dram_read_bytes) for t in found] == [
        ("add + add", 9.0), (MARKER, 6.0), ("add", 9.0), (MARKER, 10.0)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kernels", "launched"),
    [
        (("copy",), ["copy", "copy"]),  # a launch the plan does not know
        (("copy", "scale"), ["copy", "triad"]),  # another kernel than planned
        (("", ""), ["a", "b", "c"]),  # two callables: whose launch is whose
    ],
)
def test_a_profile_that_does_not_fit_the_plan_is_refused(kernels, launched):
    assert _aligned([Traffic(k, 1, 1) for k in launched], _plan(*kernels)) is None
