"""--gpuperf-head=REF on the simulated device: the kernels are built from REF's tree (the test
files stay the work tree's), so with --gpuperf-compare one commit is measured against
another, as a bisection probe does; the JSON report names each test's kernel files."""

from __future__ import annotations

import pytest

from tests.git_repo import commit_all, git


@pytest.fixture
def history(repo):
    """Two commits: the kernel at the sim's default speed ("base"), then slower (0.5)."""
    repo.write_kernel(0.5)
    commit_all(repo.path, "slow")
    return repo


def test_head_and_base_of_one_revision_are_the_same_code(history):
    history.write_kernel(0.3)  # an uncommitted edit: --gpuperf-head does not measure it
    result = history.run(
        "--gpuperf", "--gpuperf-head=HEAD~1", "--gpuperf-compare=HEAD~1",
        "--gpuperf-json=report.json",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    document = history.report()
    assert document["results"][0]["verdict"]["comparison"]["state"] == "unchanged"
    head_commit = git(history.path, "rev-parse", "HEAD~1")
    assert document["head"] == {"ref": "HEAD~1", "commit": head_commit}
    assert document["tests"] == [
        {"test_id": "test_perf.py::test_add", "outcome": "passed",
         "kernel_files": ["vadd.hip"], "error": ""},
    ]  # fmt: skip
    assert document["rootdir"] == str(history.path)
    result.stdout.fnmatch_lines(["*kernels from HEAD~1*"])


def test_one_commit_against_another_is_the_ab_comparison(history):
    history.write_kernel()  # the work tree fast again: the head is HEAD's (slow) all the same
    result = history.run(
        "--gpuperf", "--gpuperf-head=HEAD", "--gpuperf-compare=HEAD~1",
        "--gpuperf-json=report.json",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    comparison = history.report()["results"][0]["verdict"]["comparison"]
    assert comparison["state"] == "regressed" and comparison["ratio_ci"][0] > 1.2
    assert comparison["ref_commit"] == git(history.path, "rev-parse", "HEAD~1")


def test_a_kernel_file_the_revision_lacks_fails_its_test_naming_it(history):
    (history.path / "new.hip").write_text((history.path / "vadd.hip").read_text())
    history.test_file(
        """
        def test_new(gpu_bench):
            add(gpu_bench, path="new.hip")
        """,
        name="test_new",
    )
    result = history.run(
        "--gpuperf", "--gpuperf-head=HEAD", "--gpuperf-json=report.json", "test_new.py"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*new.hip: no source at --gpuperf-head: new.hip does not exist at HEAD*"]
    )
    (test,) = history.report()["tests"]
    assert test["kernel_files"] == ["new.hip"] and test["outcome"] == "failed"
    assert test["error"].startswith("CompileError: ") and "does not exist at HEAD" in test["error"]


def test_a_ref_git_cannot_resolve_stops_the_run_at_start(history):
    result = history.run("--gpuperf", "--gpuperf-head=nosuchref")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-head=nosuchref: git cannot resolve 'nosuchref'*"])


def test_saving_kernels_of_another_revision_is_refused(history):
    result = history.run("--gpuperf-save", "--gpuperf-head=HEAD~1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-head and --gpuperf-save exclude each other*"])
    assert not (history.path / "baselines").exists()
