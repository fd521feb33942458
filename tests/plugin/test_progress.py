"""-v shows each measurement as it completes, so a long suite shows where it is."""

from __future__ import annotations

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


def test_verbose_runs_show_each_measurement(gp):
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["gpuperf: measured test_perf.py::test_add [[]vector_add, cold]: * us, *% of peak (*)"]
    )
    quiet = gp.run("--gpuperf")
    assert "gpuperf: measured" not in quiet.stdout.str()


def test_a_long_measurement_says_where_it_is_at_any_verbosity(gp, monkeypatch):
    """A simulated A/B sampled for four minutes without a line; a measurement now says where
    it is every PROGRESS_EVERY_S (here: every batch), without -v too."""
    from pytest_gpuperf.engine import sampling

    monkeypatch.setattr(sampling, "PROGRESS_EVERY_S", 0.0)
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["gpuperf: test_perf.py::test_add: *: sampling for * s, * samples so far (budget * s)"]
    )
