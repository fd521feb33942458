"""Helpers for the plugin's pytester tests: every inner run uses the simulated device.

`gp.run(...)` runs pytest in-process on a directory that holds a small vector-add kernel
(`vadd.hip`) and a module `gpuperf_helpers.py` with an `add(gpu_bench, ...)` helper that
launches it and checks its output, so each test module only states the behaviour it is
about. Sampling budgets are in simulated seconds (the sim's host clock), so inner runs stay
fast in wall time.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

# NumPy and SciPy must be imported in this (outer) process before any in-process inner run:
# pytester drops from sys.modules what an inner run imported, and NumPy 2's extension modules
# refuse a second import in one process ("ImportError: cannot load module more than once per
# process"). The plugin loads them lazily, so the first inner run would be the first to.
import numpy  # noqa: F401
import pytest
import scipy.stats  # noqa: F401

import pytest_gpuperf.session.fixture  # noqa: F401
from pytest_gpuperf import simulate
from tests.git_repo import commit_all

REPO = Path(__file__).resolve().parents[2]
SEED = "1234"
BUDGET = "0.02"
N = 1 << 20  # 12 MiB moved: ~45% of the simulated MI300X's peak (launch overhead dominates)

# Inner runs are hermetic and fast: pytester drops the modules an inner run imports, so a
# plugin that imports a large package at the end of each run (hypothesis does) would import
# and assertion-rewrite it again for every inner run.
UNRELATED_PLUGINS = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark")

VADD = """\
#include "gpuperf.h"
{directive}GPUPERF_KERNEL void vector_add(const float* a, const float* b, float* c, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}}
"""

INNER_HELPERS = f"""\
import numpy as np

N = {N}


def add(gpu_bench, *, path="vadd.hip", name=None, **options):
    kernel = gpu_bench.kernel(path, "vector_add")
    rng = np.random.default_rng(0)
    a = rng.random(N, dtype=np.float32)
    b = rng.random(N, dtype=np.float32)
    da, db, dc = gpu_bench.to_device(a), gpu_bench.to_device(b), gpu_bench.empty(N)
    result = gpu_bench(
        kernel, grid=N // 256, block=256, args=(da, db, dc, N),
        reads=(a, b), writes=(a,), name=name, **options,
    )
    np.testing.assert_allclose(gpu_bench.from_device(dc, np.float32, N), a + b, rtol=1e-6)
    return result
"""


# vadd.hip is the user's own kernel: the simulated device computes its outputs through the
# model a conftest registers (pytest_gpuperf.simulate), as a user's repository would.
INNER_CONFTEST = """\
from pytest_gpuperf import simulate


@simulate.model("vadd.hip", "vector_add", efficiency=0.7185)
def vector_add(args, launch):
    a, b, c, n = args
    count = min(n, launch.threads_x)  # one element per thread, as the kernel does
    c[:count] = a[:count] + b[:count]
"""


def baseline_toml(device: str, entries: list[dict], schema: int = 2) -> str:
    """A baseline file by hand, as a reviewer would edit one (docs/baselines.md).

    Schema 2 (what --gpuperf-save writes): each measured entry carries its history, here one
    `[[entry.save]]`; an entry with `reported_in` is a published figure instead. `schema=1`
    writes the old layout (`[entry.provenance]`, no history), which still loads and is
    migrated to schema 2 by the next save.
    """
    parts = [f'schema = {schema}\ndevice = "{device}"\n']
    for entry in entries:
        efficiency = entry["efficiency"]
        reported_in = entry.get("reported_in")
        parts.append(
            textwrap.dedent(
                f"""\
                [[entry]]
                id = "{entry["id"]}"
                name = "{entry.get("name", "vector_add")}"
                cache = "{entry.get("cache", "cold")}"
                source = "{"reported" if reported_in else "measured"}"
                efficiency = {efficiency}
                efficiency_ci = [{efficiency * 0.995}, {efficiency * 1.005}]
                run_spread = {entry.get("run_spread", 0.02)}
                bandwidth_bps = {efficiency * 5.3e12}
                time_s = 1e-5
                bytes_moved = {3 * 4 * N}
                """
            )
        )
        if schema == 1:
            provenance = f'reported_in = "{reported_in}"' if reported_in else 'when = "2026-01-01"'
            parts.append(f"[entry.provenance]\n{provenance}\n")
        elif reported_in:
            parts[-1] += f'reported_in = "{reported_in}"\n'
        else:
            parts.append(
                textwrap.dedent(
                    f"""\
                    [[entry.save]]
                    efficiency = {efficiency}
                    efficiency_ci = [{efficiency * 0.995}, {efficiency * 1.005}]
                    time_s = 1e-5
                    when = "2026-01-01T00:00:00Z"
                    note = "written by hand"
                    """
                )
            )
    return "\n".join(parts)


# The inner conftest's addition that does what pytest-rerunfailures does: a failed attempt's
# reports say "rerun", and the test runs again; RUNS counts the attempts of each test.
RERUN_CONFTEST = """

import pytest
from _pytest.runner import runtestprotocol

RUNS = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for attempt in range(2):
        RUNS[item.nodeid] = attempt
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        failed = any(r.failed for r in reports)
        for report in reports:
            if failed and attempt == 0 and report.when == "call":
                report.outcome = "rerun"
            item.ihook.pytest_runtest_logreport(report=report)
        if not failed:
            break
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
"""


class GpuPerfPytester:
    """pytester plus the files and options every inner gpuperf run needs."""

    def __init__(
        self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, plugin_args: list[str]
    ) -> None:
        self.pytester = pytester
        self.monkeypatch = monkeypatch
        self.path = pytester.path
        self.plugin_args = plugin_args
        pytester.makepyfile(gpuperf_helpers=INNER_HELPERS)
        self.write_kernel()
        pytester.makeconftest(INNER_CONFTEST)

    def write_kernel(self, efficiency: float | None = None) -> Path:
        """vadd.hip; `efficiency` adds the sim's directive that slows the kernel down."""
        directive = f"// gpuperf-sim: efficiency={efficiency}\n" if efficiency else ""
        path = self.path / "vadd.hip"
        path.write_text(VADD.format(directive=directive))
        return path

    def with_reruns(self) -> None:
        """The inner conftest reruns a failed test once, as pytest-rerunfailures does."""
        conftest = self.path / "conftest.py"
        conftest.write_text(conftest.read_text() + RERUN_CONFTEST)

    def test_file(self, source: str, name: str = "test_perf") -> Path:
        body = "import numpy as np\nimport pytest\nfrom gpuperf_helpers import add\n\n"
        return self.pytester.makepyfile(**{name: body + textwrap.dedent(source)})

    def baseline(
        self, device: str, entries: list[dict], directory: str = "baselines", schema: int = 2
    ) -> Path:
        path = self.path / directory / f"{device}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(baseline_toml(device, entries, schema))
        return path

    def report(self, name: str = "report.json") -> dict:
        """The JSON report an inner run wrote (`--gpuperf-json=report.json`) in the project."""
        return json.loads((self.path / name).read_text())

    def args(self, *args: str, backend: str = "sim") -> list[str]:
        return [
            *self.plugin_args,
            *UNRELATED_PLUGINS,
            f"--gpuperf-backend={backend}",
            # as an ini value: a default for measuring runs, so a smoke run may carry it too
            # (on the command line, an option that cannot act stops a run that does not measure)
            "-o",
            f"gpuperf_budget={BUDGET}",
            *args,
        ]

    def run_plain(self, *args: str) -> pytest.RunResult:
        """An inner run with only the options given (no backend, no budget)."""
        with simulate.scoped():
            return self.pytester.runpytest(*self.plugin_args, *UNRELATED_PLUGINS, *args)

    def run(self, *args: str, backend: str = "sim") -> pytest.RunResult:
        # An inner run's conftest registers simulated-device models in this process: keep
        # them from leaking into the next test.
        with simulate.scoped():
            return self.pytester.runpytest(*self.args(*args, backend=backend))

    def run_subprocess(self, *args: str, backend: str = "sim") -> pytest.RunResult:
        """For runs that need a fresh process: xdist workers, hidden GPUs."""
        return self.pytester.runpytest_subprocess(*self.args(*args, backend=backend))


@pytest.fixture
def gp(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, request) -> GpuPerfPytester:
    monkeypatch.setenv("GPUPERF_SIM_SEED", SEED)
    monkeypatch.setenv("GPUPERF_LOCK_DIR", str(pytester.path / ".locks"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # Subprocess runs start in pytester's directory: they need the package on the path when
    # it is not installed (the GPU machine runs `PYTHONPATH=. python3 -m pytest`).
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    )
    # The entry point registers the plugin as "gpuperf"; without it (not installed) the root
    # conftest named the module, and inner runs must name it too.
    installed = request.config.pluginmanager.has_plugin("gpuperf")
    return GpuPerfPytester(
        pytester, monkeypatch, [] if installed else ["-p", "pytest_gpuperf.plugin"]
    )


@pytest.fixture
def hidden_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every real GPU invisible to a subprocess run, so "no GPU" is tested everywhere."""
    for variable in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.setenv(variable, "-1")


ONE_TEST = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


@pytest.fixture
def repo(gp: GpuPerfPytester, tmp_path_factory, monkeypatch: pytest.MonkeyPatch) -> GpuPerfPytester:
    """The pytester project (one test of the shared kernel) as a git repository with one
    commit, "base", and a kernel cache of its own (a base revision's builds stay its own)."""
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    gp.test_file(ONE_TEST)
    commit_all(gp.path, "base")
    return gp
