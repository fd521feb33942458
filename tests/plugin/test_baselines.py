"""--gpuperf-save through pytest: create, merge, refuse broken files, and save from xdist."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from pytest_gpuperf.session import DEFAULT_RUN_SPREAD

TWO_TESTS = """
def test_add(gpu_bench):
    add(gpu_bench)

@pytest.mark.min_bw(0.99)
def test_too_slow(gpu_bench):
    add(gpu_bench)
"""


def entries(path):
    return {(e["id"], e["name"]): e for e in tomllib.loads(path.read_text())["entry"]}


def test_save_creates_the_device_file_for_tests_that_pass_their_floor(gp):
    gp.test_file(TWO_TESTS)
    result = gp.run("--gpuperf-save")
    result.assert_outcomes(passed=1, failed=1)
    saved = entries(gp.path / "baselines" / "mi300x-sim.toml")
    assert list(saved) == [("test_perf.py::test_add", "vector_add")]
    entry = saved["test_perf.py::test_add", "vector_add"]
    assert 0.3 < entry["efficiency"] < 0.6
    assert entry["cache"] == "cold"
    assert entry["run_spread"] == DEFAULT_RUN_SPREAD["sim"]
    provenance = entry["provenance"]
    assert provenance["backend"] == "sim" and provenance["simulated"] is True
    assert provenance["plugin_version"] and provenance["when"]
    result.stdout.fnmatch_lines(
        [
            "*test_add: saved as the baseline in baselines/mi300x-sim.toml",
            "*test_too_slow: not saved: the floor check failed",
        ]
    )


def test_save_merges_and_keeps_other_entries(gp):
    gp.test_file(TWO_TESTS)
    path = gp.baseline(
        "mi300x-sim",
        [
            {"id": "test_other.py::test_kept", "efficiency": 0.7},
            {"id": "test_perf.py::test_add", "efficiency": 0.9},  # replaced
        ],
    )
    result = gp.run("--gpuperf-save", "-k", "test_add")
    result.assert_outcomes(passed=1)  # a regression does not fail a save: it re-records
    saved = entries(path)
    assert set(saved) == {
        ("test_other.py::test_kept", "vector_add"),
        ("test_perf.py::test_add", "vector_add"),
    }
    assert saved["test_other.py::test_kept", "vector_add"]["efficiency"] == 0.7
    assert saved["test_perf.py::test_add", "vector_add"]["efficiency"] < 0.9
    result.stdout.fnmatch_lines(["*re-recorded by --gpuperf-save: was 90.00%, now 4*%*"])


def test_a_simulated_save_never_touches_the_real_devices_file(gp):
    """The simulated MI300X judges against mi300x.toml (the reported MI300X figures, or what a
    real MI300X saved) but records into mi300x-sim.toml: a save on a machine without a GPU
    must not replace real measurements."""
    gp.test_file(TWO_TESTS)
    real = gp.baseline("mi300x", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    before = real.read_bytes()
    result = gp.run("--gpuperf", "-k", "test_add")
    result.assert_outcomes(failed=1)  # judged against the real file: 0.46 vs 0.90
    result = gp.run("--gpuperf-save", "-k", "test_add")
    result.assert_outcomes(passed=1)
    assert real.read_bytes() == before
    assert ("test_perf.py::test_add", "vector_add") in entries(real.with_name("mi300x-sim.toml"))
    gp.run("--gpuperf", "-k", "test_add").assert_outcomes(passed=1)  # the -sim entry wins


def test_baseline_dir_option_is_used(gp):
    gp.test_file(TWO_TESTS)
    gp.run("--gpuperf-save", "--gpuperf-baseline-dir=perf-baselines", "-k", "test_add")
    assert (gp.path / "perf-baselines" / "mi300x-sim.toml").is_file()
    assert not (gp.path / "baselines").exists()


BROKEN = {
    # a TOML syntax error: the parser's line
    "broken-toml": (
        'schema = 1\ndevice = "mi300x"\n\n[[entry]]\nid = "x"\nefficiency = = 0.5\n',
        6,
    ),
    # valid TOML, invalid value: the line of the offending key
    "bad-value": (None, 7),
}


@pytest.mark.parametrize("kind", BROKEN)
@pytest.mark.parametrize("option", ["--gpuperf", "--gpuperf-save"])
def test_broken_baseline_file_stops_the_run_naming_file_and_line(gp, kind, option):
    gp.test_file(TWO_TESTS)
    text, line = BROKEN[kind]
    path = gp.baseline("mi300x", [{"id": "test_perf.py::test_add", "efficiency": 0.5}])
    if text is None:
        text = path.read_text().replace("efficiency = 0.5\n", 'efficiency = "fast"\n')
        assert text.splitlines()[line - 1] == 'efficiency = "fast"'
    path.write_bytes(text.encode())
    result = gp.run(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: pytest-gpuperf: *baselines/mi300x.toml:{line}: *"])
    assert path.read_bytes() == text.encode()  # untouched


def test_repeated_saves_at_one_commit_widen_the_run_spread(gp):
    """Saving again on the same clean commit (the baseline file the first save rewrote does
    not count as a change) records the difference seen as run-to-run spread, never less than
    the backend default; the CI refresh job saves three times this way."""
    gp.test_file(TWO_TESTS)
    gp.baseline("mi300x-sim", [{"id": "test_other.py::test_kept", "efficiency": 0.7}])
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=gp.path, check=True)
    (gp.path / ".gitignore").write_text(".locks/\n__pycache__/\n")
    subprocess.run([*git, "add", "-A"], cwd=gp.path, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=gp.path, check=True)
    key = ("test_perf.py::test_add", "vector_add")
    gp.run("--gpuperf-save", "-k", "test_add").assert_outcomes(passed=1)
    first = entries(gp.path / "baselines" / "mi300x-sim.toml")[key]
    assert len(first["provenance"]["commit"]) == 40  # clean: no "-dirty"
    gp.monkeypatch.setenv("GPUPERF_SIM_SEED", "99")  # another run: another drift
    gp.run("--gpuperf-save", "-k", "test_add").assert_outcomes(passed=1)
    second = entries(gp.path / "baselines" / "mi300x-sim.toml")[key]
    observed = abs(second["efficiency"] / first["efficiency"] - 1)
    assert observed > 0
    expected = max(DEFAULT_RUN_SPREAD["sim"], observed)
    assert second["run_spread"] == pytest.approx(expected, abs=1e-3)
    assert "seen between saves at this commit" in second["provenance"]["note"]
    # A change to the code is not noise: the spread falls back to the default.
    (gp.path / "test_perf.py").write_text((gp.path / "test_perf.py").read_text() + "\n")
    gp.run("--gpuperf-save", "-k", "test_add").assert_outcomes(passed=1)
    third = entries(gp.path / "baselines" / "mi300x-sim.toml")[key]
    assert third["provenance"]["commit"].endswith("-dirty")
    assert third["run_spread"] == DEFAULT_RUN_SPREAD["sim"]


def test_xdist_workers_saving_at_once_lose_nothing(gp):
    pytest.importorskip("xdist")
    gp.test_file(
        """
        @pytest.mark.parametrize("case", range(8))
        def test_add(gpu_bench, case):
            add(gpu_bench)
        """
    )
    path = gp.baseline("mi300x-sim", [{"id": "test_other.py::test_kept", "efficiency": 0.7}])
    # without plugin autoloading (how the GPU machine runs), xdist must be named
    xdist = ["-p", "xdist.plugin"] if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") else []
    result = gp.run_subprocess(*xdist, "-n", "4", "--gpuperf-save", "--gpuperf-json=out.json")
    result.assert_outcomes(passed=8)
    saved = entries(path)
    expected = {(f"test_perf.py::test_add[{case}]", "vector_add") for case in range(8)}
    assert set(saved) == expected | {("test_other.py::test_kept", "vector_add")}
    # the rows reached the controller: its summary table and JSON hold all eight
    result.stdout.fnmatch_lines(["*gpuperf — SIMULATED DEVICE*", "8 passed"])
    assert len(json.loads((gp.path / "out.json").read_text())["results"]) == 8
