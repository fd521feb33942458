"""The simulated device's noise (simulate/device_model.py): seeds, the three parts of the run
drift, what an A/B comparison on one set of buffers can and cannot cancel, jitter, throttling.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pytest_gpuperf import simulate
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.simulate import device as sim_module
from pytest_gpuperf.simulate.device import SimBackend

MiB = 2**20
VECTOR_ADD = KERNELS_DIR / "vector_add.hip"
INTERNAL = KERNELS_DIR / "gpuperf_internal.hip"
SCALE = """#include "gpuperf.h"
// {comment}
GPUPERF_KERNEL void scale(const float* a, float* b, float s, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{ b[i] = {body}; }}
}}
"""


def _open(**options) -> SimBackend:
    options.setdefault("seed", 1234)
    return sim_module.open(0, **options)


@pytest.fixture
def versions(tmp_path) -> dict[str, Path]:
    """One kernel `scale` in three versions: base, a comment-only change, a code change;
    each with a model, as a user's conftest.py would register it."""
    sources = {
        "base": SCALE.format(comment="base", body="s * a[i]"),
        "comment": SCALE.format(comment="only this comment changed", body="s * a[i]"),
        "head": SCALE.format(comment="head", body="a[i] * s"),
    }
    paths = {}
    with simulate.scoped():
        for role, text in sources.items():
            paths[role] = tmp_path / role / "scale.hip"
            paths[role].parent.mkdir()
            paths[role].write_text(text)
            simulate.register(paths[role], "scale", _scale)
        yield paths


def _scale(args, launch):
    a, b, s, n = args
    b[:n] = np.float32(s) * a[:n]


def _vectors(backend, n, count=2):
    rng = np.random.default_rng(0)
    return [backend.to_device(rng.random(n, dtype=np.float32)) for _ in range(count)]


def _timed(backend, launch) -> float:
    spin = backend.compile(INTERNAL).kernel("gpuperf_spin")
    backend.launch(spin, 1, 1, (2_000_000,))
    start, end = backend.create_event(), backend.create_event()
    backend.record_event(start)
    launch()
    backend.record_event(end)
    return backend.elapsed_s(start, end)


def _times(backend, n=MiB, launches=5):
    kernel = backend.compile(VECTOR_ADD).kernel("vector_add")
    buffers = _vectors(backend, n, 3)
    return [
        _timed(backend, lambda: backend.launch(kernel, n // 256, 256, (*buffers, n)))
        for _ in range(launches)
    ]


# -- seeds ------------------------------------------------------------------------------------


def test_the_same_seed_reproduces_a_run_exactly():
    assert _times(_open(seed=7)) == _times(_open(seed=7))
    assert _times(_open(seed=7)) != _times(_open(seed=8))


def test_the_seed_comes_from_the_environment_or_is_fresh_and_exposed(monkeypatch):
    monkeypatch.setenv(sim_module.SEED_ENV, "4242")
    assert sim_module.open().seed == 4242
    monkeypatch.delenv(sim_module.SEED_ENV)
    first, second = sim_module.open(), sim_module.open()
    assert first.seed != second.seed
    assert _times(first) == _times(_open(seed=first.seed))
    monkeypatch.setenv(sim_module.SEED_ENV, "not-a-number")
    with pytest.raises(ConfigError, match=sim_module.SEED_ENV):
        sim_module.open()


# -- the three parts of the run drift ---------------------------------------------------------


def test_the_fractions_split_one_variance():
    settings = _open().settings
    assert (settings.common_fraction, settings.placement_fraction) == (0.50, 0.45)
    assert settings.code_fraction == pytest.approx(0.05)
    alone = _open(common_fraction=0.9).settings  # the code keeps its 5% where it can
    assert alone.placement_fraction == pytest.approx(0.05) and alone.code_fraction == 0.05
    everything = _open(common_fraction=1.0).settings
    assert everything.placement_fraction == 0.0 and everything.code_fraction == 0.0
    assert _open(common_fraction=0.2, placement_fraction=0.3).settings.code_fraction == 0.5
    with pytest.raises(ConfigError, match="add up to more than 1"):
        _open(common_fraction=0.6, placement_fraction=0.6)
    with pytest.raises(ConfigError, match="placement_fraction"):
        _open(placement_fraction=-0.1)


def _drifts(runs: int, paths: dict[str, Path], pairs: list) -> np.ndarray:
    """log drift of each (first, second) launch pair, per run: shape (runs, pairs, 2).

    Each run allocates two sets of buffers (a0, b0), (a1, b1) and compiles every version;
    `pairs` names (version, buffer set) for both launches of a pair."""
    out = np.empty((runs, len(pairs), 2))
    for seed in range(runs):
        backend = _open(seed=seed)
        kernels = {role: backend.compile(path).kernel("scale") for role, path in paths.items()}
        sets = [_vectors(backend, 1024), _vectors(backend, 1024)]
        for index, pair in enumerate(pairs):
            for side, (role, which) in enumerate(pair):
                args = (*sets[which], 2.0, 1024)
                out[seed, index, side] = math.log(backend.run_drift(kernels[role], args))
    return out


def test_the_drift_parts_have_the_documented_variances_and_correlations(versions):
    """Over many runs: every launch's log drift has sigma run_spread / 2 ("+-7%" as a 95%
    range); two launches share the common part always, the placement part when they touch
    the same buffers, and the code part when they belong to the same module load. So an A/B
    ratio on one set of buffers keeps only the two loads' code parts, sigma * sqrt(2 *
    code_fraction) (1.1% by default), and so does a comment-only change or the same bytes
    loaded again: a load, not the code, owns that part."""
    pairs = [
        (("base", 0), ("head", 1)),  # other code, other buffers: common only
        (("base", 0), ("head", 0)),  # other code, same buffers: + placement
        (("base", 0), ("base", 1)),  # same load, other buffers: + code
        (("base", 0), ("comment", 0)),  # same bytes, another load, same buffers: + placement
    ]
    logs = _drifts(2000, versions, pairs)
    assert logs.reshape(-1, 2).std(axis=0) == pytest.approx([0.035, 0.035], rel=0.07)
    correlation = [np.corrcoef(logs[:, i, 0], logs[:, i, 1])[0, 1] for i in range(len(pairs))]
    assert correlation[0] == pytest.approx(0.50, abs=0.05)
    assert correlation[1] == pytest.approx(0.95, abs=0.02)
    assert correlation[2] == pytest.approx(0.55, abs=0.05)
    assert correlation[3] == pytest.approx(0.95, abs=0.02)
    assert np.mean(np.abs(logs[:, 0, 0]) < math.log(1.07)) == pytest.approx(0.95, abs=0.02)
    for other_load in (1, 3):
        ab_ratio = logs[:, other_load, 1] - logs[:, other_load, 0]
        assert ab_ratio.std() == pytest.approx(0.035 * math.sqrt(2 * 0.05), rel=0.08)


def test_each_load_of_a_module_draws_its_own_code_drift(versions):
    backend = _open(seed=5, common_fraction=0.0, placement_fraction=0.0)  # all code
    module = backend.compile(versions["base"])
    first = module.kernel("scale")
    again = backend.load_again(module).kernel("scale")
    assert backend.kernel_fingerprint(again) == backend.kernel_fingerprint(first)
    assert backend.run_drift(again, ()) != backend.run_drift(first, ())
    assert backend.run_drift(first, ()) == backend.run_drift(module.kernel("scale"), ())
    loads = [backend.load_again(module).kernel("scale") for _ in range(400)]
    logs = np.log([backend.run_drift(kernel, ()) for kernel in loads])
    assert logs.std() == pytest.approx(0.035, rel=0.1)


def test_the_placement_part_is_byte_weighted_over_the_buffers(versions):
    backend = _open(seed=3, common_fraction=0.0, placement_fraction=1.0)
    kernel = backend.compile(versions["base"]).kernel("scale")
    small, large, other = backend.alloc(4096), backend.alloc(1 << 20), backend.alloc(1 << 20)
    alone = backend.drift_parts(kernel, (large, other, 1.0, 0))
    assert alone.common == alone.code == 1.0  # all of the variance is placement
    one, two = (math.log(backend.drift_parts(kernel, (b,)).placement) for b in (large, other))
    expected = (one + two) / math.sqrt(2)  # equal weights, normalised to keep the variance
    assert math.log(alone.placement) == pytest.approx(expected)
    skewed = math.log(backend.drift_parts(kernel, (small, large, 1.0, 0)).placement)
    assert skewed == pytest.approx(one, abs=0.01 * abs(one) + 1e-4)  # the large buffer rules


def test_a_drift_depends_on_the_seed_the_buffers_and_the_code_not_on_what_ran(versions):
    one, other = _open(seed=11), _open(seed=11)
    kernels = [b.compile(versions["base"]).kernel("scale") for b in (one, other)]
    sets = [(*_vectors(b, 1024), 2.0, 1024) for b in (one, other)]
    _times(one)  # launching first must not change any drift
    assert one.run_drift(kernels[0], sets[0]) == other.run_drift(kernels[1], sets[1])
    head = one.compile(versions["head"]).kernel("scale")
    assert one.run_drift(head, sets[0]) != one.run_drift(kernels[0], sets[0])
    quiet = _open(seed=11, run_spread=0.0)
    assert quiet.run_drift(quiet.compile(versions["base"]).kernel("scale"), ()) == 1.0


def test_a_fully_common_drift_is_the_same_for_every_kernel():
    backend = _open(seed=3, common_fraction=1.0)
    add = backend.compile(VECTOR_ADD).kernel("vector_add")
    copy_ref = backend.compile(INTERNAL).kernel("gpuperf_copy_ref")
    a, b = _vectors(backend, 1024), _vectors(backend, 1024)
    assert backend.run_drift(add, (*a, a[0], 1024)) == backend.run_drift(copy_ref, (*b, 64))
    assert backend.run_drift(add, ()) != 1.0


def _ab_times(backend, paths, roles=("base", "head"), n=MiB) -> dict[str, float]:
    """Each version's time, launched one after the other on the same buffers (cold)."""
    a, b = _vectors(backend, n)
    flush = backend.compile(INTERNAL).kernel("gpuperf_flush")
    scratch, sink = backend.alloc(backend.spec.cache_bytes), backend.alloc(16)
    kernels = {role: backend.compile(paths[role]).kernel("scale") for role in roles}
    times = {}
    for role, kernel in kernels.items():
        backend.launch(flush, 1024, 256, (scratch, backend.spec.cache_bytes // 16, sink))
        times[role] = _timed(
            backend, lambda k=kernel: backend.launch(k, n // 256, 256, (a, b, 2.0, n))
        )
    return times


def test_kernel_slowdown_by_fingerprint_slows_only_that_version(versions):
    probe = _open()
    head_print = probe.kernel_fingerprint(probe.compile(versions["head"]).kernel("scale"))
    plain = _ab_times(_open(seed=5, jitter=0.0), versions)
    by_print = _ab_times(_open(seed=5, jitter=0.0, kernel_slowdown={head_print: 1.10}), versions)
    by_name = _ab_times(_open(seed=5, jitter=0.0, kernel_slowdown={"scale": 1.10}), versions)
    assert by_print["base"] == plain["base"]
    assert by_print["head"] / plain["head"] == pytest.approx(1.10, rel=1e-12)
    assert by_name["base"] / plain["base"] == pytest.approx(1.10, rel=1e-12)
    assert by_name["head"] / plain["head"] == pytest.approx(1.10, rel=1e-12)
    both = {"scale": 1.5, head_print: 1.10}  # a fingerprint wins over a name
    mixed = _ab_times(_open(seed=5, jitter=0.0, kernel_slowdown=both), versions)
    assert mixed["head"] / plain["head"] == pytest.approx(1.10, rel=1e-12)
    assert mixed["base"] / plain["base"] == pytest.approx(1.5, rel=1e-12)


def test_kernel_efficiency_by_fingerprint_sets_only_that_version(versions):
    backend = _open(kernel_efficiency={"scale": 0.5})
    head = backend.compile(versions["head"]).kernel("scale")
    base = backend.compile(versions["base"]).kernel("scale")
    assert backend.efficiency_of(head) == backend.efficiency_of(base) == 0.5
    fingerprinted = _open(kernel_efficiency={"scale": 0.5, backend.kernel_fingerprint(head): 0.4})
    assert (
        fingerprinted.efficiency_of(fingerprinted.compile(versions["head"]).kernel("scale")) == 0.4
    )
    assert (
        fingerprinted.efficiency_of(fingerprinted.compile(versions["base"]).kernel("scale")) == 0.5
    )


def test_a_comment_only_change_times_like_its_base_but_for_its_load(versions):
    """Byte-identical code loaded separately differs only by the loads' code drift: exactly
    nothing when the model gives loads no share of the variance."""
    no_load_share = _open(seed=9, jitter=0.0, common_fraction=0.5, placement_fraction=0.5)
    times = _ab_times(no_load_share, versions, roles=("base", "comment", "head"))
    assert times["comment"] == pytest.approx(times["base"], rel=1e-12)
    times = _ab_times(_open(seed=9, jitter=0.0), versions, roles=("base", "comment"))
    assert times["comment"] != pytest.approx(times["base"], rel=1e-6)


# -- jitter and throttling --------------------------------------------------------------------


def test_jitter_varies_launches_within_its_sigma():
    backend = _open(seed=5, jitter=0.01, cache_speedup=1.0)  # hits cost what misses do
    times = np.array(_times(backend, launches=200))
    assert np.std(np.log(times)) == pytest.approx(0.01, rel=0.25)


def test_throttled_runs_are_flagged_and_slower():
    throttled = _open(throttle_probability=1.0, run_spread=0.0, jitter=0.0)
    normal = _open(run_spread=0.0, jitter=0.0)
    clocks = throttled.read_clocks()
    assert clocks.throttled and clocks.throttle_reasons and clocks.source == "sim"
    assert clocks.sm_clock_mhz < clocks.sm_clock_max_mhz
    assert not normal.read_clocks().throttled
    assert _times(throttled, launches=1)[0] == pytest.approx(
        _times(normal, launches=1)[0] * sim_module.THROTTLE_SLOWDOWN
    )
    flagged = [_open(seed=s, throttle_probability=0.3).throttled for s in range(1000)]
    assert np.mean(flagged) == pytest.approx(0.3, abs=0.05)
