"""Models of users' kernels on the simulated device (pytest_gpuperf.simulate), what a launch
computes and when it need not compute again, and the host memory behind the buffers."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from pytest_gpuperf import simulate
from pytest_gpuperf.engine.measure import MeasureSettings, measure_kernel
from pytest_gpuperf.errors import ConfigError, LaunchError, OutOfDeviceMemory
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.simulate import backend as sim_backend
from pytest_gpuperf.simulate import device as sim_module
from pytest_gpuperf.simulate.device import SimBackend

MiB = 2**20
TRANSPOSE = """#include "gpuperf.h"
// out[c * rows + r] = in[r * cols + c]
GPUPERF_KERNEL void transpose(const float* in, float* out, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) { out[(i % cols) * rows + i / cols] = in[i]; }
}

GPUPERF_KERNEL void scale_inplace(float* x, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] *= s; }
}

// gpuperf-sim: efficiency=0.3
GPUPERF_KERNEL void slow(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[i] = in[i]; }
}
"""


@pytest.fixture(autouse=True)
def isolated_models():
    with simulate.scoped():
        yield


@pytest.fixture
def kernels(tmp_path) -> Path:
    path = tmp_path / "kernels" / "transpose.hip"
    path.parent.mkdir()
    path.write_text(TRANSPOSE)
    return path


def _open(**options) -> SimBackend:
    options = {"seed": 3, "run_spread": 0.0, "jitter": 0.0, **options}
    return sim_module.open(0, **options)


class Calls:
    """A transpose model that counts its calls and records what it was given."""

    def __init__(self):
        self.calls = []

    def __call__(self, args, launch):
        self.calls.append((args, launch))
        src, dst, rows, cols = args
        dst[: rows * cols] = src[: rows * cols].reshape(rows, cols).T.ravel()


def _transpose_args(backend, rows=64, cols=32):
    data = np.arange(rows * cols, dtype=np.float32)
    return data, (backend.to_device(data), backend.alloc(4 * rows * cols), rows, cols)


def _launch(backend, kernel, args, grid=8, block=256, shared_bytes=0):
    backend.launch(kernel, grid, block, args, shared_bytes=shared_bytes)


def _timed(backend, launch) -> float:
    spin = backend.compile(KERNELS_DIR / "gpuperf_internal.hip").kernel("gpuperf_spin")
    backend.launch(spin, 1, 1, (2_000_000,))
    start, end = backend.create_event(), backend.create_event()
    backend.record_event(start)
    launch()
    backend.record_event(end)
    return backend.elapsed_s(start, end)


# -- registering ------------------------------------------------------------------------------


def test_a_conftest_registers_a_model_relative_to_itself(kernels, tmp_path):
    conftest = tmp_path / "conftest.py"
    conftest.write_text(
        textwrap.dedent(
            """
            from pytest_gpuperf import simulate

            @simulate.model("kernels/transpose.hip", "transpose", efficiency=0.45)
            def transpose(args, launch):
                src, dst, rows, cols = args
                dst[: rows * cols] = src[: rows * cols].reshape(rows, cols).T.ravel()
            """
        )
    )
    spec = importlib.util.spec_from_file_location("sim_models_conftest", conftest)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    entry = simulate.lookup(kernels, "transpose")
    assert entry is not None and entry.compute is module.transpose
    assert entry.source == kernels.resolve() and entry.efficiency == 0.45
    assert simulate.lookup(kernels, "slow") is None
    backend = _open()
    data, args = _transpose_args(backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _launch(backend, backend.compile(kernels).kernel("transpose"), args)
    np.testing.assert_array_equal(args[1].download(np.float32), data.reshape(64, 32).T.ravel())


def test_absolute_paths_and_relative_to_find_the_same_file(kernels, tmp_path):
    first = simulate.register(kernels, "transpose", Calls())
    second = simulate.register("transpose.hip", "transpose", Calls(), relative_to=kernels.parent)
    assert first.key == second.key and simulate.lookup(kernels, "transpose") is second
    assert simulate.models() == (second,)


def test_a_model_for_a_file_that_does_not_exist_is_refused_with_where_it_looked(tmp_path):
    with pytest.raises(ConfigError, match=r"not found \(looked for .*nowhere\.hip\)") as error:
        simulate.register("nowhere.hip", "k", Calls())
    assert "directory of the module that registers" in str(error.value)
    assert str(Path(__file__).parent) in str(error.value)  # relative to this test module


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"efficiency": 1.5}, "efficiency=1.5"),
        ({"efficiency": 0}, "efficiency=0"),
        ({"traffic_bytes": 12}, "traffic_bytes must be a function"),
        ({"compute": "not callable"}, "compute must be callable"),
    ],
)
def test_bad_model_options_are_refused_by_name(kernels, options, match):
    with pytest.raises(ConfigError, match=match):
        simulate.register(kernels, "transpose", **options)


def test_a_model_can_be_replaced_and_removed(kernels):
    backend = _open()
    kernel = backend.compile(kernels).kernel("transpose")
    first, second = Calls(), Calls()
    simulate.register(kernels, "transpose", first)
    simulate.register(kernels, "transpose", second)  # a conftest imported twice: replaced
    _, args = _transpose_args(backend)
    _launch(backend, kernel, args)
    assert (len(first.calls), len(second.calls)) == (0, 1)
    assert simulate.unregister(kernels, "transpose") is True
    assert simulate.unregister(kernels, "transpose") is False
    with pytest.warns(simulate.SimulationWarning, match="'transpose'"):
        _launch(backend, kernel, args)


def test_scoped_undoes_what_happened_inside(kernels):
    outer = simulate.register(kernels, "transpose", Calls())
    with simulate.scoped():
        simulate.unregister(kernels, "transpose")
        simulate.register(kernels, "slow", Calls())
    assert simulate.models() == (outer,)


# -- what a model gets and does ---------------------------------------------------------------


def test_a_model_gets_typed_views_numbers_and_the_launch_shape(kernels):
    calls = Calls()
    simulate.register(kernels, "transpose", calls)
    backend = _open()
    data, args = _transpose_args(backend, rows=3, cols=5)
    _launch(backend, backend.compile(kernels).kernel("transpose"), args, (2, 3), (64, 2), 128)
    ((views, launch),) = calls.calls
    assert [v.dtype for v in views[:2]] == [np.float32, np.float32]
    assert views[2:] == [3, 5] and all(type(v) is int for v in views[2:])
    assert launch == simulate.LaunchShape((2, 3, 1), (64, 2, 1), 128)
    assert (launch.threads_x, launch.threads) == (128, 768)
    np.testing.assert_array_equal(args[1].download(np.float32), data.reshape(3, 5).T.ravel())


def test_a_model_that_overruns_is_a_launch_error_naming_it(kernels):
    simulate.register(kernels, "transpose", Calls())
    backend = _open()
    _, (src, dst, _, _) = _transpose_args(backend, rows=4, cols=4)
    with pytest.raises(LaunchError, match=r"out-of-bounds.*transpose in .*transpose\.hip"):
        _launch(backend, backend.compile(kernels).kernel("transpose"), (src, dst, 8, 8))


def test_a_model_that_breaks_is_a_launch_error_naming_it(kernels):
    def broken(args, launch):
        raise KeyError("oops")

    simulate.register(kernels, "transpose", broken)
    backend = _open()
    _, args = _transpose_args(backend)
    with pytest.raises(LaunchError, match=r"broken.*raised KeyError") as error:
        _launch(backend, backend.compile(kernels).kernel("transpose"), args)
    assert isinstance(error.value.__cause__, KeyError)


def test_the_plugins_kernels_honour_the_launch_grid_on_the_device():
    backend = _open()
    kernel = backend.compile(KERNELS_DIR / "vector_add.hip").kernel("vector_add")
    n = 4096
    a, b = (backend.to_device(np.ones(n, np.float32)) for _ in range(2))
    c = backend.to_device(np.full(n, np.nan, np.float32))
    backend.launch(kernel, n // 256 // 2, 256, (a, b, c, n))  # half the grid it needs
    result = c.download(np.float32)
    assert (result[: n // 2] == 2).all() and np.isnan(result[n // 2 :]).all()


# -- traffic and efficiency -------------------------------------------------------------------


def test_declared_traffic_sets_the_time_and_a_change_in_it_shows(kernels):
    """A model's traffic_bytes decides the modelled time: a change that moves more bytes
    takes longer (here the same launch, once declared as 2 passes over the data)."""
    times = {}
    for passes in (1, 2):
        with simulate.scoped():
            simulate.register(
                kernels,
                "transpose",
                Calls(),
                traffic_bytes=lambda args, p=passes: p * (args[0].nbytes + args[1].nbytes),
            )
            backend = _open()
            kernel = backend.compile(kernels).kernel("transpose")
            _, args = _transpose_args(backend, rows=1024, cols=1024)
            times[passes] = _timed(backend, lambda b=backend, k=kernel, a=args: _launch(b, k, a))
    overhead = 2e-6
    transfer = 8 * MiB / (5.3e12 * 0.80)
    assert times[1] == pytest.approx(overhead + transfer, rel=1e-9)
    assert times[2] == pytest.approx(overhead + 2 * transfer, rel=1e-9)


def test_traffic_that_is_not_a_byte_count_is_refused(kernels):
    simulate.register(kernels, "transpose", Calls(), traffic_bytes=lambda args: -1)
    backend = _open()
    _, args = _transpose_args(backend)
    with pytest.raises(ConfigError, match="traffic_bytes returned -1"):
        _launch(backend, backend.compile(kernels).kernel("transpose"), args)


def test_a_traffic_only_model_times_from_its_bytes_and_warns_about_outputs(kernels):
    simulate.register(kernels, "transpose", traffic_bytes=lambda args: 4 * MiB)
    backend = _open()
    kernel = backend.compile(kernels).kernel("transpose")
    _, args = _transpose_args(backend, rows=1024, cols=1024)
    with pytest.warns(simulate.SimulationWarning, match="bytes its model declares"):
        time_s = _timed(backend, lambda: _launch(backend, kernel, args))
    assert time_s == pytest.approx(2e-6 + 4 * MiB / (5.3e12 * 0.80), rel=1e-9)
    assert not args[1].download(np.float32).any()  # not computed


def test_efficiency_comes_from_option_then_directive_then_model(kernels):
    simulate.register(kernels, "slow", Calls(), efficiency=0.6)
    simulate.register(kernels, "transpose", Calls(), efficiency=0.6)
    backend = _open()
    module = backend.compile(kernels)
    assert backend.efficiency_of(module.kernel("slow")) == 0.3  # the directive: this code
    assert backend.efficiency_of(module.kernel("transpose")) == 0.6
    assert backend.efficiency_of(module.kernel("scale_inplace")) == 0.80  # no model
    optioned = _open(kernel_efficiency={"slow": 0.2, "transpose": 0.5})
    module = optioned.compile(kernels)
    assert optioned.efficiency_of(module.kernel("slow")) == 0.2
    assert optioned.efficiency_of(module.kernel("transpose")) == 0.5


# -- computing once ---------------------------------------------------------------------------


def test_a_launch_that_changes_nothing_is_not_computed_again(kernels):
    calls = Calls()
    simulate.register(kernels, "transpose", calls)
    backend = _open()
    kernel = backend.compile(kernels).kernel("transpose")
    data, args = _transpose_args(backend)
    src, dst, rows, cols = args
    for _ in range(5):
        _launch(backend, kernel, args)
    # the first repeat is computed once more (does it change its outputs, as an in-place
    # update would?); it does not, so the other three are not
    assert len(calls.calls) == 2 and backend.computed_launches == 2
    src.upload(data * 2)  # a new input
    _launch(backend, kernel, args)
    np.testing.assert_array_equal(dst.download(np.float32), 2 * data.reshape(64, 32).T.ravel())
    backend.fill(dst, 0xFF)  # somebody else wrote the output
    _launch(backend, kernel, args)
    assert not np.isnan(dst.download(np.float32)).any()
    _launch(backend, kernel, (src, dst, cols, rows))  # other scalars
    _launch(backend, kernel, args, grid=16)  # another launch shape
    _launch(backend, kernel, args, grid=16)
    assert len(calls.calls) == 7  # the other scalars' and the other shape's first repeats too


def test_each_set_of_rotated_buffers_is_computed_once(kernels):
    calls = Calls()
    simulate.register(kernels, "transpose", calls)
    backend = _open()
    kernel = backend.compile(kernels).kernel("transpose")
    sets = [_transpose_args(backend)[1] for _ in range(3)]
    for _ in range(4):
        for args in sets:
            _launch(backend, kernel, args)
    assert len(calls.calls) == 3 + 1  # and the first repeat, checked once for in-place use


def test_two_launches_that_write_the_same_outputs_alternate_without_computing_again(kernels):
    """An A/B pair's head and base alternate on one buffer set: each is computed once, the
    second's outputs compared with the first's, each first repeat computed once more (an
    in-place update?); then neither is computed again, and the outputs stay right."""
    calls = Calls()
    simulate.register(kernels, "transpose", calls)
    backend = _open()
    kernel = backend.compile(kernels).kernel("transpose")
    data, args = _transpose_args(backend)
    src, dst, rows, cols = args
    transposed = data.reshape(rows, cols).T.ravel()
    for _ in range(10):
        _launch(backend, kernel, args, grid=8)  # the head
        _launch(backend, kernel, args, grid=16)  # the base: another launch, the same outputs
    assert len(calls.calls) == 4 and backend.computed_launches == 4
    np.testing.assert_array_equal(dst.download(np.float32), transposed)
    # two launches that write different outputs are computed whenever the other ran last
    other = (src, dst, cols, rows)
    before = len(calls.calls)
    for _ in range(3):
        _launch(backend, kernel, args)
        np.testing.assert_array_equal(dst.download(np.float32), transposed)
        _launch(backend, kernel, other)
        np.testing.assert_array_equal(dst.download(np.float32), data.reshape(cols, rows).T.ravel())
    assert len(calls.calls) - before == 5  # all but the first, whose outputs were held


def test_an_output_that_is_also_an_input_is_always_computed(kernels):
    """transpose(x, x): its input changes with every launch, so every launch computes."""
    computed = []

    def square_copy(args, launch):
        computed.append(1)
        src, dst, rows, cols = args
        dst[: rows * cols] = src[: rows * cols] + 1

    simulate.register(kernels, "transpose", square_copy)
    backend = _open()
    x = backend.to_device(np.zeros(16, np.float32))
    for _ in range(3):
        _launch(backend, backend.compile(kernels).kernel("transpose"), (x, x, 4, 4))
    assert len(computed) == 3
    assert (x.download(np.float32) == 3).all()


def test_an_in_place_model_is_applied_at_every_launch_as_a_gpu_would(kernels):
    """`x *= s` registered without reads_outputs=True: the memo kept the first launch's
    result (x = 2 after three launches) and the test passed where a GPU leaves 8."""

    def scale(args, launch):
        x, s, n = args
        x[:n] *= np.float32(s)

    simulate.register(kernels, "scale_inplace", scale)
    backend = _open()
    x = backend.to_device(np.ones(8, np.float32))
    kernel = backend.compile(kernels).kernel("scale_inplace")
    for _ in range(3):
        _launch(backend, kernel, (x, 2.0, 8))
    assert (x.download(np.float32) == 8).all()  # 2 ** 3, as on a GPU


def test_a_model_that_reads_its_outputs_is_always_computed(kernels):
    def scale(args, launch):
        x, s, n = args
        x[:n] *= np.float32(s)

    simulate.register(kernels, "scale_inplace", scale, reads_outputs=True)
    backend = _open()
    x = backend.to_device(np.ones(8, np.float32))
    kernel = backend.compile(kernels).kernel("scale_inplace")
    for _ in range(3):
        _launch(backend, kernel, (x, 2.0, 8))
    assert (x.download(np.float32) == 8).all()  # as a GPU would leave it: 2 ** 3


def test_another_kernel_writing_the_outputs_makes_the_next_launch_compute(kernels):
    calls = Calls()
    simulate.register(kernels, "transpose", calls)
    simulate.register(kernels, "slow", lambda args, launch: args[1].fill(7))
    backend = _open()
    module = backend.compile(kernels)
    data, args = _transpose_args(backend, rows=4, cols=4)
    _launch(backend, module.kernel("transpose"), args)
    _launch(backend, module.kernel("slow"), (args[0], args[1], 16))
    _launch(backend, module.kernel("transpose"), args)
    assert len(calls.calls) == 2
    np.testing.assert_array_equal(args[1].download(np.float32), data.reshape(4, 4).T.ravel())


def _vector_add(backend: SimBackend):
    """The plugin's vector_add on 64 Ki ones: (kernel, args, n)."""
    kernel = backend.compile(KERNELS_DIR / "vector_add.hip").kernel("vector_add")
    n = 1 << 16
    a, b = (backend.to_device(np.ones(n, np.float32)) for _ in range(2))
    return kernel, (a, b, backend.alloc(4 * n), n), n


def test_a_hot_measurement_computes_the_plugins_kernel_only_a_few_times():
    backend = _open()
    kernel, (a, b, c, _), n = _vector_add(backend)
    result = measure_kernel(
        backend,
        kernel,
        grid=n // 256,
        block=256,
        args=(a, b, c, n),
        bytes_moved=12 * n,
        device=backend.spec,
        settings=MeasureSettings(cache="hot", budget_s=0.01),
    )
    assert result.time_s > 0 and backend.launch_counts["vector_add"] > 50
    assert backend.computed_launches <= 2
    assert (c.download(np.float32) == 2).all()


# -- host memory ------------------------------------------------------------------------------


def test_a_buffer_the_host_cannot_back_is_refused_at_its_first_write(monkeypatch):
    monkeypatch.setattr(sim_backend, "host_available_bytes", lambda: 2 * 2**30)
    backend = _open()
    backend.fill(backend.alloc(1 << 30), 1)  # 1 GiB of 2: fits beside the 512 MiB margin
    big = backend.alloc(1600 * MiB)  # calloc's pages: nothing used yet
    with pytest.raises(OutOfDeviceMemory) as error:
        backend.fill(big, 1)
    message = str(error.value)
    assert str(1600 * MiB) in message and str(2 * 2**30) in message
    assert "host memory" in message and "smaller problem size" in message
    assert "Simulated AMD Instinct MI300X" in message


def test_the_flush_scratch_is_not_refused_for_host_memory_it_does_not_use(monkeypatch):
    """The engine's 576 MiB cold-cache scratch is zeros, only read: calloc's pages, never
    backed. A host with 700 MiB available measured nothing: the scratch was refused as
    OutOfDeviceMemory (and a bisection read that as "does not build")."""
    monkeypatch.setattr(sim_backend, "host_available_bytes", lambda: 700 * MiB)
    backend = _open()
    kernel, args, n = _vector_add(backend)
    result = measure_kernel(
        backend, kernel, grid=n // 256, block=256, args=args, bytes_moved=12 * n,
        device=backend.spec, settings=MeasureSettings(cache="cold", budget_s=0.01),
    )  # fmt: skip
    assert result.time_s > 0 and result.extra["scratch_bytes"] >= 512 * MiB
    with pytest.raises(OutOfDeviceMemory, match="host memory"):
        backend.to_device(np.ones(600 * MiB, np.uint8))  # written: it needs the host


def test_small_allocations_and_unknown_hosts_are_not_checked(monkeypatch):
    monkeypatch.setattr(sim_backend, "host_available_bytes", lambda: 0)
    backend = _open()
    backend.fill(backend.alloc(MiB), 1)  # below the threshold: no /proc read per small buffer
    monkeypatch.setattr(sim_backend, "host_available_bytes", lambda: None)
    backend.fill(backend.alloc(256 * MiB), 1)


def test_the_host_reports_its_available_memory():
    available = sim_backend.host_available_bytes()
    assert available is None or available > 0
    if sys.platform.startswith("linux"):
        assert available is not None
