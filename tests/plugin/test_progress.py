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
