"""A run that measures and judges never imports scipy.stats (issue 46): its import cost every
measuring process about 0.5 s on top of scipy.special's (each pytest-xdist worker again),
and the statistics and the gate need only the special functions (engine/distributions.py).

Each run is a fresh process (an in-process run would see the scipy.stats this process
imported), whose conftest records at exit which SciPy modules the whole session loaded:
a plain measuring run, a run that saves baselines and one that judges against them, and
an A/B run that times head against base."""

from __future__ import annotations

import json

from tests.plugin.conftest import INNER_CONFTEST

# At interpreter exit, after the session, its summary and the plugin's own teardown.
PROBE = """
import atexit
import json
import sys
from pathlib import Path

RECORD = Path(__file__).with_name("loaded.json")


@atexit.register
def _record_scipy_modules():
    names = sorted(name for name in sys.modules if name.split(".")[0] == "scipy")
    RECORD.write_text(json.dumps(names))
"""


def probe(gp) -> None:
    gp.pytester.makeconftest(INNER_CONFTEST + PROBE)


def scipy_modules(gp) -> set[str]:
    path = gp.path / "loaded.json"
    modules = set(json.loads(path.read_text()))
    path.unlink()
    return modules


def test_a_measuring_run_loads_scipy_special_but_not_scipy_stats(gp):
    probe(gp)
    gp.test_file(
        """
        @pytest.mark.min_bw(0.30)
        def test_add(gpu_bench):
            add(gpu_bench)
        """
    )
    result = gp.run_subprocess("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    assert gp.report()["results"][0]["measurement"]["samples_s"]  # measured, and judged
    loaded = scipy_modules(gp)
    assert "scipy.special" in loaded  # the probe sees what the run imported...
    assert "scipy.stats" not in loaded  # ...and scipy.stats was not


def test_saving_and_judging_against_stored_baselines_load_no_scipy_stats(gp):
    """Three saves give the entry a history and the judging run a band from it (the
    simulated device's prior spread is known exactly, so the band's basis stays "prior")."""
    probe(gp)
    gp.test_file("def test_add(gpu_bench):\n    add(gpu_bench)\n")
    for _ in range(3):
        gp.run_subprocess("--gpuperf", "--gpuperf-save").assert_outcomes(passed=1)
        assert "scipy.stats" not in scipy_modules(gp)
    result = gp.run_subprocess("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    check = gp.report()["results"][0]["verdict"]["baseline"]
    assert check["outcome"] == "within-noise" and check["band"]["saves"] == 3, check
    assert "scipy.stats" not in scipy_modules(gp)


def test_an_ab_run_that_times_head_against_base_loads_no_scipy_stats(repo):
    probe(repo)
    repo.write_kernel(0.5)  # an edited kernel: head and base are timed, pairs compared
    result = repo.run_subprocess(
        "--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json"
    )
    result.assert_outcomes(failed=1)
    comparison = repo.report()["results"][0]["verdict"]["comparison"]
    assert comparison["state"] == "regressed" and comparison["pairs"] > 0
    loaded = scipy_modules(repo)
    assert "scipy.special" in loaded and "scipy.stats" not in loaded


def test_the_probe_sees_scipy_stats_where_a_test_imports_it(gp):
    """The control: the same probe reports scipy.stats when something did import it."""
    probe(gp)
    gp.test_file("def test_add(gpu_bench):\n    import scipy.stats\n    add(gpu_bench)\n")
    gp.run_subprocess("--gpuperf").assert_outcomes(passed=1)
    assert "scipy.stats" in scipy_modules(gp)
