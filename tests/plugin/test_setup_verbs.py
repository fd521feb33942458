"""What a `setup=` can call, on the simulated device: `gpu_bench.copy(dst, src)` and
`gpu_bench.launch(..., wait=False)` queue their work without waiting for the GPU (a setup that
waits leaves the timed launch an idle GPU), restore an in-place kernel's input before every
timed launch, and every bad argument to copy ends in one line, in the summary and the JSON
report, with no frame of the plugin in the traceback."""

from __future__ import annotations

import re

import pytest

IN_PLACE = """\
#include "gpuperf.h"
GPUPERF_KERNEL void double_in_place(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * y[i];
}
"""
MODEL = """

@simulate.model("inplace.hip", "double_in_place", reads_outputs=True)
def double_in_place(args, launch):
    y, n = args
    count = min(n, launch.threads_x)
    y[:count] = 2 * y[:count]
"""
BODY = """
N = 1 << 16


def buffers(gpu_bench):
    y = np.arange(N, dtype=np.float32)
    return y, gpu_bench.to_device(y), gpu_bench.to_device(y)


def test_it(gpu_bench):
    kernel = gpu_bench.kernel("inplace.hip", "double_in_place")
    restore = gpu_bench.kernel("kernels/stream.hip", "copy")  # b = a, the plugin's own kernel
    y, dy, pristine = buffers(gpu_bench)
{body}
"""


@pytest.fixture
def in_place(gp):
    (gp.path / "inplace.hip").write_text(IN_PLACE)
    conftest = gp.path / "conftest.py"
    conftest.write_text(conftest.read_text() + MODEL)
    return gp


def _test(gp, body: str) -> None:
    gp.test_file(BODY.format(body=body))


@pytest.mark.parametrize(
    "setup",
    [
        "lambda: gpu_bench.copy(dy, pristine)",
        "lambda: gpu_bench.launch(restore, grid=N // 256, block=256, args=(pristine, dy, N), "
        "wait=False)",
    ],
    ids=["copy", "reset-kernel"],
)
@pytest.mark.parametrize("cache", ["cold", "hot"])
def test_a_setup_restores_an_in_place_kernels_input_before_every_timed_launch(
    in_place, setup, cache
):
    _test(
        in_place,
        f"""\
    result = gpu_bench(kernel, grid=N // 256, block=256, args=(dy, N), reads=(y,), writes=(y,),
                       cache="{cache}", setup={setup})
    np.testing.assert_array_equal(gpu_bench.from_device(dy, np.float32, N), 2 * y)
    assert not gpu_bench.measuring or len(result.samples_s) > 1
""",
    )
    in_place.run("--gpuperf").assert_outcomes(passed=1)
    in_place.run().assert_outcomes(passed=1)  # smoke: setup, then one launch


def test_copy_and_a_queued_launch_do_not_wait_for_the_gpu(in_place):
    _test(
        in_place,
        """\
    waits = []
    backend = gpu_bench.backend
    synchronize = backend.synchronize
    backend.synchronize = lambda *args: waits.append(args) or synchronize(*args)
    gpu_bench.copy(dy, pristine)
    gpu_bench.launch(kernel, grid=N // 256, block=256, args=(dy, N), wait=False)
    assert waits == []  # both only queued
    gpu_bench.launch(kernel, grid=N // 256, block=256, args=(dy, N))
    assert len(waits) == 1  # the default still waits
    np.testing.assert_array_equal(gpu_bench.from_device(dy, np.float32, N), 4 * y)
""",
    )
    in_place.run().assert_outcomes(passed=1)


BAD_COPIES = [
    (
        "gpu_bench.copy(gpu_bench.empty(N // 4), dy)",
        "the source holds 262144 bytes and the destination 65536; copy copies a whole buffer "
        "into one of the same size",
    ),
    (
        "pristine.free(); gpu_bench.copy(dy, pristine)",
        "the source buffer was already freed (by .free(), or when the test that made it "
        "ended); copy between buffers of this test",
    ),
    (
        "gpu_bench.copy(dy, y)",
        "the source is a host array (float32, shape (65536,)), not a device buffer; copy "
        "copies on the device: put the array there once with gpu_bench.to_device(array), "
        "outside setup=, and copy from that buffer",
    ),
    (
        "gpu_bench.copy(y, dy)",
        "the destination is a host array (float32, shape (65536,)), not a device buffer; copy "
        "copies on the device: to read a buffer back, use gpu_bench.from_device(buffer)",
    ),
    ("gpu_bench.copy(dy, dy)", "the source and the destination are the same buffer"),
    (
        "gpu_bench.copy(dy, 7)",
        "the source must be a device buffer (gpu_bench.to_device, gpu_bench.empty), got int",
    ),
]


@pytest.mark.parametrize("where", ["body", "setup"])
@pytest.mark.parametrize(("call", "said"), BAD_COPIES, ids=lambda v: v[:24])
def test_a_bad_copy_ends_in_one_line(in_place, call, said, where):
    if where == "body":
        body = f"    {call}\n"
    else:  # the same mistake inside a setup: raised at the first timed launch's setup
        statements = call.split("; ")
        body = "".join(f"    {s}\n" for s in statements[:-1])
        body += (
            "    gpu_bench(kernel, grid=N // 256, block=256, args=(dy, N), bytes=8 * N,\n"
            f"              setup=lambda: {statements[-1]})\n"
        )
    _test(in_place, body)
    result = in_place.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    line = f"ConfigError: gpu_bench.copy(dst, src): {said}"
    summary = [row for row in result.stdout.lines if row.startswith("FAILED test_perf.py")]
    assert len(summary) == 1, summary  # pytest's summary line, cut to the terminal's width
    assert summary[0].startswith("FAILED test_perf.py::test_it - pytest_gpuperf.errors.Config")
    result.stdout.fnmatch_lines([f"E *pytest_gpuperf.errors.{line}"])
    (test,) = in_place.report()["tests"]
    assert test["error"].startswith(line), test["error"]
    plugin_frames = re.findall(r"pytest_gpuperf[/\\]\w+[/\\]\w+\.py", result.stdout.str())
    assert not plugin_frames, plugin_frames
