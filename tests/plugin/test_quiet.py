"""Quiet by default: a run on the simulated device under pytest-xdist names one seed (the
controller's), the false-alarm budget line and the explanations of the gate's words show
with -v or when a check failed, and `pytest --help` keeps the plugin's part short."""

from __future__ import annotations

import re

TESTS = """
@pytest.mark.parametrize("k", range(4))
def test_add(gpu_bench, k):
    add(gpu_bench, name=f"add{k}")
"""


def test_xdist_workers_share_the_controllers_seed(gp):
    gp.monkeypatch.delenv("GPUPERF_SIM_SEED")
    gp.test_file(TESTS)
    result = gp.run_subprocess("--gpuperf", "-n", "2")
    result.assert_outcomes(passed=4)
    seeds = set(re.findall(r"GPUPERF_SIM_SEED=(\d+) reproduces it", result.stdout.str()))
    assert len(seeds) == 1, result.stdout.str()
    (seed,) = seeds
    # ... and it does reproduce the run: the same seed, the same -n, the same numbers
    gp.monkeypatch.setenv("GPUPERF_SIM_SEED", seed)
    again = gp.run_subprocess("--gpuperf", "-n", "2")
    assert set(re.findall(r"GPUPERF_SIM_SEED=(\d+)", again.stdout.str())) == {seed}


PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


def test_a_green_run_prints_no_budget_line_and_no_glossary(gp):
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.3}])
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert "false alarms:" not in output and "words:" not in output

    verbose = gp.run("--gpuperf", "-v")
    verbose.assert_outcomes(passed=1)
    verbose.stdout.fnmatch_lines(
        [
            "gpuperf: false alarms: 1 check judged (0 A/B, 1 stored) in 1 measuring test*",
            "gpuperf: words: band = the largest drop below the stored baseline that run-to-run "
            "noise alone explains*",
            "gpuperf: words: prior = an assumed run-to-run spread*",
        ]
    )


def test_a_failed_check_prints_the_budget_line_and_explains_its_words(gp):
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "gpuperf: false alarms: 1 check judged (0 A/B, 1 stored) in 1 measuring test*",
            "gpuperf: words: band = *",
        ]
    )


def test_the_glossary_names_only_the_words_printed():
    from pytest_gpuperf.report.glossary import glossary_lines

    assert glossary_lines(["nothing special"]) == []
    lines = glossary_lines(["an A/A control", "+-0.3% between module loads"])
    assert [line.split(" = ")[0] for line in lines] == ["words: A/A", "words: module load"]


def test_the_markdown_summary_names_files_from_the_repository_and_the_device_once(gp):
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    result = gp.run("--gpuperf", "--gpuperf-markdown=out/summary.md")
    result.assert_outcomes(failed=1)
    text = (gp.path / "out" / "summary.md").read_text()
    assert str(gp.path) not in text  # a pull-request comment never shows the runner's paths
    assert "[baselines/mi300x-sim.toml]" in text
    assert [line for line in text.splitlines() if line.startswith("Device:")] == [
        "Device: AMD Instinct MI300X [mi300x] via sim, gfx942, peak 5.30 TB/s  "
    ]
    assert any(line.startswith("GPU 0 [mi300x]; workers main;") for line in text.splitlines())
    # the terminal's failure text too
    assert "written by hand [baselines/mi300x-sim.toml]" in result.stdout.str()
