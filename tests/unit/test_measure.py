"""The measurement engine on the simulated device: cache-mode sizing, queue keeping,
stopping, outputs, calibration, clocks and leaks.

The simulated device (simulate/) has a virtual host clock (every API call costs host
time), one in-order device queue, an LRU cache over whole buffers and real data movement, so
with its noise switched off (run_spread=0, jitter=0) a kernel's time is known exactly:
(launch overhead + missed bytes / (peak x efficiency) + hit bytes / (... x cache speed-up)).
A sample that timed the host's launch cost instead of a busy queue would show up as more.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from pytest_gpuperf.engine import measure, policy, timing
from pytest_gpuperf.engine.measure import MeasureSettings, measure_callable, measure_kernel
from pytest_gpuperf.errors import ConfigError, GpuPerfError, LaunchError, OutOfDeviceMemory
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.devices import KNOWN_DEVICES, get_device

MiB = 2**20
LAUNCH_OVERHEAD_S = 2e-6  # the simulated device's defaults (docs/simulated-device.md)
CACHE_SPEEDUP = 3.0
VECTOR_ADD_EFFICIENCY = {"mi300x": 0.7185, "mi250x": 0.80}  # the sim's reference table


def _sim(device: str = "mi300x", **options) -> Backend:
    options = {"seed": 7, "run_spread": 0.0, "jitter": 0.0, **options}
    return open_backend("sim", 0, device=device, **options)


def _model_s(device: str, n: int, *, cached: bool = False) -> float:
    """vector_add's exact time on a noiseless simulated device: 12 bytes per element."""
    spec = get_device(device)
    memory_s = 12 * n / (spec.peak_bps * VECTOR_ADD_EFFICIENCY[device])
    return LAUNCH_OVERHEAD_S + (memory_s / CACHE_SPEEDUP if cached else memory_s)


def _vector_add(backend: Backend, n: int, seed: int = 0):
    kernel = backend.compile(KERNELS_DIR / "vector_add.hip").kernel("vector_add")
    rng = np.random.default_rng(seed)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    output = backend.to_device(np.full(n, np.nan, np.float32))
    args = (backend.to_device(a), backend.to_device(b), output, n)
    return kernel, args, a + b


def _measure(backend: Backend, n: int, *, device: str = "mi300x", **settings):
    kernel, args, expected = _vector_add(backend, n)
    result = measure_kernel(
        backend,
        kernel,
        grid=(n + 255) // 256,
        block=256,
        args=args,
        bytes_moved=12 * n,
        device=get_device(device),
        settings=MeasureSettings(**settings),
    )
    return result, args, expected


class Counting:
    """Counts a backend's live allocations (wraps alloc and free)."""

    def __init__(self, backend: Backend) -> None:
        self.live: set[int] = set()
        alloc, free = backend.alloc, backend.free

        def counted_alloc(nbytes: int) -> DeviceBuffer:
            buffer = alloc(nbytes)
            self.live.add(buffer.ptr)
            return buffer

        def counted_free(buffer: DeviceBuffer) -> None:
            self.live.discard(buffer.ptr)
            free(buffer)

        backend.alloc, backend.free = counted_alloc, counted_free  # type: ignore[method-assign]


# -- sizing of the cache modes --------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(KNOWN_DEVICES))
def test_scratch_and_rotation_cover_twice_all_caches(key):
    cache_bytes = KNOWN_DEVICES[key].cache_bytes
    assert cache_bytes >= KNOWN_DEVICES[key].l2_bytes > 0
    assert measure.scratch_bytes_for(cache_bytes) >= 2 * cache_bytes
    assert measure.scratch_bytes_for(cache_bytes) % policy.FLUSH_ELEMENT_BYTES == 0
    for working_set in (4096, 12 * MiB, 100 * MiB, 1536 * MiB, 6 * 2**30):
        copies = measure.rotation_copies_for(working_set, cache_bytes)
        assert copies * working_set >= 2 * cache_bytes
        assert copies == 1 or (copies - 1) * working_set < 2 * cache_bytes  # no more than needed


def test_the_mi300x_flush_reads_twice_l2_plus_infinity_cache():
    # MI300X: 8 XCDs x 4 MB L2 + 256 MB Infinity Cache.
    assert measure.scratch_bytes_for(KNOWN_DEVICES["mi300x"].cache_bytes) >= 2 * 288 * MiB


def test_cold_reads_the_scratch_buffer_before_every_timed_launch():
    backend = _sim()
    result, _, _ = _measure(backend, 4096, cache="cold")
    assert result.extra["scratch_bytes"] >= 2 * 288 * MiB
    counts = backend.launch_counts
    assert counts["gpuperf_flush"] >= counts["vector_add"] - 1  # the first launch is untimed
    assert result.queue_method.startswith("flush-ahead")
    assert result.extra["launches_per_sample"] == 1


def test_rotate_uses_enough_copies_and_leaves_the_real_output():
    backend = _sim("mi250x")
    n = 1 << 16  # 768 KiB against 8 MiB of caches: 22 copies
    result, args, expected = _measure(backend, n, cache="rotate", device="mi250x")
    assert result.rotation_copies == 22
    assert result.rotation_copies * 12 * n >= 2 * 8 * MiB
    assert backend.launch_counts["vector_add"] > 22  # every copy was used
    np.testing.assert_array_equal(args[2].download(np.float32), expected)


@pytest.mark.parametrize("cache", ["cold", "hot", "rotate"])
def test_each_mode_times_what_the_model_says(cache):
    n = 1 << 18  # 3 MiB: resident in the MI250X's 8 MiB of L2 when hot
    result, args, expected = _measure(_sim("mi250x"), n, cache=cache, device="mi250x")
    assert result.time_s == pytest.approx(_model_s("mi250x", n, cached=cache == "hot"), rel=1e-3)
    assert result.extra["starved_samples_dropped"] == 0
    np.testing.assert_array_equal(args[2].download(np.float32), expected)


def test_cold_is_slower_than_hot_when_cached_and_equal_when_the_data_exceeds_the_caches():
    cached_n, huge_n = 1 << 20, 1 << 21  # 12 MiB and 24 MiB; the MI250X has 8 MiB of L2
    cold = _measure(_sim(), cached_n, cache="cold")[0]
    hot = _measure(_sim(), cached_n, cache="hot")[0]
    assert cold.time_s == pytest.approx(_model_s("mi300x", cached_n), rel=1e-3)
    assert hot.time_s == pytest.approx(_model_s("mi300x", cached_n, cached=True), rel=1e-3)
    assert cold.time_s > 1.5 * hot.time_s
    cold = _measure(_sim("mi250x"), huge_n, cache="cold", device="mi250x")[0]
    hot = _measure(_sim("mi250x"), huge_n, cache="hot", device="mi250x")[0]
    assert cold.time_s == pytest.approx(hot.time_s, rel=1e-3)


def test_rotate_refusals_name_the_way_out():
    with pytest.raises(ConfigError, match=r"at least 589824 bytes here\); use cache='cold'"):
        _measure(_sim(), 256, cache="rotate")  # 3 KiB against 288 MiB of caches
    # 96 MiB x 854 copies would not fit in half of the MI250X's 64 GiB.
    big_cache = dataclasses.replace(get_device("mi250x"), llc_bytes=40 * 2**30)
    backend = _sim("mi250x")
    kernel, args, _ = _vector_add(backend, 8 << 20)
    with pytest.raises(ConfigError, match="half the device memory; use cache='cold'"):
        measure_kernel(
            backend,
            kernel,
            grid=32768,
            block=256,
            args=args,
            bytes_moved=96 * MiB,
            device=big_cache,
            settings=MeasureSettings(cache="rotate"),
        )
    with pytest.raises(ConfigError, match="rotate"):
        measure_callable(
            backend,
            lambda: None,
            bytes_moved=1,
            device=big_cache,
            settings=MeasureSettings("rotate"),
        )


# -- never time a starved queue ---------------------------------------------------------------


@pytest.mark.parametrize("cache", ["cold", "hot", "rotate"])
def test_no_kept_sample_times_the_hosts_launch_cost(cache):
    # A ~2 us kernel on a host that needs 40 us per launch: without the spin in front of each
    # batch the queue would run dry, and starved samples would read up to 40 us more.
    n = 4096  # 48 KiB: rotation over 350 copies covers twice the MI250X's 8 MiB
    backend = _sim("mi250x", host_launch_s=40e-6)
    result = _measure(backend, n, cache=cache, device="mi250x")[0]
    true_s = _model_s("mi250x", n, cached=cache == "hot")
    assert result.time_s == pytest.approx(true_s, rel=1e-3)
    assert max(result.samples_s) < true_s * 1.001


def test_hot_batches_launches_so_an_event_pair_lasts_long_enough():
    result = _measure(_sim(), 4096, cache="hot")[0]
    launches = result.extra["launches_per_sample"]
    assert launches > 1
    assert launches * result.time_s >= 0.9 * measure.PAIR_TARGET_S
    assert result.queue_method == f"spin-ahead: spin per batch + {launches} launches per event pair"


class _CaptureStream:
    """What a fake capture hands to the launches it records."""

    def __init__(self) -> None:
        self.launches: list[tuple] = []


def _sim_with_graphs(
    monkeypatch, events: bool = False, **options
) -> tuple[Backend, dict[str, list]]:
    """The simulated device with stream capture: launches on a capture stream are recorded,
    a replay issues them again. Tests the engine's graph path; the timing benefit of a real
    graph is measured on the H100 (docs/benchmarks.md)."""
    backend = _sim(**options)
    real_launch = backend.launch
    log: dict[str, list] = {"captured": [], "replayed": [], "freed": []}

    def launch(kernel, grid, block, args, *, shared_bytes=0, stream=None):
        if isinstance(stream, _CaptureStream):
            stream.launches.append((kernel, grid, block, args, shared_bytes))
        else:
            real_launch(kernel, grid, block, args, shared_bytes=shared_bytes, stream=stream)

    def capture_graph(fn, stream=None):
        graph = _CaptureStream()
        fn(graph)
        log["captured"].append(graph)
        return graph

    def launch_graph(graph, stream=None):
        log["replayed"].append(graph)
        for node in graph.launches:
            if node[0] == "event":  # an event recorded in the graph is recorded at replay
                backend.record_event(node[1], stream)
                continue
            kernel, grid, block, args, shared_bytes = node
            real_launch(kernel, grid, block, args, shared_bytes=shared_bytes, stream=stream)

    def record_event_in_graph(event, stream):
        assert isinstance(stream, _CaptureStream), "only on the capturing stream"
        stream.launches.append(("event", event))

    if events:
        monkeypatch.setattr(backend, "supports_graph_events", True)
        monkeypatch.setattr(backend, "record_event_in_graph", record_event_in_graph)

    monkeypatch.setattr(backend, "supports_graphs", True)
    monkeypatch.setattr(backend, "launch", launch)
    monkeypatch.setattr(backend, "capture_graph", capture_graph)
    monkeypatch.setattr(backend, "launch_graph", launch_graph)
    monkeypatch.setattr(backend, "free_graph", log["freed"].append)
    return backend, log


def test_hot_mode_replays_a_graph_of_the_pairs_launches_where_the_backend_has_graphs(
    monkeypatch,
):
    n = 4096
    backend, log = _sim_with_graphs(monkeypatch)
    result, args, expected = _measure(backend, n, cache="hot")
    launches = result.extra["launches_per_sample"]
    assert result.extra["graph_replay"] is True
    assert result.queue_method == (
        f"graph-replay: spin per batch + a graph of {launches} launches per event pair"
    )
    [graph] = log["captured"]
    assert len(graph.launches) == launches > 1
    assert len(log["replayed"]) >= len(result.samples_s)
    assert log["freed"] == [graph], "the measurement frees the graph it captured"
    # Per launch, not per replay; the simulated device gives a replay no advantage.
    assert result.time_s == pytest.approx(_model_s("mi300x", n, cached=True), rel=1e-3)
    np.testing.assert_array_equal(args[2].download(np.float32), expected)


def test_a_replay_faster_than_stream_launches_is_captured_again_with_more_launches(monkeypatch):
    # A fake replay that runs a quarter of its launches reads 4x faster per launch, as a
    # real replay of short kernels does by dropping the gap between stream launches.
    backend, log = _sim_with_graphs(monkeypatch)
    full_replay = backend.launch_graph

    def quick_replay(graph, stream=None):
        quarter = _CaptureStream()
        quarter.launches = graph.launches[: max(1, len(graph.launches) // 4)]
        full_replay(quarter, stream)

    monkeypatch.setattr(backend, "launch_graph", quick_replay)
    result = _measure(backend, 1 << 12, cache="hot")[0]
    first, second = log["captured"]
    assert len(second.launches) > len(first.launches)
    assert result.extra["launches_per_sample"] == len(second.launches)
    assert log["freed"] == [first, second]


def test_cold_and_rotate_modes_and_graphs_false_launch_on_the_stream(monkeypatch):
    backend, log = _sim_with_graphs(monkeypatch)
    for settings in ({"cache": "cold"}, {"cache": "rotate"}, {"cache": "hot", "graphs": False}):
        result = _measure(backend, 1 << 16, **settings)[0]
        assert result.extra["graph_replay"] is False, settings
    assert log["captured"] == []


def test_cold_samples_of_a_kernel_are_one_graph_a_batch_where_events_record_in_graphs(
    monkeypatch,
):
    """Every batch (warm-up and sampling) is captured as one graph of read-flush, event,
    launch, event per sample and replayed once; the samples time the kernel alone (the
    noiseless simulated device gives its exact time), and every graph is freed."""
    n = 1 << 16
    backend, log = _sim_with_graphs(monkeypatch, events=True)
    result, args, expected = _measure(backend, n, cache="cold")
    assert result.extra["graph_batches"] is True and result.extra["graph_replay"] is False
    assert result.queue_method.startswith("graph-batch:")
    graphs = log["captured"]
    assert len(graphs) >= result.extra["batches"] + 2  # and the warm-up's (at least two)
    assert log["freed"] == graphs and log["replayed"] == graphs
    flush = timing.engine_for(backend).flush
    sampled = 0
    for graph in graphs:
        kinds = [node[0] if node[0] == "event" else node[0].name for node in graph.launches]
        per_sample = [flush.name, "event", "vector_add", "event"]
        assert kinds == per_sample * (len(kinds) // 4) and len(kinds) % 4 == 0
        sampled += len(kinds) // 4
    assert sampled >= len(result.samples_s)
    assert result.time_s == pytest.approx(_model_s("mi300x", n), rel=1e-3)
    np.testing.assert_array_equal(args[2].download(np.float32), expected)


def test_graph_batches_leave_hot_rotate_pairs_and_backends_without_graph_events_alone(
    monkeypatch,
):
    backend, log = _sim_with_graphs(monkeypatch, events=True)
    for settings in ({"cache": "rotate"}, {"cache": "cold", "graphs": False}):
        result = _measure(backend, 1 << 16, **settings)[0]
        assert result.extra["graph_batches"] is False, settings
    assert log["captured"] == []
    plain, plain_log = _sim_with_graphs(monkeypatch)  # graphs, but no events in them
    assert _measure(plain, 1 << 16, cache="cold")[0].extra["graph_batches"] is False
    assert plain_log["captured"] == []


def test_calibration_rides_in_the_cold_graph_batches_too(monkeypatch):
    backend, log = _sim_with_graphs(monkeypatch, events=True)
    result = _measure(backend, 1 << 16, cache="cold", calibrate=True)[0]
    assert result.extra["graph_batches"] is True and result.calibrated_efficiency is not None
    kinds = {
        node[0] if node[0] == "event" else node[0].name for node in log["captured"][-1].launches
    }
    assert "gpuperf_copy_ref" in kinds and "vector_add" in kinds


def test_a_refused_capture_falls_back_to_stream_launches_and_says_why(monkeypatch):
    backend, _ = _sim_with_graphs(monkeypatch, events=True)

    def refuse(fn, stream=None):
        raise LaunchError("cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")

    monkeypatch.setattr(backend, "capture_graph", refuse)
    result = _measure(backend, 1 << 16, cache="cold")[0]
    assert result.extra["graph_batches"] is False
    assert "CAPTURE_INVALIDATED" in result.extra["graph_batches_refused"]
    assert result.stopped_by == "precision" and len(result.samples_s) >= 10
    assert result.queue_method.startswith("flush-ahead:")


def test_calibration_replays_the_reference_as_a_graph_too(monkeypatch):
    backend, log = _sim_with_graphs(monkeypatch)
    result = _measure(backend, 1 << 16, cache="hot", calibrate=True)[0]
    assert result.extra["graph_replay"] is True and result.calibrated_efficiency is not None
    assert len(log["captured"]) == 2 and len(log["freed"]) == 2


def test_callables_are_never_captured(monkeypatch):
    backend, log = _sim_with_graphs(monkeypatch)
    n = 1 << 16
    kernel, args, _ = _vector_add(backend, n)
    result = measure_callable(
        backend,
        lambda: backend.launch(kernel, n // 256, 256, args),
        bytes_moved=12 * n,
        device=get_device("mi300x"),
        settings=MeasureSettings(cache="hot"),
    )
    assert result.extra["graph_replay"] is False and log["captured"] == []


def test_launches_per_pair_rule():
    assert measure.launches_per_pair(1e-6, "cold") == 1
    assert measure.launches_per_pair(150e-6, "hot") == 1
    assert measure.launches_per_pair(3e-6, "hot") == 34
    assert measure.launches_per_pair(1e-9, "rotate") == measure.MAX_LAUNCHES_PER_PAIR


def test_the_queue_account_flags_a_launch_submitted_after_the_device_ran_dry():
    now = [0.0]

    def submit_taking(seconds):
        return lambda: now.__setitem__(0, now[0] + seconds)

    account = timing.QueueAccount(lambda: now[0])
    assert not account.enqueue(submit_taking(5e-6), 100e-6, timed=False)  # the spin: idle
    assert account.enqueue(submit_taking(5e-6), 10e-6)  # submitted while the spin runs
    now[0] = 1e-3  # the host stalls past everything enqueued
    assert not account.enqueue(submit_taking(5e-6), 10e-6)
    assert account.deficit_s == pytest.approx(1e-3 + 5e-6 - 110e-6)


# -- stopping -----------------------------------------------------------------------------------


def test_stops_on_precision_on_a_quiet_device():
    result = _measure(_sim(jitter=0.002), 1 << 16, cache="cold")[0]
    assert result.stopped_by == "precision"
    assert result.relative_ci <= 0.005
    assert len(result.samples_s) >= 10


def test_stops_on_max_samples_when_precision_is_out_of_reach():
    noisy = _sim(jitter=0.2)
    result = _measure(noisy, 1 << 16, cache="cold", max_samples=40, budget_s=100)[0]
    assert result.stopped_by == "max_samples"
    assert 40 <= len(result.samples_s) < 80


def test_a_short_cold_kernel_samples_its_minimum_time_before_precision_stops_it():
    """min_sampling_s: precision reached within a few samples does not stop a short cold
    kernel before the minimum (past max_samples too); the budget still bounds it."""
    quick = _measure(_sim(jitter=0.002), 1 << 16, cache="cold")[0]
    held = _measure(_sim(jitter=0.002), 1 << 16, cache="cold", min_sampling_s=0.05, max_samples=20)[
        0
    ]
    assert quick.stopped_by == "precision" and quick.samples_s
    assert held.stopped_by == "precision"
    assert len(held.samples_s) > max(20, 3 * len(quick.samples_s))
    assert held.extra["sampling_s"] >= 0.05 and held.extra["min_sampling_s"] == 0.05
    assert "min_sampling_s" not in quick.extra and quick.extra["sampling_s"] < 0.05
    # a minimum sampled in less time than it allows still takes its samples
    floored = _measure(_sim(jitter=0.002), 1 << 16, cache="cold", min_sampling_s=1e-6)[0]
    assert len(floored.samples_s) >= policy.STORED_MIN_SAMPLES > len(quick.samples_s)
    bounded = _measure(
        _sim(jitter=0.002), 1 << 16, cache="cold", min_sampling_s=0.05, budget_s=0.01
    )[0]
    assert bounded.stopped_by == "budget"


def test_the_minimum_sampling_time_leaves_hot_and_long_kernels_alone():
    quick = _measure(_sim(jitter=0.002), 1 << 16, cache="hot")[0]
    held = _measure(_sim(jitter=0.002), 1 << 16, cache="hot", min_sampling_s=0.05)[0]
    assert len(held.samples_s) == len(quick.samples_s)
    # a kernel of 100 us or more reaches the gate's tolerance without it
    long_quick = _measure(_sim(jitter=0.002), 1 << 26, cache="cold")[0]
    long_held = _measure(_sim(jitter=0.002), 1 << 26, cache="cold", min_sampling_s=0.05)[0]
    assert long_quick.time_s > policy.MIN_SAMPLING_BELOW_S
    assert len(long_held.samples_s) == len(long_quick.samples_s)


def test_stored_min_sampling_applies_to_cold_and_rotate_on_a_gpu_only():
    assert policy.stored_min_sampling_s("cuda", "cold", 1.0) == policy.STORED_MIN_SAMPLING_S
    assert policy.stored_min_sampling_s("hip", "rotate", 0.1) == 0.1  # within the budget
    assert policy.stored_min_sampling_s("cuda", "hot", 1.0) == 0.0
    assert policy.stored_min_sampling_s("sim", "cold", 1.0) == 0.0
    with pytest.raises(ConfigError, match="min_sampling_s"):
        MeasureSettings(min_sampling_s=-1.0)


def test_stops_on_budget_when_precision_is_out_of_reach():
    result = _measure(_sim(jitter=0.2), 1 << 16, cache="cold", budget_s=0.002)[0]
    assert result.stopped_by == "budget"
    assert result.relative_ci > 0.005


def test_warm_up_runs_before_sampling():
    result = _measure(_sim(), 1 << 16, cache="hot")[0]
    assert result.warmup_count >= 2 * measure.WARMUP_BATCH_SAMPLES


# -- results and bookkeeping ------------------------------------------------------------------


def test_every_field_is_filled():
    result = _measure(_sim(jitter=0.002), 1 << 16, cache="cold")[0]
    assert result.name == result.kernel == "vector_add"
    assert result.cache == "cold" and result.bytes_moved == 12 << 16
    assert result.time_ci_s[0] <= result.time_s <= result.time_ci_s[1]
    assert len(result.samples_s) >= 10
    assert result.efficiency == pytest.approx(result.bytes_moved / result.time_s / 5.3e12)
    assert (result.device_key, result.backend, result.simulated) == ("mi300x", "sim", True)
    assert result.device_name == get_device("mi300x").name
    assert result.grid == (256, 1, 1) and result.block == (256, 1, 1)
    assert result.wall_s > 0 and result.warmup_count > 0
    assert result.clocks is not None and result.clocks.source == "sim"
    assert result.resources is not None
    assert result.calibrated_efficiency is None and result.reference_efficiency is None


def test_the_result_carries_the_occupancy_worked_out_at_the_first_launch(monkeypatch):
    """The CUDA and HIP backends work out a launch shape's occupancy when it first launches,
    which is inside the measurement: the result must carry that, not the compile-time report."""
    backend = _sim(jitter=0.002)
    real_launch = backend.launch

    def launch(kernel, grid, block, args, **options):
        real_launch(kernel, grid, block, args, **options)
        kernel.resources = dataclasses.replace(kernel.resources, block_threads=256, occupancy=0.5)

    monkeypatch.setattr(backend, "launch", launch)
    result = _measure(backend, 1 << 16, cache="cold")[0]
    assert result.resources.occupancy == 0.5 and result.resources.block_threads == 256


def test_calibration_reports_efficiency_relative_to_the_reference_copy():
    result = _measure(_sim(), 1 << 20, cache="cold", calibrate=True)[0]
    # The sim streams the reference copy at 80% of peak (plus the 2 us launch overhead).
    reference_s = LAUNCH_OVERHEAD_S + 12 * MiB / (5.3e12 * 0.80)
    assert result.reference_efficiency == pytest.approx(12 * MiB / reference_s / 5.3e12, rel=1e-3)
    assert result.calibrated_efficiency == pytest.approx(
        result.efficiency / result.reference_efficiency
    )
    assert len(result.extra["reference_samples_s"]) >= 10


def test_calibration_cancels_drift_common_to_the_whole_device():
    # All of the +-7% run-to-run spread common to the device: efficiency moves between runs,
    # the efficiency relative to the reference copy does not.
    runs = [
        _measure(
            _sim(seed=seed, run_spread=0.07, common_fraction=1.0),
            1 << 18,
            cache="cold",
            calibrate=True,
        )[0]
        for seed in (1, 2, 3)
    ]
    efficiencies = [r.efficiency for r in runs]
    calibrated = [r.calibrated_efficiency for r in runs]
    assert max(efficiencies) / min(efficiencies) > 1.01
    assert max(calibrated) / min(calibrated) < 1.001


def test_a_throttled_run_is_flagged():
    assert _measure(_sim(throttle_probability=1.0), 4096, cache="hot")[0].clocks.throttled
    assert not _measure(_sim(), 4096, cache="hot")[0].clocks.throttled


def test_no_device_memory_leaks_across_many_measurements():
    backend = _sim("mi250x")
    counting = Counting(backend)
    kernel, args, _ = _vector_add(backend, 1 << 16)
    before = set(counting.live)
    for cache in ("cold", "hot", "rotate") * 3:
        measure_kernel(
            backend,
            kernel,
            grid=256,
            block=256,
            args=args,
            bytes_moved=12 << 16,
            device=get_device("mi250x"),
            settings=MeasureSettings(cache=cache, calibrate=True, reallocation_rounds=2),
        )
    assert len(counting.live - before) == 2  # the cached scratch buffer and its sink
    measure.release(backend)
    assert counting.live == before


def test_buffers_are_freed_when_the_launch_fails():
    backend = _sim()
    counting = Counting(backend)
    kernel, args, _ = _vector_add(backend, 1 << 16)
    before = set(counting.live)
    with pytest.raises(GpuPerfError, match="argument"):
        measure_kernel(
            backend,
            kernel,
            grid=1,
            block=1,
            args=args[:3],
            bytes_moved=12 << 16,
            device=get_device("mi300x"),
            settings=MeasureSettings(cache="rotate"),
        )
    measure.release(backend)
    assert counting.live == before


def _placed_vector_add(settings: MeasureSettings) -> tuple[Any, list[int], tuple, Any]:
    """A 4K vector add measured with `settings` on a fresh simulated backend: the result, the
    output buffer of every launch in order, the caller's arguments and the expected output;
    every buffer the engine allocated is freed again."""
    backend = _sim()
    kernel, args, expected = _vector_add(backend, 1 << 12)
    outputs: list[int] = []
    launch = backend.launch

    def spy(kernel_, grid, block, call_args, **options):
        if kernel_.name == "vector_add":
            outputs.append(call_args[2].ptr)
        launch(kernel_, grid, block, call_args, **options)

    backend.launch = spy  # type: ignore[method-assign]
    counting = Counting(backend)
    before = set(counting.live)
    result = measure_kernel(
        backend, kernel, grid=16, block=256, args=args, bytes_moved=12 << 12,
        device=get_device("mi300x"), settings=settings,
    )  # fmt: skip
    measure.release(backend)
    assert counting.live == before
    return result, outputs, args, expected


def test_reallocation_rounds_spread_samples_over_fresh_placements():
    result, outputs, args, expected = _placed_vector_add(
        MeasureSettings(cache="hot", reallocation_rounds=3)
    )
    assert len(set(outputs)) == 3 and args[2].ptr in outputs
    assert result.extra["reallocation_rounds"] == 3
    np.testing.assert_array_equal(args[2].download(np.float32), expected)


def test_a_spread_cold_measurement_takes_placements_and_ends_on_the_callers_buffers():
    result, outputs, args, expected = _placed_vector_add(
        MeasureSettings(cache="cold", spread_placements=True)
    )
    assert result.extra["reallocation_rounds"] == policy.PLACEMENT_SETS
    assert len(set(outputs)) == policy.PLACEMENT_SETS and outputs[-1] == args[2].ptr
    np.testing.assert_array_equal(args[2].download(np.float32), expected)


def test_spread_placements_stop_where_the_device_memory_runs_out():
    """A device that cannot hold all eight placements (other tensors fill it) measures on
    those it holds; the copies of the placement that failed are freed at once."""
    backend = _sim()
    kernel, args, expected = _vector_add(backend, 1 << 12)
    counting = Counting(backend)
    before = set(counting.live)
    alloc = backend.alloc
    made = [0]

    def short_of_memory(nbytes: int) -> DeviceBuffer:
        if nbytes == args[0].nbytes:  # room for two more copies of the three buffers
            made[0] += 1
            if made[0] > 6:
                raise OutOfDeviceMemory(f"cannot allocate {nbytes} bytes (test)")
        return alloc(nbytes)

    backend.alloc = short_of_memory  # type: ignore[method-assign]
    result = measure_kernel(
        backend, kernel, grid=16, block=256, args=args, bytes_moved=12 << 12,
        device=get_device("mi300x"),
        settings=MeasureSettings(cache="cold", spread_placements=True),
    )  # fmt: skip
    assert result.extra["reallocation_rounds"] == 3
    np.testing.assert_array_equal(args[2].download(np.float32), expected)
    backend.alloc = alloc  # type: ignore[method-assign]
    measure.release(backend)
    assert counting.live == before
    # without spread_placements a placement asked for must fit
    backend.alloc = short_of_memory  # type: ignore[method-assign]
    made[0] = 0
    with pytest.raises(OutOfDeviceMemory):
        measure_kernel(
            backend, kernel, grid=16, block=256, args=args, bytes_moved=12 << 12,
            device=get_device("mi300x"),
            settings=MeasureSettings(cache="cold", reallocation_rounds=8),
        )  # fmt: skip


@pytest.mark.parametrize(
    ("cache", "setup", "rounds", "expected"),
    [("hot", None, 1, 1), ("cold", lambda: None, 1, 1), ("cold", None, 3, 3)],
)
def test_spreading_leaves_hot_mode_a_setup_and_explicit_rounds_alone(
    cache: str, setup: Any, rounds: int, expected: int
):
    backend = _sim()
    kernel, args, _ = _vector_add(backend, 1 << 10)
    settings = MeasureSettings(cache=cache, spread_placements=True, reallocation_rounds=rounds)
    result = measure_kernel(
        backend, kernel, grid=4, block=256, args=args, bytes_moved=12 << 10,
        device=get_device("mi300x"), settings=settings, setup=setup,
    )  # fmt: skip
    assert result.extra["reallocation_rounds"] == expected


def test_placements_fit_the_memory_they_may_take():
    gib = 1 << 30
    assert policy.placement_sets_for(10 << 20, 80 * gib) == policy.PLACEMENT_SETS
    # 2 GiB of room: four more copies of 512 MiB
    assert policy.placement_sets_for(512 << 20, 80 * gib) == 5
    # a 16 GiB device gives a sixteenth: 1 GiB, two more copies of 512 MiB
    assert policy.placement_sets_for(512 << 20, 16 * gib) == 3
    assert policy.placement_sets_for(3 * gib, 80 * gib) == 1
    assert policy.placement_sets_for(0, 80 * gib) == 1


@pytest.mark.parametrize(
    "settings",
    [
        {"cache": "warm"},
        {"target_rel_ci": 0},
        {"confidence": 1.0},
        {"min_samples": 2},
        {"max_samples": 5},
        {"budget_s": 0},
        {"warmup_s": -1},
        {"reallocation_rounds": 0},
    ],
)
def test_bad_settings_are_refused_with_the_setting_named(settings):
    (name,) = settings
    with pytest.raises(ConfigError, match=name):
        MeasureSettings(**settings)


@pytest.mark.parametrize("bytes_moved", [0, -12, 1.5])
def test_bytes_moved_must_be_a_positive_integer(bytes_moved):
    backend = _sim()
    kernel, args, _ = _vector_add(backend, 1024)
    with pytest.raises(ConfigError, match="bytes_moved"):
        measure_kernel(
            backend,
            kernel,
            grid=4,
            block=256,
            args=args,
            bytes_moved=bytes_moved,
            device=get_device("mi300x"),
        )


def test_callables_are_timed_on_the_default_stream():
    backend = _sim()
    n = 1 << 16
    kernel, args, expected = _vector_add(backend, n)
    result = measure_callable(
        backend,
        lambda: backend.launch(kernel, n // 256, 256, args),
        bytes_moved=12 * n,
        device=get_device("mi300x"),
        settings=MeasureSettings(cache="cold"),
        name="vector add via a callable",
    )
    assert result.name == "vector add via a callable"
    assert result.time_s == pytest.approx(_model_s("mi300x", n), rel=1e-3)
    np.testing.assert_array_equal(args[2].download(np.float32), expected)


def test_a_host_too_slow_to_keep_the_queue_ahead_is_refused_with_the_way_out():
    # 100 ms per launch against a 2 us kernel: even the longest spin (20 ms) leaves every
    # launch on an idle device, and every sample is dropped rather than kept.
    with pytest.raises(ConfigError, match=r"only 0 usable samples .* dropped .* use cache='cold'"):
        _measure(_sim("mi250x", host_launch_s=0.1), 4096, cache="hot", budget_s=0.5)


def test_a_dropped_backend_is_not_kept_alive_by_the_engine():
    import gc
    import weakref

    backend = _sim()
    _measure(backend, 4096, cache="cold")
    alive = weakref.ref(backend)
    del backend
    gc.collect()
    assert alive() is None
