"""Measuring must work where tomli-w is missing (the GPU machine has no package registry):
only --gpuperf-save writes TOML, so only saving may need it.

Saves are written once per file at the end of the session, so a save that cannot be written
fails the session (its exit status and a `gpuperf: ERROR:` line), not the test that measured.
"""

from __future__ import annotations

import sys
import textwrap

import pytest

BLOCK_AND_RUN = """
import sys

class NoTomliW:
    def find_spec(self, name, path=None, target=None):
        if name == "tomli_w" or name.startswith("tomli_w."):
            raise ModuleNotFoundError("No module named 'tomli_w' (blocked by the test)")

sys.meta_path.insert(0, NoTomliW())
sys.modules.pop("tomli_w", None)
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def test_measuring_works_without_tomli_w(gp):
    gp.test_file(
        """
        @pytest.mark.min_bw(0.3)
        def test_add(gpu_bench):
            add(gpu_bench)
        """
    )
    script = gp.path / "run_without_tomli_w.py"
    script.write_text(textwrap.dedent(BLOCK_AND_RUN))
    result = gp.pytester.run(sys.executable, str(script), *gp.args("--gpuperf", "test_perf.py"))
    result.assert_outcomes(passed=1)


def save_without_tomli_w(gp):
    gp.test_file(
        """
        def test_add(gpu_bench):
            add(gpu_bench)
        """
    )
    script = gp.path / "run_without_tomli_w.py"
    script.write_text(textwrap.dedent(BLOCK_AND_RUN))
    return gp.pytester.run(
        sys.executable, str(script), *gp.args("--gpuperf", "--gpuperf-save", "test_perf.py")
    )


def test_saving_without_tomli_w_says_what_to_install(gp):
    result = save_without_tomli_w(gp)
    result.assert_outcomes(passed=1)  # the test measured; writing its save is the session's
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "gpuperf: ERROR: *baselines/mi300x-sim.toml: not saved: writing baselines needs "
            "tomli-w*pip install tomli-w*nothing was written*"
        ]
    )
    assert not list(gp.path.glob("baselines/*.toml"))


def test_a_save_that_was_not_written_is_not_reported_as_saved(gp):
    result = save_without_tomli_w(gp)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert not list(gp.path.glob("baselines/*.toml"))
    assert "gpuperf: saved" not in result.stdout.str()
