"""Models of a user's kernels on the simulated device, through a real inner pytest run: a
conftest.py registers them (pytest_gpuperf.simulate), a kernel without one warns and its
output check fails, and a user's kernel that shares a name with the plugin's is the user's."""

from __future__ import annotations

MODELS = """\
from pytest_gpuperf import simulate


@simulate.model("vadd.hip", "vector_add", efficiency=0.7185)
def vector_add(args, launch):
    a, b, c, n = args
    count = min(n, launch.threads_x)
    c[:count] = a[:count] + b[:count]
"""

COPY_KERNEL = """\
#include "gpuperf.h"
GPUPERF_KERNEL void copy(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i];
}
"""


def test_a_conftest_model_computes_a_users_kernel(gp):
    gp.pytester.makeconftest(MODELS)
    gp.test_file(
        """
        @pytest.mark.min_bw(0.3)
        def test_add(gpu_bench):
            add(gpu_bench)
        """
    )
    result = gp.run("--gpuperf", "-W", "error::pytest_gpuperf.simulate.SimulationWarning")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_add*", "*vector_add*pass*"])


def test_a_users_kernel_without_a_model_warns_and_fails_its_output_check(gp):
    (gp.path / "nomodel.hip").write_text((gp.path / "vadd.hip").read_text())
    gp.test_file(
        """
        def test_add(gpu_bench):
            add(gpu_bench, path="nomodel.hip")
        """
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*nan location mismatch*",
            "*SimulationWarning: simulated device: kernel 'vector_add' of *nomodel.hip has no "
            "model that computes its outputs*",
        ]
    )


def test_a_users_kernel_named_like_the_plugins_gets_no_plugin_model(gp):
    (gp.path / "stream.hip").write_text(COPY_KERNEL)
    gp.test_file(
        """
        def test_copy(gpu_bench):
            kernel = gpu_bench.kernel("stream.hip", "copy")
            a = np.arange(1024, dtype=np.float32)
            da, db = gpu_bench.to_device(a), gpu_bench.empty(1024)
            gpu_bench(kernel, grid=4, block=256, args=(da, db, 1024), reads=(a,), writes=(a,))
            np.testing.assert_array_equal(gpu_bench.from_device(db, np.float32, 1024), a)
        """
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1, warnings=1)
    result.stdout.fnmatch_lines(["*SimulationWarning*kernel 'copy' of *stream.hip*"])


AXPY_INPLACE = """\
#include "gpuperf.h"
GPUPERF_KERNEL void axpy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}
"""

AXPY_MODEL = """\
from pytest_gpuperf import simulate


@simulate.model("axpy.hip", "axpy")  # no reads_outputs=True: the user did not think of it
def axpy(args, launch):
    x, y, n = args
    count = min(n, launch.threads_x)
    y[:count] += x[:count]
"""


def test_an_in_place_kernel_fails_its_output_check_as_on_a_gpu(gp):
    """`y += x` under --gpuperf runs many times on the same y: on a GPU its check fails. The
    simulated device kept the first launch's result and passed it."""
    (gp.path / "axpy.hip").write_text(AXPY_INPLACE)
    gp.pytester.makeconftest(AXPY_MODEL)
    gp.test_file(
        """
        N = 1 << 16


        def test_axpy(gpu_bench):
            kernel = gpu_bench.kernel("axpy.hip", "axpy")
            x = np.ones(N, np.float32)
            dx, dy = gpu_bench.to_device(x), gpu_bench.to_device(np.zeros(N, np.float32))
            gpu_bench(kernel, grid=N // 256, block=256, args=(dx, dy, N), reads=(x,), writes=(x,))
            np.testing.assert_array_equal(gpu_bench.from_device(dy, np.float32, N), x)
        """
    )
    smoke = gp.run()  # one launch: y = x
    smoke.assert_outcomes(passed=1)
    measured = gp.run("--gpuperf")
    measured.assert_outcomes(failed=1)
    measured.stdout.fnmatch_lines(["*If the kernel updates a buffer in place*"])
