"""The explain pass through pytest on the simulated device: the options, when a run pays for a
profile (never when nothing fails), the one line a missing, refused or failing profiler gives,
and the whole chain — parent, profiler, child pytest in profile mode, plan, CSV, failure text,
JSON, Markdown — through a stand-in `ncu` (tests/fake_ncu.py: its numbers are SIMULATED; the
real profiler's run is tests/gpu/test_explain_on_gpu.py).

The simulated device has no counters, so the runs that go through a profiler tell the plugin
that its device is a CUDA one (`profiler_backend`): the child still measures nothing and
launches on the simulated device.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_gpuperf.plugin import explain_pass
from tests.plugin.conftest import N
from tests.plugin.test_callable_ab import callable_repo, set_launches

FAKE_NCU = Path(__file__).resolve().parents[1] / "fake_ncu.py"
ONE_TEST = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


@pytest.fixture
def fake_ncu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The stand-in ncu (run by this interpreter), and a device the plugin profiles as CUDA."""
    script = tmp_path / "ncu"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_NCU} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("GPUPERF_NCU", str(script))
    monkeypatch.setattr(explain_pass, "profiler_backend", lambda info: "cuda")
    return script


@pytest.mark.slow
def test_a_run_where_nothing_fails_profiles_nothing(gp, fake_ncu, monkeypatch):
    gp.test_file(ONE_TEST)
    monkeypatch.setenv("FAKE_NCU_MODE", "hang")  # a profile would hang the run
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    assert gp.report()["results"][0]["verdict"]["explain"] is None


@pytest.mark.slow
def test_explain_profiles_head_and_base_and_says_what_moved(repo, fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    monkeypatch.setenv("FAKE_NCU_READ_SCALE", "1.03")  # SIMULATED: head reads 3% more
    repo.write_kernel(efficiency=0.5)
    result = repo.run(
        "--gpuperf-compare=HEAD", "--gpuperf-explain", "--gpuperf-json=report.json",
        "--gpuperf-markdown=summary.md",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "explain: head moved +1.5% DRAM bytes: read +3.0% (6.3 -> 6.5 MB)" in text, text
    assert "write unchanged (6.3 MB)" in text
    explain = repo.report()["results"][0]["verdict"]["explain"]
    traffic = explain["traffic"]
    assert traffic["profiler"] == "ncu" and "--cache-control all" in traffic["cache_control"]
    assert traffic["head"]["dram_read_bytes"] == pytest.approx(3 * 4 * (1 << 20) / 2 * 1.03)
    assert traffic["base"]["dram_read_bytes"] == pytest.approx(3 * 4 * (1 << 20) / 2)
    assert traffic["cost_s"] > 0 and not traffic["problem"]
    assert explain["bytes_check"]["outcome"] == "within"  # 12.6 MB of 12.6 MB declared
    assert "head moved +1.5% DRAM bytes" in (repo.path / "summary.md").read_text()


@pytest.mark.slow
def test_a_wrong_declaration_warns_and_fails_under_strict(gp, fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    monkeypatch.setenv("FAKE_NCU_READ_SCALE", "1.6")  # SIMULATED: 30% more than declared
    gp.test_file(ONE_TEST)
    result = gp.run("--gpuperf", "--gpuperf-check-bytes", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1, warnings=1)
    assert "declared bytes look too low" in result.stdout.str()
    check = gp.report()["results"][0]["verdict"]["explain"]["bytes_check"]
    assert check["outcome"] == "over" and check["gap"] == pytest.approx(0.3)
    strict = gp.run("--gpuperf", "--gpuperf-check-bytes", "--gpuperf-strict")
    strict.assert_outcomes(failed=1)
    assert "declared bytes look too low" in strict.stdout.str()


@pytest.mark.parametrize(
    ("mode", "words", "said"),
    [
        ("perm", "ERR_NVGPUCTRPERM): run as root", 1),
        ("dcgm", "another tool holds the GPU's performance counters", 1),
        ("fail", "failed (exit 3)", 2),  # one line a test: the child of each test failed
    ],
)
@pytest.mark.slow
def test_a_profiler_that_cannot_profile_is_one_line_and_the_run_goes_on(
    gp, fake_ncu, monkeypatch, mode, words, said
):
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    gp.test_file(ONE_TEST + "\n\ndef test_other(gpu_bench):\n    add(gpu_bench)\n")
    result = gp.run("--gpuperf", "--gpuperf-explain", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=2)
    lines = [line for line in result.stdout.lines if words in line]
    assert len(lines) == said, result.stdout.str()  # a refusal: once for the run
    for row in gp.report()["results"]:
        assert words in row["verdict"]["explain"]["traffic"]["problem"]


@pytest.mark.slow
def test_a_child_that_hangs_is_stopped_at_the_timeout(gp, fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "hang")
    gp.test_file(ONE_TEST)
    result = gp.run("--gpuperf", "--gpuperf-explain", "--gpuperf-explain-timeout=2")
    result.assert_outcomes(passed=1)
    assert "took longer than 2 s and was stopped" in result.stdout.str()


def test_a_missing_profiler_names_the_fix(gp, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUPERF_NCU", str(tmp_path / "no-such-ncu"))
    monkeypatch.setattr(explain_pass, "profiler_backend", lambda info: "cuda")
    gp.test_file(ONE_TEST)
    result = gp.run("--gpuperf", "--gpuperf-explain")
    result.assert_outcomes(passed=1)
    assert "install Nsight Compute (or the CUDA toolkit), or set GPUPERF_NCU" in (
        result.stdout.str()
    )


def test_the_simulated_device_says_it_has_no_counters(gp):
    gp.test_file(ONE_TEST)
    result = gp.run("--gpuperf", "--gpuperf-explain")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*not explained: the simulated device has no counters*"])


def test_explain_only_acts_while_measuring(gp):
    gp.test_file(ONE_TEST)
    result = gp.run_plain("--gpuperf-explain")
    assert result.ret == 4
    assert "only acts while measuring" in result.stderr.str() + result.stdout.str()


@pytest.mark.slow
def test_the_child_takes_the_tests_smoke_branch_and_profiles_a_callable(gp, fake_ncu, monkeypatch):
    """In the child nothing is measured: a test that checks its timings while measuring
    (`gpu_bench.measuring`) skips them there, and a gpu_bench.run is profiled as one piece."""
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    gp.test_file(
        """
        def test_add(gpu_bench):
            result = add(gpu_bench)
            if gpu_bench.measuring:
                assert result.measurement.time_s > 0

        def test_callable(gpu_bench):
            kernel = gpu_bench.kernel("vadd.hip", "vector_add")
            n = 1 << 20
            a, c = gpu_bench.to_device(np.ones(n, np.float32)), gpu_bench.empty(n)
            def go():
                gpu_bench.backend.launch(kernel, n // 256, 256, (a, a, c, n))
            gpu_bench.run(go, bytes=12 * n)
        """
    )
    result = gp.run("--gpuperf", "--gpuperf-explain", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=2)
    rows = {row["test_id"]: row["verdict"]["explain"] for row in gp.report()["results"]}
    assert rows["test_perf.py::test_add"]["traffic"]["problem"] == ""
    callable_traffic = rows["test_perf.py::test_callable"]["traffic"]
    assert callable_traffic["problem"] == "" and callable_traffic["head"]["dram_read_bytes"] > 0
    # one input of ones: the GPU may compress it, and the check says so if bytes fall short
    assert rows["test_perf.py::test_callable"]["bytes_check"]["uniform_args"] == []


@pytest.mark.parametrize("mode", ["hang", "ok"])
def test_a_grandchild_holding_the_profilers_output_does_not_outlast_the_timeout(
    gp, fake_ncu, monkeypatch, tmp_path, mode
):
    """Issue 45 item 9: a profiler's helper left in a session of its own keeps the output
    open for a minute; the pass ends at its timeout (hang) or with the child (ok), not then."""
    import os
    import signal
    import time

    pid_file = tmp_path / "grandchild.pid"
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    monkeypatch.setenv("FAKE_NCU_GRANDCHILD", str(pid_file))
    gp.test_file(ONE_TEST)
    began = time.monotonic()
    try:
        result = gp.run(
            "--gpuperf", "--gpuperf-explain", "--gpuperf-explain-timeout=20",
            "--gpuperf-json=report.json",
        )  # fmt: skip
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    took_s = time.monotonic() - began
    result.assert_outcomes(passed=1)
    assert took_s < 45, took_s  # the grandchild holds the output for 60 s
    traffic = gp.report()["results"][0]["verdict"]["explain"]["traffic"]
    if mode == "hang":
        assert "took longer than 20 s and was stopped" in result.stdout.str()
    else:
        assert not traffic["problem"] and traffic["head"] is not None, traffic


def test_the_child_does_not_write_the_runs_reports_from_addopts(gp, fake_ncu, monkeypatch):
    """Issue 45 item 9: `--junitxml` and `--gpuperf-json` in addopts or PYTEST_ADDOPTS were
    written by the profiled child mid-run; the child gets private paths for them."""
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    monkeypatch.setenv("PYTEST_ADDOPTS", "--gpuperf-markdown=summary.md")
    gp.pytester.makeini("[pytest]\naddopts = --junitxml=junit.xml --gpuperf-json=report.json\n")
    gp.test_file(
        ONE_TEST
        + """

def test_zz_nothing_was_written_yet():
    from pathlib import Path
    written = [name for name in ("junit.xml", "report.json", "summary.md") if Path(name).exists()]
    assert not written, written
"""
    )
    result = gp.run("--gpuperf", "--gpuperf-explain")
    result.assert_outcomes(passed=2)
    assert gp.report()["results"][0]["verdict"]["explain"]["traffic"]["head"] is not None
    assert (gp.path / "junit.xml").exists() and (gp.path / "summary.md").exists()


# -- a callable's base, profiled beside head's ------------------------------------------------


@pytest.mark.slow
def test_a_callables_ab_failure_names_head_against_base_bytes(
    gp, fake_ncu, monkeypatch, tmp_path_factory
):
    """The child profiles head's callable and base's (the test's Python at REF, loaded as the
    A/B loads it), each side's launches ended by the plugin's marker kernel, so a callable's
    failure names head-vs-base DRAM bytes as a kernel's does."""
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    monkeypatch.setenv("FAKE_NCU_READ_SCALE", "1.03")  # SIMULATED: head reads 3% more
    callable_repo(gp, monkeypatch, tmp_path_factory)
    set_launches(gp, 2)
    result = gp.run(
        "--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-explain", "--gpuperf-json=report.json"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*explain: head moved +1.5% DRAM bytes: read +3.0% (*"])
    traffic = gp.report()["results"][0]["verdict"]["explain"]["traffic"]
    assert traffic["head"]["dram_read_bytes"] == pytest.approx(3 * 4 * N / 2 * 1.03)
    assert traffic["base"]["dram_read_bytes"] == pytest.approx(3 * 4 * N / 2)


@pytest.mark.slow
def test_a_callables_stored_failure_is_profiled_against_the_saved_commit(
    gp, fake_ncu, monkeypatch, tmp_path_factory
):
    """No compare: the stored baseline's failure has the callable loaded at the commit of
    its save profiled beside head's."""
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    monkeypatch.setenv("FAKE_NCU_READ_SCALE", "1.03")
    callable_repo(gp, monkeypatch, tmp_path_factory)
    gp.run("--gpuperf-save").assert_outcomes(passed=1)
    saved = (gp.path / "baselines" / "mi300x-sim.toml").read_text()
    commit = next(line for line in saved.splitlines() if line.startswith("commit = "))
    set_launches(gp, 2)
    result = gp.run("--gpuperf", "--gpuperf-explain", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    traffic = gp.report()["results"][0]["verdict"]["explain"]["traffic"]
    short = commit.split('"')[1][:12]
    assert (
        traffic["lines"][0] == f"base: the callable loaded at the stored baseline's commit {short}"
    )
    assert "read +3.0%" in traffic["lines"][1]
    assert traffic["base"] is not None
