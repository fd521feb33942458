"""The library front door (pytest_gpuperf.open_device) on the simulated MI300X: what its
docstring shows works, its buffers are checked and freed, and bad input is a clear error."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_gpuperf as gp
from pytest_gpuperf.engine import stats
from pytest_gpuperf.session.buffers import POISON_BYTE

N = 1 << 20


@pytest.fixture
def device():
    with gp.open_device("sim", seed=7) as opened:
        yield opened


def vector_add(device):
    kernel = device.kernel("kernels/vector_add.hip", "vector_add")  # shipped with the plugin
    a = np.random.default_rng(0).random(N, dtype=np.float32)
    da, db, dc = device.to_device(a), device.to_device(a), device.empty(N)
    return kernel, a, (da, db, dc, N)


def test_measure_a_kernel_and_read_its_output(device):
    kernel, a, args = vector_add(device)
    m = device.measure(kernel, grid=N // 256, block=256, args=args, bytes=12 * N)
    assert m.simulated and m.device_key == "mi300x" and m.bytes_moved == 12 * N
    assert 0.3 < m.efficiency < 0.8
    np.testing.assert_array_equal(device.from_device(args[2], np.float32, N), a + a)
    assert device.spec.key == "mi300x" and device.simulated


def test_compare_two_builds_stops_when_decided(device):
    kernel, _, args = vector_add(device)
    paired = device.compare(
        kernel, kernel, grid=N // 256, block=256, args=args, bytes=12 * N, threshold=0.005
    )
    low, high = paired.ratio_ci
    assert low <= 1.0 <= high and paired.pairs >= 10


def test_empty_is_poisoned_and_shapes_are_checked(device):
    out = device.empty((4, 8), np.float32)
    assert out.nbytes == 128
    raw = device.from_device(out, np.uint8)
    assert (raw == POISON_BYTE).all()
    with pytest.raises(gp.ConfigError, match="empty: shape must not be negative"):
        device.empty(-1)
    with pytest.raises(gp.ConfigError, match="empty: shape must be whole numbers"):
        device.empty(2.5)
    # numpy would read -1 as "the rest" and hand back every element without a word
    with pytest.raises(gp.ConfigError, match="from_device: shape must not be negative"):
        device.from_device(out, np.float32, -1)
    # more elements than the buffer holds: one line naming both, as gpu_bench.from_device says
    with pytest.raises(gp.ConfigError, match=r"from_device: shape \(3, 16\) needs 48 x float32"):
        device.from_device(out, np.float32, (3, 16))
    np.testing.assert_array_equal(device.from_device(out, np.uint8, (2, 3)), raw[:6].reshape(2, 3))


def test_bytes_must_be_a_positive_whole_number(device):
    kernel, _, args = vector_add(device)
    for bad in (0, -1, 12.0 * N, True):
        with pytest.raises(gp.ConfigError, match="bytes must be a positive whole number"):
            device.measure(kernel, grid=N // 256, block=256, args=args, bytes=bad)


def test_close_frees_what_the_device_allocated():
    device = gp.open_device("sim", seed=7)
    buffers = [device.to_device(np.ones(16, np.float32)), device.empty(16)]
    device.close()
    assert all(buffer.freed for buffer in buffers)


def test_a_pair_spreads_its_pairs_over_the_loads_and_measures_their_drift():
    """Each side loaded 8 times; the pairs go round the loads; the interval carries the
    drift between loads the run measured: at a code share of 30% (+-3.8% per load) it is
    several times what the pairs alone say, and it still contains 1 for identical code."""
    with gp.open_device("sim", seed=3, common_fraction=0.4, placement_fraction=0.3) as device:
        kernel, a, args = vector_add(device)
        paired = device.compare(kernel, kernel, grid=N // 256, block=256, args=args, bytes=12 * N)
        np.testing.assert_array_equal(device.from_device(args[2], np.float32, N), a + a)
    assert paired.loads == 8 and paired.drift_basis == "measured"
    assert len(paired.pair_loads) == paired.pairs == len(paired.base.samples_s)
    counts = np.bincount(paired.pair_loads, minlength=8)
    assert counts.min() >= 3 and counts.max() - counts.min() <= paired.pairs // 4 + 8
    logs = np.log(np.array(paired.head.samples_s) / np.array(paired.base.samples_s))
    found = stats.nested_trimmed_mean(logs, paired.pair_loads)
    assert paired.ratio == pytest.approx(found.ratio, rel=1e-12)
    assert paired.log_ratio_se > 2 * paired.within_se and paired.df == 7
    assert 0.01 < paired.drift < 0.08
    low, high = paired.ratio_ci
    assert low <= 1.0 <= high
    wider = paired.ratio_ci_at(0.99)
    assert wider[0] < low and wider[1] > high


def test_one_load_per_side_has_no_drift_to_measure(device):
    kernel, _, args = vector_add(device)
    paired = device.compare(
        kernel, kernel, grid=N // 256, block=256, args=args, bytes=12 * N, loads=1
    )
    assert paired.loads == 1 and paired.drift_basis == "none" and set(paired.pair_loads) == {0}
    with pytest.raises(gp.ConfigError, match="loads must be a whole number"):
        device.compare(kernel, kernel, grid=N // 256, block=256, args=args, bytes=12 * N, loads=0)


def test_the_extra_loads_are_unloaded_after_the_pair(monkeypatch, device):
    kernel, _, args = vector_add(device)
    loaded, unloaded = [], []
    backend = device.backend
    original = backend.load_again

    def load_again(module):
        loaded.append(original(module))
        return loaded[-1]

    monkeypatch.setattr(backend, "load_again", load_again)
    monkeypatch.setattr(backend, "unload", unloaded.append)
    device.compare(kernel, kernel, grid=N // 256, block=256, args=args, bytes=12 * N, loads=3)
    assert len(loaded) == 4 and unloaded == loaded
