"""Measuring must work where tomli-w is missing (the GPU machine has no package registry):
only --gpuperf-save writes TOML, so only saving may need it."""

from __future__ import annotations

import sys
import textwrap

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


def test_saving_without_tomli_w_says_what_to_install(gp):
    gp.test_file(
        """
        def test_add(gpu_bench):
            add(gpu_bench)
        """
    )
    script = gp.path / "run_without_tomli_w.py"
    script.write_text(textwrap.dedent(BLOCK_AND_RUN))
    result = gp.pytester.run(
        sys.executable, str(script), *gp.args("--gpuperf", "--gpuperf-save", "test_perf.py")
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*not saved: writing baselines needs tomli-w*pip install tomli-w*nothing was written*"]
    )
    assert not list(gp.path.glob("baselines/*.toml"))
