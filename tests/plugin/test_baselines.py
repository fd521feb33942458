"""--gpuperf-save through pytest: create, merge, refuse broken files, and save from xdist.

Baseline files are schema 2: an entry per (test id, measurement name, cache mode) with its
history of saves (`[[entry.save]]`); schema 1 files still load and are rewritten as schema 2 by
the next save. The simulated MI300X reads and writes `mi300x-sim.toml` only. Saves are written
once per file at the end of the session.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.gate.policy import DEFAULT_RUN_SPREAD
from tests.git_repo import commit_all

TWO_TESTS = """
def test_add(gpu_bench):
    add(gpu_bench)

@pytest.mark.min_bw(0.99)
def test_too_slow(gpu_bench):
    add(gpu_bench)
"""


def entries(path):
    document = tomllib.loads(path.read_text())
    assert document["schema"] == 2  # what a save writes, whatever the file held before
    return {(e["id"], e["name"]): e for e in document["entry"]}


def test_save_creates_the_device_file_for_tests_that_pass_their_floor(gp):
    gp.test_file(TWO_TESTS)
    result = gp.run("--gpuperf-save")
    result.assert_outcomes(passed=1, failed=1)
    saved = entries(gp.path / "baselines" / "mi300x-sim.toml")
    assert list(saved) == [("test_perf.py::test_add", "vector_add")]
    entry = saved["test_perf.py::test_add", "vector_add"]
    assert 0.3 < entry["efficiency"] < 0.6
    assert entry["cache"] == "cold" and entry["source"] == "measured"
    # a first save: the backend's prior spread, a history of one save
    assert entry["run_spread"] == DEFAULT_RUN_SPREAD["sim"] and entry["spread_basis"] == "prior"
    (save,) = entry["save"]
    assert save["efficiency"] == entry["efficiency"]
    assert save["backend"] == "sim" and save["simulated"] is True
    assert save["plugin_version"] and save["when"] and save["fingerprint"].startswith("sha256:")
    result.stdout.fnmatch_lines(
        [
            "  test_perf.py::test_add",
            "    vector_add *saved",
            "! test_perf.py::test_too_slow",
            "    vector_add *99%*FAIL floor",
            "note: not saved: the floor check failed (test_perf.py::test_too_slow)",
            "2 measurements in 2 tests: 1 ok, 1 failed (floor)",
            "gpuperf: saved 1 measurement to baselines/mi300x-sim.toml",
        ]
    )


@pytest.mark.parametrize("schema", [2, 1])
def test_save_merges_and_keeps_other_entries(gp, schema):
    """Also the migration path: a schema 1 file is read, merged and written as schema 2."""
    gp.test_file(TWO_TESTS)
    path = gp.baseline(
        "mi300x-sim",
        [
            {"id": "test_other.py::test_kept", "efficiency": 0.7},
            {"id": "test_perf.py::test_add", "efficiency": 0.9},  # replaced
        ],
        schema=schema,
    )
    result = gp.run("--gpuperf-save", "-k", "test_add")
    result.assert_outcomes(passed=1)  # a regression does not fail a save: it re-records
    assert result.ret == pytest.ExitCode.OK
    saved = entries(path)
    assert set(saved) == {
        ("test_other.py::test_kept", "vector_add"),
        ("test_perf.py::test_add", "vector_add"),
    }
    kept = saved["test_other.py::test_kept", "vector_add"]
    assert kept["efficiency"] == 0.7 and kept["run_spread"] == 0.02
    assert [s["efficiency"] for s in kept["save"]] == [0.7]  # its history, migrated or kept
    replaced = saved["test_perf.py::test_add", "vector_add"]
    assert replaced["efficiency"] < 0.9
    # the hand-written entry has no code fingerprint: not the same code, a new history
    assert [s["efficiency"] for s in replaced["save"]] == [replaced["efficiency"]]
    result.stdout.fnmatch_lines(
        [
            "*eff*base*delta*verdict",
            "  test_perf.py::test_add",
            "    vector_add *4*%*90.0%*-4*%*saved",
            "note: saved as a new history: the code*differs from the saves before it*",
            "gpuperf: saved 1 measurement to baselines/mi300x-sim.toml",
        ]
    )


def test_a_session_of_saves_writes_each_file_once(gp):
    """Saving once rewrote the whole file per measurement (~2 s a save at 10,000 entries):
    the saves of a session are merged into each file in one locked write at its end."""
    from pytest_gpuperf.baseline import store

    writes = []
    real_write = store.write_whole

    def counting_write(path, text, **knobs):
        writes.append(path.name)
        real_write(path, text, **knobs)

    gp.monkeypatch.setattr(store, "write_whole", counting_write)
    gp.test_file(
        """
@pytest.mark.parametrize("n", range(12))
def test_add(gpu_bench, n):
    add(gpu_bench, name=f"add{n % 3}")
"""
    )
    result = gp.run("--gpuperf-save")
    result.assert_outcomes(passed=12)
    assert writes == ["mi300x-sim.toml"]
    assert len(entries(gp.path / "baselines" / "mi300x-sim.toml")) == 12


def test_a_simulated_save_never_touches_the_real_devices_file(gp):
    """The simulated MI300X shows mi300x.toml's entry (the reported seed figures, or what a
    real MI300X saved) for information, never gates on it, and records into mi300x-sim.toml:
    a save on a machine without a GPU must not replace real measurements."""
    gp.test_file(TWO_TESTS)
    real = gp.baseline("mi300x", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    before = real.read_bytes()
    result = gp.run("--gpuperf", "-k", "test_add")
    result.assert_outcomes(passed=1)  # 0.46 against the real 0.90: shown, not judged
    result.stdout.fnmatch_lines(["    vector_add *45.9%*(90.0%)*pass"])
    result = gp.run("--gpuperf-save", "-k", "test_add")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpuperf: saved 1 measurement to baselines/mi300x-sim.toml"])
    assert real.read_bytes() == before
    assert ("test_perf.py::test_add", "vector_add") in entries(real.with_name("mi300x-sim.toml"))
    # the -sim entry gates: the same kernel passes against it, a slowed one fails
    result = gp.run("--gpuperf", "-k", "test_add")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["    vector_add *45.9%*45.9%*pass"])
    gp.write_kernel(efficiency=0.2)
    result = gp.run("--gpuperf", "-k", "test_add")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["vector_add: regressed: *% vs baseline 45.9*%*"])
    assert real.read_bytes() == before


def test_baseline_dir_option_is_used(gp):
    gp.test_file(TWO_TESTS)
    gp.run("--gpuperf-save", "--gpuperf-baseline-dir=perf-baselines", "-k", "test_add")
    assert (gp.path / "perf-baselines" / "mi300x-sim.toml").is_file()
    assert not (gp.path / "baselines").exists()


@pytest.mark.parametrize("given", ["dangling", "dangling/sub"])
def test_a_baseline_dir_through_a_dangling_link_is_refused(gp, given):
    """Before: the folder was resolved through the link, and the save created the link's
    target (wherever it pointed) and saved there."""
    gp.test_file(TWO_TESTS)
    target = gp.path / "elsewhere" / "made"
    (gp.path / "dangling").symlink_to(target)
    result = gp.run("--gpuperf-save", f"--gpuperf-baseline-dir={given}", "-k", "test_add")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: pytest-gpuperf: --gpuperf-baseline-dir={given}: *dangling is a symbolic "
            f"link to '{target}', which does not exist; a save would create its target*"
        ]
    )
    assert not (gp.path / "elsewhere").exists()
    assert os.readlink(gp.path / "dangling") == str(target)


BROKEN = {
    # a TOML syntax error: the parser's line
    "broken-toml": (
        'schema = 2\ndevice = "mi300x"\n\n[[entry]]\nid = "x"\nefficiency = = 0.5\n',
        6,
    ),
    # valid TOML, invalid value: the line of the offending key
    "bad-value": (None, 9),
}


@pytest.mark.parametrize("kind", BROKEN)
@pytest.mark.parametrize("option", ["--gpuperf", "--gpuperf-save"])
def test_broken_baseline_file_stops_the_run_naming_file_and_line(gp, kind, option):
    gp.test_file(TWO_TESTS)
    text, line = BROKEN[kind]
    path = gp.baseline("mi300x", [{"id": "test_perf.py::test_add", "efficiency": 0.5}])
    if text is None:
        text = path.read_text().replace("efficiency = 0.5\n", 'efficiency = "fast"\n', 1)
        assert text.splitlines()[line - 1] == 'efficiency = "fast"'
    path.write_bytes(text.encode())
    result = gp.run(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: pytest-gpuperf: *baselines/mi300x.toml:{line}: *"])
    assert path.read_bytes() == text.encode()  # untouched


def test_repeated_saves_of_the_same_code_learn_the_run_spread(gp):
    """Each save of the same code (the same kernel code object) appends to the entry's
    history; from the third on, the expected efficiency is the median of the saves and the
    run-to-run spread is learned from them (never less than each run's own interval), in place
    of the backend's prior. Saving rewrites the baseline file, which does not dirty the commit
    the saves record; an edit elsewhere (the test file) does not restart the history; an edit
    of the kernel is not noise: the history starts again from the prior."""
    gp.test_file(TWO_TESTS)
    gp.baseline("mi300x-sim", [{"id": "test_other.py::test_kept", "efficiency": 0.7}])
    (gp.path / ".gitignore").write_text(".locks/\n__pycache__/\n")
    commit_all(gp.path, "x")
    key = ("test_perf.py::test_add", "vector_add")
    path = gp.path / "baselines" / "mi300x-sim.toml"

    def save(seed: str) -> dict:
        gp.monkeypatch.setenv("GPUPERF_SIM_SEED", seed)  # another run: another drift
        gp.run("--gpuperf-save", "-k", "test_add").assert_outcomes(passed=1)
        return entries(path)[key]

    first = save("1234")
    assert len(first["save"][0]["commit"]) == 40  # clean: no "-dirty"
    assert first["spread_basis"] == "prior" and first["run_spread"] == DEFAULT_RUN_SPREAD["sim"]
    second = save("99")
    assert [s["commit"] for s in second["save"]] == [first["save"][0]["commit"]] * 2
    assert second["spread_basis"] == "prior"  # two saves are not enough to learn from
    (gp.path / "test_perf.py").write_text((gp.path / "test_perf.py").read_text() + "\n")
    third = save("7")
    assert third["save"][-1]["commit"].endswith("-dirty")
    efficiencies = [s["efficiency"] for s in third["save"]]
    assert len(efficiencies) == 3 and len(set(efficiencies)) == 3
    assert third["efficiency"] == statistics.median(efficiencies)
    # the simulated device's spread is its own setting, known exactly: the gate judges by it
    # however many saves there are, and the file says the same (a real GPU's saves learn it:
    # tests/unit/test_gate.py)
    assert third["spread_basis"] == "prior" and third["run_spread"] == DEFAULT_RUN_SPREAD["sim"]
    # A change to the kernel is not noise: a new history, from the prior again.
    kernel = gp.path / "vadd.hip"
    # (a comment alone would not do: the code object, and so its fingerprint, stays the same)
    kernel.write_text(kernel.read_text().replace("c[i] = a[i] + b[i];", "c[i] = b[i] + a[i];"))
    fourth = save("1234")
    assert len(fourth["save"]) == 1
    assert fourth["save"][0]["fingerprint"] != third["save"][-1]["fingerprint"]
    assert fourth["spread_basis"] == "prior" and fourth["run_spread"] == DEFAULT_RUN_SPREAD["sim"]


def test_a_saving_run_of_a_clean_checkout_reports_it_clean(gp):
    """Before: the report's `commit.dirty` was read after the save had rewritten the committed
    baseline file, so every saving run of a clean checkout said dirty, and the merge of shards
    run with and without --gpuperf-save failed on "shards disagree on the commit"."""
    gp.test_file(TWO_TESTS)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.44}])
    (gp.path / ".gitignore").write_text(".locks/\n__pycache__/\n*.json\n")
    commit_all(gp.path, "x")
    before = (gp.path / "baselines" / "mi300x-sim.toml").read_bytes()
    gp.run("--gpuperf-save", "--gpuperf-json=saved.json")
    assert (gp.path / "baselines" / "mi300x-sim.toml").read_bytes() != before  # it saved
    gp.run("--gpuperf", "--gpuperf-json=measured.json")
    saved = json.loads((gp.path / "saved.json").read_text())["commit"]
    measured = json.loads((gp.path / "measured.json").read_text())["commit"]
    assert saved["dirty"] is False and saved == measured
    (gp.path / "test_perf.py").write_text((gp.path / "test_perf.py").read_text() + "\n")
    edited = gp.run("--gpuperf", "--gpuperf-json=edited.json")  # a real edit still counts
    assert edited.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert json.loads((gp.path / "edited.json").read_text())["commit"]["dirty"] is True


@pytest.mark.slow
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
    result.stdout.fnmatch_lines(
        [
            "*gpuperf — SIMULATED DEVICE*",
            "8 measurements in 8 tests: 8 ok",
            "gpuperf: saved 8 measurements to baselines/mi300x-sim.toml",
            "*= 8 passed in *",
        ]
    )
    assert len(json.loads((gp.path / "out.json").read_text())["results"]) == 8


@pytest.mark.slow
def test_concurrent_saving_processes_keep_every_save(gp):
    """Six CI jobs on one host saving the same tests into one baseline directory at once:
    each save appends to the entry as it is in the file under the lock, so every entry ends
    with min(runs, cap) saves (a save built on the copy read at start kept 1 to 5 of 6). The
    cap is above the runs here, so a lost save cannot hide behind it."""
    runs, history = 6, 10
    gp.test_file(
        """
        @pytest.mark.parametrize("case", range(6))
        def test_add(gpu_bench, case):
            add(gpu_bench)
        """
    )
    command = [
        sys.executable, "-m", "pytest",
        *gp.args("--gpuperf-save", f"--gpuperf-history={history}", "--gpuperf-budget=0.005"),
    ]  # fmt: skip
    processes = [
        subprocess.Popen(
            command, cwd=gp.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(runs)
    ]
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    for process, output in zip(processes, outputs, strict=True):
        assert process.returncode == 0, output
    saved = BaselineStore(gp.path / "baselines").load("mi300x-sim").entries
    assert len(saved) == 6
    for key, entry in saved.items():
        assert len(entry.saves) == min(runs, history), (key, len(entry.saves))


def test_a_baselines_provenance_reaches_the_failure_escaped(gp):
    """Text from a baseline file (a reported figure's source, a board) is printed in the
    failure: control characters in it are escaped, never sent to the terminal."""
    gp.test_file(TWO_TESTS)
    gp.baseline(
        "mi300x-sim",
        [
            {
                "id": "test_perf.py::test_add",
                "efficiency": 0.99,
                "reported_in": "a blog\\u001b]0;owned\\u0007\\u001b[2J\\rPASSED",
            }
        ],
    )
    result = gp.run("--gpuperf", "-k", "test_add", "-v")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\r" not in out
    assert "a blog\\x1b]0;owned\\x07\\x1b[2J\\rPASSED" in out


# -- a baseline folder that does not exist ------------------------------------------------------


def test_a_baseline_folder_that_does_not_exist_is_a_warning_in_the_summary(gp):
    """`--gpuperf-baseline-dir=nope` (a CI typo): every test had "no baseline" and the run
    was green, with only the header naming the folder."""
    gp.test_file("def test_add(gpu_bench):\n    add(gpu_bench)\n")
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    result = gp.run("--gpuperf", "--gpuperf-baseline-dir=nope")
    result.assert_outcomes(passed=1)
    warnings = [line for line in result.stdout.lines if "does not exist" in line]
    assert warnings == [
        "gpuperf: WARNING: the baseline folder nope does not exist, so no test is judged "
        "against a stored baseline: a typo? give the folder that holds them "
        "(--gpuperf-baseline-dir, gpuperf_baseline_dir), or record them there with "
        "--gpuperf-save"
    ], result.stdout.str()
    assert not (gp.path / "nope").exists()


def test_under_strict_a_baseline_folder_that_does_not_exist_stops_the_run(gp):
    gp.test_file("def test_add(gpu_bench):\n    add(gpu_bench)\n")
    gp.pytester.makeini("[pytest]\ngpuperf_baseline_dir = nope\n")
    result = gp.run("--gpuperf", "--gpuperf-strict", "--gpuperf-json=report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: pytest-gpuperf: --gpuperf-strict stops the run: the baseline folder nope does "
         "not exist, so "
         "no test is judged against a stored baseline (each test would fail on it); give the "
         "folder that holds them (--gpuperf-baseline-dir, gpuperf_baseline_dir), or record "
         "them there with --gpuperf-save"]
    )  # fmt: skip
    assert not (gp.path / "report.json").exists()


def test_the_default_folder_missing_or_a_save_into_a_new_folder_warns_of_nothing(gp):
    gp.test_file("def test_add(gpu_bench):\n    add(gpu_bench)\n")
    first = gp.run("--gpuperf")  # a first run, or a project of floors only
    saved = gp.run("--gpuperf", "--gpuperf-save", "--gpuperf-baseline-dir=new")
    for result in (first, saved):
        result.assert_outcomes(passed=1)
        assert "does not exist" not in result.stdout.str()
    assert (gp.path / "new" / "mi300x-sim.toml").exists()
