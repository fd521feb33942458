"""A/B pairs spread over buffer sets: where the buffers landed is a level of noise that a
second round on fresh buffers draws anew, so the first round measures it (load j on buffer
set j mod N) and its interval carries it. Synthetic data for the statistics, the simulated
device (a per-code-object, per-buffer placement offset) for the engine."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from pytest_gpuperf.engine import stats
from pytest_gpuperf.engine.measure import MeasureSettings, measure_pair, pair_buffer_sets, release
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.runtime.devices import get_device
from pytest_gpuperf.session.api import open_device
from pytest_gpuperf.simulate.device_model import Noise, SimSettings

LOADS = 8
KERNEL = """\
#include "gpuperf.h"
GPUPERF_KERNEL void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = SALT * x[i];
}
"""
N = 1 << 20


def _round(rng: np.random.Generator, sets: int, *, set_sd: float, load_sd: float) -> tuple:
    """One synthetic A/B round of 8 loads x 60 pairs, true log ratio 0: each load drifts by
    load_sd, each buffer set by set_sd (fresh draws every round, as fresh loads and fresh
    buffers give), jitter 1% per pair, quantised to a 0.4% timer step."""
    set_offsets = rng.normal(0.0, set_sd, sets)
    logs, groups = [], []
    for load in range(LOADS):
        centre = rng.normal(0.0, load_sd) + set_offsets[load % sets]
        pairs = centre + rng.normal(0.0, 0.01, 60)
        logs.extend(np.round(pairs / 0.004) * 0.004)
        groups.extend([load] * 60)
    return stats.nested_trimmed_mean(logs, groups)


@pytest.mark.parametrize("sets, at_least, at_most", [(LOADS, 0.90, 1.0), (1, 0.0, 0.75)])
def test_a_set_per_load_makes_the_interval_cover_a_placement_offset(sets, at_least, at_most):
    """With the buffers' offset (0.5%) larger than the loads' (0.1%), one buffer set leaves
    it out of the interval: the true ratio is covered far less than 95% of the time and a
    second round's estimate often falls outside. A set per load measures it between the
    loads: the 95% interval covers the truth 90-99% of 300 rounds, and the two rounds of a
    comparison agree within their combined error as often."""
    rng = np.random.default_rng(7)
    covered = agreed = 0
    runs = 300
    for _ in range(runs):
        first = _round(rng, sets, set_sd=0.005, load_sd=0.001)
        second = _round(rng, sets, set_sd=0.005, load_sd=0.001)
        low, high = first.interval(0.95)
        covered += low <= 0.0 <= high
        quantile = float(sps.t.ppf(0.975, min(first.df, second.df)))
        agreed += abs(first.estimate - second.estimate) <= quantile * math.hypot(
            first.se, second.se
        )
    assert at_least <= covered / runs <= at_most
    assert at_least <= agreed / runs <= at_most


def test_without_a_placement_offset_the_sets_cost_nothing_in_width():
    """Where the buffers do not matter, spreading the loads over sets changes nothing: the
    interval is as wide as with one set (the same groups, the same variance)."""
    widths = {}
    for sets in (1, LOADS):
        rng = np.random.default_rng(3)
        found = [_round(rng, sets, set_sd=0.0, load_sd=0.001) for _ in range(100)]
        widths[sets] = float(np.median([f.interval(0.95)[1] - f.interval(0.95)[0] for f in found]))
    assert widths[LOADS] == pytest.approx(widths[1], rel=0.15)


# -- how many sets a pair takes ------------------------------------------------------------


class _Buffer:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


def test_pair_buffer_sets_rules():
    buffers = [_Buffer(1 << 20), _Buffer(1 << 20)]
    memory = 80 << 30

    def sets_for(wanted, loads=8, copies=1, given=buffers, setup=False, hot=0):
        return pair_buffer_sets(
            wanted, loads, copies, given, has_setup=setup, memory_bytes=memory, hot_cache_bytes=hot
        )

    assert sets_for(8) == (8, "")
    assert sets_for(16) == (8, "")  # one per load at most
    assert sets_for(4) == (4, "")
    assert sets_for(8, loads=1) == (1, "")
    sets, why = sets_for(8, setup=True)
    assert sets == 1 and "setup=" in why
    sets, why = sets_for(8, given=[])
    assert sets == 1 and "no buffer" in why
    # the copies (not the caller's own buffers) may take half of the device memory, 40 GiB:
    # one copy of 2 x 16 GiB fits, a second does not; one of 2 x 24 GiB does not
    sets, why = sets_for(8, given=[_Buffer(16 << 30)] * 2)
    assert sets == 2 and "half the device memory" in why and "2 used" in why
    sets, why = sets_for(8, given=[_Buffer(24 << 30)] * 2)
    assert sets == 1 and "1 used" in why
    assert sets_for(8, given=[_Buffer(4 << 30)]) == (8, "")
    sets, why = sets_for(8, copies=2, given=[_Buffer(4 << 30)])  # rotate: 2 copies a set
    assert sets == 5 and "5 used" in why
    # hot: 2 MiB of buffers, 6 MiB of caches hold 3 sets; a working set larger than the
    # caches streams through them anyway, and 8 sets cost nothing more
    sets, why = sets_for(8, hot=6 << 20)
    assert sets == 3 and "the caches hold 3 sets" in why
    assert sets_for(8, hot=1 << 20) == (8, "")
    assert sets_for(8, hot=64 << 20) == (8, "")


# -- the simulated device ----------------------------------------------------------------


def _pair(tmp_path: Path, seed: int, sets: int | None, spread: float, **options):
    """A/A' on the simulated device: two code objects of the same work (SALT 1.0 and 1.00),
    so the truth is a ratio of 1; no run drift but the per-buffer offset of each code
    object (buffer_code_spread) and a little jitter."""
    path = tmp_path / "scale.hip"
    path.write_text(KERNEL)
    with (
        warnings.catch_warnings(),
        open_device(
            "sim", seed=seed, common_fraction=1.0, buffer_code_spread=spread, jitter=0.002
        ) as device,
    ):
        warnings.simplefilter("ignore")  # no output model: the times are what is tested
        head = device.kernel(path, "scale", defines={"SALT": "1.0f"})
        base = device.kernel(path, "scale", defines={"SALT": "1.00f"})
        x, y = device.to_device(np.ones(N, np.float32)), device.empty(N)
        before = len(device.backend._allocations)
        paired = measure_pair(
            device.backend,
            head,
            base,
            grid=N // 256,
            block=256,
            args=(x, y, np.int32(N)),
            bytes_moved=8 * N,
            device=device.spec,
            settings=MeasureSettings(budget_s=0.02),
            seed=seed,
            buffer_sets=sets,
            **options,
        )
        release(device.backend)  # the engine's flush buffer and sink, cached per backend
        assert len(device.backend._allocations) == before  # every copy was freed
        return paired


def test_on_the_simulated_device_one_set_misses_the_offset_and_a_set_per_load_covers_it(
    tmp_path,
):
    """Two code objects of equal speed, each with its own +-3% offset per buffer it touches:
    on the caller's buffers alone the pair sees one draw of it, a narrow interval around it
    that leaves the truth (1) out most of the time; a set per load measures it (drift > 0)
    and the interval holds 1."""
    one = [_pair(tmp_path, seed, 1, 0.03) for seed in range(12)]
    per_load = [_pair(tmp_path, seed, None, 0.03) for seed in range(12)]
    assert all(p.buffer_sets == 1 and p.buffer_sets_note == "" for p in one)
    assert all(p.buffer_sets == LOADS for p in per_load)
    assert sum(p.ratio_ci[0] <= 1.0 <= p.ratio_ci[1] for p in one) <= 6
    assert sum(p.ratio_ci[0] <= 1.0 <= p.ratio_ci[1] for p in per_load) >= 11
    assert all(p.drift > 0 and p.drift_basis == "measured" for p in per_load)


def test_a_set_per_load_spreads_the_pairs_and_frees_its_copies(tmp_path):
    paired = _pair(tmp_path, 5, None, 0.0)
    assert paired.buffer_sets == LOADS and sorted(set(paired.pair_loads)) == list(range(LOADS))
    fewer = _pair(tmp_path, 5, 3, 0.0)
    assert fewer.buffer_sets == 3
    reset = _pair(tmp_path, 5, None, 0.0, setup=lambda: None)
    assert reset.buffer_sets == 1 and "setup=" in reset.buffer_sets_note
    with pytest.raises(ConfigError, match="buffer_sets must be a whole number"):
        _pair(tmp_path, 5, 0, 0.0)


def test_the_sim_offset_belongs_to_the_code_object_and_the_buffer():
    """Every load of one code object on one buffer shares the offset (a second load does not
    draw it anew; a fresh buffer does); identical code on identical buffers cancels in a
    pair; freeing a buffer forgets its draws."""
    noise = Noise(SimSettings(device=get_device("mi300x"), seed=1, buffer_code_spread=0.04), 0)
    touched = {0: 100, 1: 100}
    a0 = noise.parts("sha256:a@load0", touched, "sha256:a").buffer_code
    a1 = noise.parts("sha256:a@load1", touched, "sha256:a").buffer_code
    b0 = noise.parts("sha256:b@load0", touched, "sha256:b").buffer_code
    fresh = noise.parts("sha256:a@load0", {2: 100, 3: 100}, "sha256:a").buffer_code
    assert a0 == a1 != 1.0 and b0 != a0 and fresh != a0
    noise.forget(0)
    assert ("sha256:a", 0) not in noise._buffer_code_log
    none = Noise(SimSettings(device=get_device("mi300x"), seed=1), 0)
    assert none.parts("sha256:a@load0", touched, "sha256:a").buffer_code == 1.0
    with pytest.raises(ConfigError, match="buffer_code_spread"):
        SimSettings(device=get_device("mi300x"), seed=1, buffer_code_spread=1.5)


def test_the_sim_offset_from_the_environment(monkeypatch):
    monkeypatch.setenv("GPUPERF_SIM_BUFFER_CODE_SPREAD", "0.02")
    with open_device("sim", seed=1) as device:
        assert device.backend.settings.buffer_code_spread == 0.02
    monkeypatch.setenv("GPUPERF_SIM_BUFFER_CODE_SPREAD", "lots")
    with pytest.raises(ConfigError, match="GPUPERF_SIM_BUFFER_CODE_SPREAD must be a fraction"):
        open_device("sim", seed=1)
