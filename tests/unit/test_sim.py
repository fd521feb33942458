"""The simulated device (simulate/): memory, launches and the timing model.

Its noise is tested in test_sim_noise.py, models of users' kernels in test_sim_models.py,
and what it does instead of compiling in test_sim_source.py.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import numpy as np
import pytest

from pytest_gpuperf import simulate
from pytest_gpuperf.errors import (
    ArgumentError,
    ConfigError,
    GpuPerfError,
    LaunchError,
    OutOfDeviceMemory,
)
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.devices import get_device
from pytest_gpuperf.simulate import device as sim_module
from pytest_gpuperf.simulate.device import SimBackend

MiB = 2**20
# A user's kernels (not the plugin's): the default efficiency, and a directive.
SOURCE = """#include "gpuperf.h"

GPUPERF_KERNEL void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { c[i] = a[i] + b[i]; }
}

// gpuperf-sim: efficiency=0.55
GPUPERF_KERNEL void slow_copy(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { b[i] = a[i]; }
}
"""
VECTOR_ADD = KERNELS_DIR / "vector_add.hip"  # the plugin's own: the seed's efficiency
INTERNAL = KERNELS_DIR / "gpuperf_internal.hip"  # the measurement engine's kernels


def _open(**options) -> SimBackend:
    options.setdefault("seed", 1234)
    return sim_module.open(0, **options)


@pytest.fixture
def sim():
    backend = _open()
    yield backend
    backend.close()


@pytest.fixture
def exact():
    """No drift, no jitter: times follow the formula exactly."""
    backend = _open(run_spread=0.0, jitter=0.0)
    yield backend
    backend.close()


@pytest.fixture
def user_source(tmp_path) -> Path:
    path = tmp_path / "kernels.hip"
    path.write_text(SOURCE)
    return path


def _vectors(sim, n, count=3):
    rng = np.random.default_rng(0)
    return [sim.to_device(rng.random(n, dtype=np.float32)) for _ in range(count)]


def _timed(sim, launch, *, ahead=True, launches=1) -> float:
    """Seconds per launch from one event pair; `ahead` puts a 2 ms spin in front first."""
    spin = sim.compile(INTERNAL).kernel("gpuperf_spin")
    if ahead:
        sim.launch(spin, 1, 1, (2_000_000,))
    start, end = sim.create_event(), sim.create_event()
    sim.record_event(start)
    for _ in range(launches):
        launch()
    sim.record_event(end)
    return sim.elapsed_s(start, end) / launches


def _add(sim, buffers, n):
    kernel = sim.compile(VECTOR_ADD).kernel("vector_add")
    return lambda: sim.launch(kernel, (n + 255) // 256, 256, (*buffers, n))


# -- what it reports -------------------------------------------------------------------------


def test_everything_it_reports_says_simulated(sim):
    info = sim.info
    assert (info.backend, info.simulated, sim.simulated) == ("sim", True, True)
    assert info.name == "Simulated AMD Instinct MI300X"
    assert (info.arch, info.compute_units, info.warp_size) == ("gfx942", 304, 64)
    assert "simulated" in info.runtime_version and info.driver_version == "simulated"
    assert sim.read_clocks().source == "sim"


def test_open_backend_finds_it_by_name():
    backend = open_backend("sim", 0, device="h100-sxm", seed=5)
    assert backend.info.name == "Simulated NVIDIA H100 SXM 80GB"
    assert (backend.info.arch, backend.info.warp_size, backend.seed) == ("sm_90", 32, 5)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("run_spread", -0.1),
        ("common_fraction", 1.5),
        ("jitter", -1),
        ("cache_speedup", 0.5),
        ("throttle_probability", 2),
        ("kernel_slowdown", {"vector_add": 0}),
        ("kernel_efficiency", {"vector_add": 1.2}),
    ],
)
def test_bad_options_are_refused_by_name(option, value):
    with pytest.raises(ConfigError, match=option):
        _open(**{option: value})


def test_an_unknown_device_lists_the_known_ones():
    with pytest.raises(ConfigError, match="mi300x"):
        _open(device="mi9000")


# -- memory ----------------------------------------------------------------------------------


def test_data_really_moves(sim):
    values = np.arange(1000, dtype=np.float32)
    buffer = sim.to_device(values)
    np.testing.assert_array_equal(buffer.download(np.float32), values)
    other = sim.alloc(buffer.nbytes)
    sim.copy(other, buffer)
    np.testing.assert_array_equal(other.download(np.float32), values)
    sim.fill(other, 0xFF)
    assert (other.download(np.uint8) == 0xFF).all()
    sim.copy(other, buffer, 400)  # the first 100 floats only
    result = other.download(np.float32)
    np.testing.assert_array_equal(result[:100], values[:100])
    assert np.isnan(result[100:]).all()  # 0xFFFFFFFF is a NaN


def test_fill_zero_of_a_fresh_buffer_still_reads_zeros(sim):
    buffer = sim.alloc(4096)
    sim.fill(buffer, 0)
    assert not buffer.download(np.uint8).any()
    buffer.upload(np.ones(16, np.uint8))
    sim.fill(buffer, 0)
    assert not buffer.download(np.uint8).any()


def test_addresses_are_aligned_and_never_overlap(sim):
    buffers = [sim.alloc(size) for size in (1, 5000, 1 << 20, 3)]
    sim.free(buffers[1])
    buffers.append(sim.alloc(5000))
    live = [b for b in buffers if not b.freed]
    assert all(b.ptr % sim_module.ALIGNMENT == 0 for b in buffers)
    spans = sorted((b.ptr, b.ptr + b.nbytes) for b in buffers)
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))
    assert len({b.ptr for b in buffers}) == len(buffers) and len(live) == 4


def test_allocating_beyond_device_memory_names_requested_and_free_bytes(sim):
    total = get_device("mi300x").memory_bytes
    sim.alloc(1 << 30)
    with pytest.raises(OutOfDeviceMemory) as error:
        sim.alloc(total)
    message = str(error.value)
    assert str(total) in message and f"{total - (1 << 30)} bytes free" in message


def test_freed_buffers_are_refused(sim):
    buffer = sim.alloc(64)
    buffer.free()
    with pytest.raises(GpuPerfError, match="already freed"):
        buffer.download()
    with pytest.raises(GpuPerfError, match="already freed"):
        sim.free(buffer)


def test_copies_out_of_bounds_are_refused(sim):
    small, large = sim.alloc(16), sim.alloc(64)
    with pytest.raises(GpuPerfError, match="cannot copy 64 bytes"):
        sim.copy(small, large)
    with pytest.raises(GpuPerfError, match="cannot upload"):
        small.upload(np.zeros(8, np.float32))


# -- launches --------------------------------------------------------------------------------


def test_argument_errors_come_before_any_launch(sim):
    kernel = sim.compile(VECTOR_ADD).kernel("vector_add")
    a, b, c = _vectors(sim, 16)
    before = (sim.host_clock(), sum(sim.launch_counts.values()))
    with pytest.raises(ArgumentError, match="takes 4 arguments"):
        sim.launch(kernel, 1, 16, (a, b, c))
    with pytest.raises(ArgumentError, match="device buffer"):
        sim.launch(kernel, 1, 16, (a, b, np.zeros(16, np.float32), 16))
    with pytest.raises(ArgumentError, match="another backend"):
        sim.launch(kernel, 1, 16, (a, b, _open().alloc(64), 16))
    with pytest.raises(LaunchError, match="2048 threads"):
        sim.launch(kernel, 1, 2048, (a, b, c, 16))
    assert (sim.host_clock(), sum(sim.launch_counts.values())) == before


def test_the_plugins_own_kernels_compute_their_outputs(sim):
    a, b, c = _vectors(sim, 4096)
    _add(sim, (a, b, c), 4096)()
    expected = a.download(np.float32) + b.download(np.float32)
    np.testing.assert_array_equal(c.download(np.float32), expected)
    assert sim.unmodelled_kernels == frozenset()


def test_a_users_kernel_with_a_catalog_name_gets_no_catalog_model(sim, user_source):
    """`vector_add` in the user's own file is the user's kernel, whatever its name."""
    a, b, c = _vectors(sim, 64)
    before = c.download(np.float32)
    kernel = sim.compile(user_source).kernel("vector_add")
    with pytest.warns(simulate.SimulationWarning, match="NOT computed") as record:
        sim.launch(kernel, 1, 64, (a, b, c, 64))
    message = str(record[0].message)
    assert "'vector_add'" in message and str(user_source) in message
    assert "simulate.model(" in message and "every buffer argument" in message
    np.testing.assert_array_equal(c.download(np.float32), before)
    assert sim.unmodelled_kernels == {(str(user_source), "vector_add")}


def test_the_missing_model_warning_comes_once_per_kernel(sim, user_source):
    module = sim.compile(user_source)
    a, b, c = _vectors(sim, 64)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(3):
            sim.launch(module.kernel("vector_add"), 1, 64, (a, b, c, 64))
            sim.launch(module.kernel("slow_copy"), 1, 64, (a, b, 64))
    kinds = [w.category for w in record]
    assert kinds == [simulate.SimulationWarning] * 2


def test_a_source_string_has_no_model(sim):
    a, b, c = _vectors(sim, 64)
    kernel = sim.compile(SOURCE, name="test.hip").kernel("vector_add")
    with pytest.warns(simulate.SimulationWarning, match="source string"):
        sim.launch(kernel, 1, 64, (a, b, c, 64))
    assert sim.unmodelled_kernels == {("<string>", "vector_add")}


def test_a_base_version_built_elsewhere_keeps_its_files_models(sim, tmp_path):
    """An A/B comparison builds the base revision's copy of a file from another directory;
    `module.origin_path`, set before its kernels are looked up, names the file whose models
    (here: the plugin's catalog and reference efficiency) apply."""
    base_path = tmp_path / "base-tree" / "kernels" / "vector_add.hip"
    base_path.parent.mkdir(parents=True)
    base_path.write_text(
        VECTOR_ADD.read_text().replace("c[idx] = a[idx] + b[idx];", "c[idx] = b[idx] + a[idx];")
    )
    (base_path.parent / "gpuperf.h").write_text((KERNELS_DIR / "gpuperf.h").read_text())
    module = sim.compile(base_path)
    module.origin_path = VECTOR_ADD
    base = module.kernel("vector_add")
    a, b, c = _vectors(sim, 256)
    sim.launch(base, 1, 256, (a, b, c, 256))
    expected = a.download(np.float32) + b.download(np.float32)
    np.testing.assert_array_equal(c.download(np.float32), expected)
    assert sim.efficiency_of(base) == 0.7185
    head = sim.compile(VECTOR_ADD).kernel("vector_add")
    assert sim.kernel_fingerprint(base) != sim.kernel_fingerprint(head)
    with pytest.warns(simulate.SimulationWarning, match="base-tree"):  # without: a user file
        sim.launch(sim.compile(base_path).kernel("vector_add"), 1, 256, (a, b, c, 256))


def test_an_emulation_out_of_bounds_is_a_launch_error(sim):
    a, b, c = _vectors(sim, 64)
    with pytest.raises(LaunchError, match="out-of-bounds"):
        _add(sim, (a, b, c), 65)()


def test_internal_kernels_copy_and_only_read(sim):
    module = sim.compile(INTERNAL)
    source = sim.to_device(np.arange(64, dtype=np.uint32))
    target, sink = sim.alloc(256), sim.alloc(16)
    sim.launch(module.kernel("gpuperf_copy_ref"), 1, 64, (source, target, 16))
    np.testing.assert_array_equal(target.download(np.uint32), np.arange(64))
    sim.launch(module.kernel("gpuperf_flush"), 1, 64, (source, 16, sink))
    assert not sink.download(np.uint8).any()
    with pytest.raises(LaunchError, match="overrun"):
        sim.launch(module.kernel("gpuperf_flush"), 1, 64, (source, 17, sink))


def test_the_reference_copy_follows_its_source_after_it_changes(sim):
    copy_ref = sim.compile(INTERNAL).kernel("gpuperf_copy_ref")
    source, target = sim.to_device(np.arange(64, dtype=np.uint32)), sim.alloc(256)
    for values in (np.arange(64), np.arange(64) * 3):
        source.upload(values.astype(np.uint32))
        for _ in range(2):
            sim.launch(copy_ref, 1, 64, (source, target, 16))
        np.testing.assert_array_equal(target.download(np.uint32), values)


# -- the timing model ------------------------------------------------------------------------


def test_a_cold_400mb_vector_add_on_mi300x_runs_at_the_seeds_efficiency(sim):
    n = 32 * MiB  # the seed's 32M fp32 elements: 384 MiB moved
    kernel, buffers = sim.compile(VECTOR_ADD).kernel("vector_add"), _vectors(sim, n)
    # Freshly uploaded buffers are not in any cache.
    time_s = _timed(sim, lambda: sim.launch(kernel, n // 256, 256, (*buffers, n)))
    bytes_moved, peak = 12 * n, 5.3e12
    nominal_s = sim.settings.launch_overhead_s + bytes_moved / (peak * 0.7185)
    drift = sim.run_drift(kernel, (*buffers, n))
    assert time_s == pytest.approx(nominal_s * drift, rel=4 * sim.settings.jitter)
    efficiency = bytes_moved / time_s / peak
    assert efficiency * drift == pytest.approx(0.7185, rel=0.03)  # 2 us of launch overhead


def test_time_follows_the_formula_exactly_without_noise(exact):
    n = 4 * MiB
    time_s = _timed(exact, _add(exact, _vectors(exact, n), n))
    assert time_s == pytest.approx(2e-6 + 12 * n / (5.3e12 * 0.7185), rel=1e-12)


def test_hot_small_buffers_are_faster_than_cold(exact):
    n = MiB
    launch = _add(exact, _vectors(exact, n), n)
    cold_s = _timed(exact, launch)
    hot_s = _timed(exact, launch)
    transfer_s = 12 * n / (5.3e12 * 0.7185)
    assert cold_s == pytest.approx(2e-6 + transfer_s)
    assert hot_s == pytest.approx(2e-6 + transfer_s / exact.settings.cache_speedup)


def test_a_read_flush_of_the_cache_size_makes_the_next_launch_cold(exact):
    n = MiB
    launch = _add(exact, _vectors(exact, n), n)
    cold_s, _ = _timed(exact, launch), _timed(exact, launch)
    module = exact.compile(INTERNAL)
    cache_bytes = get_device("mi300x").cache_bytes
    scratch, sink = exact.alloc(cache_bytes), exact.alloc(16)
    flush = module.kernel("gpuperf_flush")
    exact.launch(flush, 1024, 256, (scratch, cache_bytes // 32, sink))  # half: not enough
    assert _timed(exact, launch) < cold_s
    exact.launch(flush, 1024, 256, (scratch, cache_bytes // 16, sink))
    assert _timed(exact, launch) == pytest.approx(cold_s)


def test_rotating_over_more_than_the_caches_always_misses(exact):
    n = 8 * MiB  # 96 MiB per set; 6 sets = 576 MiB = 2 x the MI300X caches
    launches = [_add(exact, _vectors(exact, n), n) for _ in range(6)]
    cold_s = 2e-6 + 12 * n / (5.3e12 * 0.7185)
    for _ in range(2):
        for launch in launches:
            assert _timed(exact, launch) == pytest.approx(cold_s)


def test_a_lone_launch_on_an_idle_queue_times_the_host_not_the_kernel(exact):
    n = 1024
    launch = _add(exact, _vectors(exact, n), n)
    _timed(exact, launch)  # warm the caches: both timings below see the same kernel
    kernel_s = _timed(exact, launch, ahead=True)
    exact.synchronize()
    lone_s = _timed(exact, launch, ahead=False)
    host_s = exact.settings.host_launch_s
    assert lone_s == pytest.approx(kernel_s + host_s)
    assert lone_s > 2.5 * kernel_s
    # Batching on an idle queue does not help a kernel shorter than the host's launch cost.
    exact.synchronize()
    batched_s = _timed(exact, launch, ahead=False, launches=20)
    assert batched_s == pytest.approx(host_s + kernel_s / 20)
    assert _timed(exact, launch, ahead=True, launches=20) == pytest.approx(kernel_s)


def test_a_flush_in_front_keeps_the_queue_ahead_of_the_host(exact):
    n = 1024
    launch = _add(exact, _vectors(exact, n), n)
    cold_s = _timed(exact, launch)
    cache_bytes = get_device("mi300x").cache_bytes
    flush = exact.compile(INTERNAL).kernel("gpuperf_flush")
    scratch, sink = exact.alloc(cache_bytes), exact.alloc(16)
    exact.synchronize()  # idle, as a lone launch would find it
    exact.launch(flush, 1024, 256, (scratch, cache_bytes // 16, sink))
    assert _timed(exact, launch, ahead=False) == pytest.approx(cold_s)


def test_the_spin_kernel_takes_its_argument_as_time(exact):
    spin = exact.compile(INTERNAL).kernel("gpuperf_spin")
    time_s = _timed(exact, lambda: exact.launch(spin, 1, 1, (300_000,)))
    assert time_s == pytest.approx(300e-6 + exact.settings.launch_overhead_s)


@pytest.mark.filterwarnings("ignore::pytest_gpuperf.simulate.SimulationWarning")
def test_a_source_directive_makes_a_kernel_slow_and_options_override_it():
    n = 16 * MiB
    for options, efficiency in (({}, 0.55), ({"kernel_efficiency": {"slow_copy": 0.4}}, 0.4)):
        backend = _open(run_spread=0.0, jitter=0.0, **options)
        kernel = backend.compile(SOURCE).kernel("slow_copy")
        a, b = _vectors(backend, n, 2)
        time_s = _timed(
            backend, lambda s=backend, k=kernel, x=a, y=b: s.launch(k, 1, 256, (x, y, n))
        )
        assert time_s == pytest.approx(2e-6 + 8 * n / (5.3e12 * efficiency))


def test_kernel_slowdown_scales_that_kernel_only():
    n = 4 * MiB
    times = {}
    for slowdown in (None, {"vector_add": 1.10}):
        backend = _open(seed=99, kernel_slowdown=slowdown)
        launch = _add(backend, _vectors(backend, n), n)
        times[bool(slowdown)] = [_timed(backend, launch) for _ in range(3)]
    np.testing.assert_allclose(np.array(times[True]) / times[False], 1.10, rtol=1e-12)


def test_streams_order_their_own_work_and_events_read_the_device_clock(exact):
    n = 8 * MiB
    kernel = exact.compile(VECTOR_ADD).kernel("vector_add")
    buffers = _vectors(exact, n)
    stream = exact.create_stream()
    before, after = exact.create_event(), exact.create_event()
    exact.record_event(before, stream)
    exact.launch(kernel, 1, 256, (*buffers, n), stream=stream)
    exact.record_event(after, stream)
    idle = exact.create_event()
    exact.record_event(idle)  # the default stream has nothing queued: it reads "now"
    assert idle.time_s < after.time_s
    exact.synchronize(stream)
    assert exact.host_clock() >= after.time_s
    assert exact.elapsed_s(before, after) > 12 * n / (5.3e12 * 0.7185)
    with pytest.raises(GpuPerfError, match="never recorded"):
        exact.elapsed_s(before, exact.create_event())


def test_uploads_wait_for_the_device_and_cross_the_host_link(exact):
    buffer = exact.alloc(64 * MiB)
    start_s = exact.host_clock()
    buffer.upload(np.ones(16 * MiB, np.float32))
    assert exact.host_clock() - start_s == pytest.approx(
        sim_module.HOST_SYNC_S + 64 * MiB / sim_module.HOST_LINK_BPS
    )


def test_a_closed_device_refuses_work():
    backend = _open()
    backend.close()
    with pytest.raises(GpuPerfError, match="closed"):
        backend.alloc(16)


def test_the_nvidia_model_uses_the_h100_measurements():
    backend = _open(device="h100-sxm", run_spread=0.0, jitter=0.0)
    n = 32 * MiB
    time_s = _timed(backend, _add(backend, _vectors(backend, n), n))
    assert time_s == pytest.approx(2e-6 + 12 * n / (3.35e12 * 0.806))


def test_the_device_docs_exist_and_name_every_option():
    docs = Path(__file__).parents[2] / "docs" / "simulated-device.md"
    text = docs.read_text()
    for option in (
        "run_spread",
        "common_fraction",
        "jitter",
        "launch_overhead_s",
        "host_launch_s",
        "cache_speedup",
        "throttle_probability",
        "kernel_slowdown",
        "kernel_efficiency",
        "placement_fraction",
        sim_module.SEED_ENV,
        "simulate.model(",
        "simulate.register(",
        "simulate.unregister(",
        "simulate.scoped(",
        "SimulationWarning",
        "kernel_fingerprint",
        "reads_outputs",
        "traffic_bytes",
    ):
        assert option in text
    for private in ("DESIGN.md", "STYLE.md", "seeds/"):  # not in the repository
        assert private not in text
