"""Quiet by default: a run on the simulated device under pytest-xdist names one seed (the
controller's), the false-alarm budget line and the explanations of the gate's words show
with -v or when a check failed, and `pytest --help` keeps the plugin's part short."""

from __future__ import annotations

import re

import pytest

TESTS = """
@pytest.mark.parametrize("k", range(4))
def test_add(gpu_bench, k):
    add(gpu_bench, name=f"add{k}")
"""


@pytest.mark.slow
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


def test_a_failed_check_says_what_its_confirmation_said_and_the_rest_under_v(gp):
    """A failure's own text says how sure and how to act; the budget and the glossary are
    reading for -v (each a line a newcomer called hard to read at the end of a red run)."""
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["gpuperf: confirmation: 1 regression measured again*"])
    output = result.stdout.str()
    assert "false alarms:" not in output and "words:" not in output
    verbose = gp.run("--gpuperf", "-v")
    verbose.stdout.fnmatch_lines(
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
    assert any(line.startswith("GPU 0 [mi300x]; workers ") for line in text.splitlines())
    # the terminal's failure text too
    assert "written by hand [baselines/mi300x-sim.toml]" in result.stdout.str()


def gpuperf_help_lines(text: str) -> tuple[list[str], list[str]]:
    """(the option group's lines, the gpuperf ini entries' lines) of `pytest --help`."""
    lines = text.splitlines()
    start = lines.index("GPU kernel performance (pytest-gpuperf):")
    end = lines.index("", start)
    ini: list[str] = []
    for index, line in enumerate(lines):
        if line.startswith("  gpuperf"):
            ini.append(line)
            following = lines[index + 1]
            if following.startswith(" " * 24) and not following.strip().startswith("-"):
                ini.append(following)  # a long key puts its help on the next line
    return lines[start:end], ini


def test_help_is_short_and_ini_keys_point_at_their_options(gp):
    from pytest_gpuperf.config.options import OPTIONS

    gp.monkeypatch.setenv("COLUMNS", "80")
    result = gp.pytester.runpytest_subprocess(*gp.plugin_args, "--help")
    options, ini = gpuperf_help_lines(result.stdout.str())
    # the budget since round 4: a new option pays for its lines with shorter help elsewhere
    assert len(options) + len(ini) <= 150, "\n".join(options + ini)
    text = re.sub(r"\n {24}", " ", "\n".join(ini))  # each key and its help on one line
    for spec in OPTIONS:
        if spec.ini is None:
            continue
        # the entry says what it sets in one line, the start of its option's help (which
        # says the rest): never only the option's name
        assert re.search(rf"  {spec.ini} \(\w+\):\s+{re.escape(spec.ini_help)}$", text, re.M), spec
        assert spec.ini_help != spec.flag and len(spec.ini_help) <= 52
        assert spec.help.startswith(spec.ini_help.rstrip("…"))
    numeric = pytest.version_tuple >= (8, 4)
    assert ("gpuperf_budget (float):" in text) == numeric
    assert ("gpuperf_compare_loads (int):" in text) == numeric
    assert "gpuperf_strict (bool):" in text and "gpuperf_cache (string):" in text
    for line in options:  # every option still says its default (or is a plain switch)
        assert len(line) <= 80
    helps = " ".join(line.strip() for line in options)
    assert helps.count("Default") >= sum(1 for spec in OPTIONS if not spec.is_flag)


def test_every_line_of_a_plain_run_is_short_and_the_record_command_repeats_no_ini(gp):
    """A new user's first runs: settings from pytest.ini are not repeated in the command the
    summary prints (the ini file sets them again), several files without a baseline are
    recorded by their folder, and no line of ours is longer than ~120 characters."""
    gp.pytester.makeini("[pytest]\ngpuperf = true\ngpuperf_backend = sim\ngpuperf_budget = 0.02\n")
    folder = gp.path / "perf"
    folder.mkdir()
    for number in range(3):
        (folder / f"test_k{number}.py").write_text(
            "from gpuperf_helpers import add\n\n\ndef test_add(gpu_bench):\n    add(gpu_bench)\n"
        )
    result = gp.run_plain("perf")
    result.assert_outcomes(passed=3)
    output = result.stdout.str()
    assert "note: record them with: pytest --gpuperf --gpuperf-save perf\n" in output, output
    ours = [
        line
        for line in output.splitlines()
        if line.startswith(("gpuperf", "note:", "SIMULATED")) or "measurement" in line
    ]
    assert ours
    assert all(len(line) <= 120 for line in ours), [line for line in ours if len(line) > 120]
