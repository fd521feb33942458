"""--gpuperf-compare=REF on the simulated device: head and base measured interleaved in one run,
and every state a user can act on (pass, regressed, improved, inconclusive, no base,
unchanged code), a REF or work tree git cannot serve, a kernel file added in head, xdist."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gpuperf.engine import stats
from tests.git_repo import git

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""

TWO_KERNELS = """
def test_add(gpu_bench):
    add(gpu_bench)

def test_new(gpu_bench):
    add(gpu_bench, path="new.hip")
"""


def set_efficiency(gp, efficiency: float | None) -> None:
    """Edit the kernel in the work tree (uncommitted): the simulated device streams a kernel
    at the efficiency its `gpuperf-sim` directive names, so this changes its time."""
    gp.write_kernel(efficiency)


def test_unchanged_code_is_not_timed(repo):
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*same code*", "*compiled to the same code object: not timed*"])
    comparison = repo.report()["results"][0]["verdict"]["comparison"]
    assert comparison["state"] == "unchanged"
    assert comparison["ref"] == "HEAD" and len(comparison["ref_commit"]) == 40
    assert comparison["head_fingerprint"] == comparison["base_fingerprint"]


def test_a_comment_only_edit_is_still_the_same_code(repo):
    path = repo.path / "vadd.hip"
    path.write_text(path.read_text().replace("c[i] = a[i] + b[i];", "c[i] = a[i] + b[i];  // sum"))
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*same code*"])


def test_forced_timing_of_identical_code_is_never_a_regression(repo):
    """The A/A control: identical kernels timed anyway, each side loaded 8 times. On the
    simulated MI300X every load draws its own code drift (+-1.1% between two loads), which
    the run measures and carries into the interval: it contains 1, and the report keeps
    both sides' samples in pair order with the load of each pair."""
    result = repo.run(
        "--gpuperf",
        "--gpuperf-compare=HEAD",
        "--gpuperf-compare-force",
        "--gpuperf-json=report.json",
    )
    result.assert_outcomes(passed=1)
    document = repo.report()
    assert document["schema_version"] == 4
    measurement = document["results"][0]["measurement"]
    comparison = document["results"][0]["verdict"]["comparison"]
    assert comparison["state"] in ("pass", "inconclusive") and comparison["forced"] is True
    low, high = comparison["ratio_ci"]
    assert low <= 1.0 <= high and comparison["pairs"] >= 24
    assert (comparison["loads"], comparison["drift_basis"]) == (8, "measured")
    assert comparison["statistic"].startswith("10%-trimmed mean of log ratios")
    assert comparison["confidence"] == 0.95 and comparison["user_threshold"] == 0.005
    pairs = comparison["pairs"]
    assert len(comparison["base_samples_s"]) == len(measurement["samples_s"]) == pairs
    assert sorted(set(comparison["pair_loads"])) == list(range(8))
    logs = np.log(np.array(measurement["samples_s"]) / np.array(comparison["base_samples_s"]))
    found = stats.nested_trimmed_mean(logs, comparison["pair_loads"])
    assert math.exp(found.estimate) == pytest.approx(comparison["ratio"], rel=1e-12)


def test_a_slower_head_regresses_and_fails_naming_head_base_and_the_interval(repo):
    set_efficiency(repo, 0.5)  # the base streams at the catalog's 0.7185
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "vector_add: A/B regressed against HEAD (*): head/base time 1.* (+*%), 95% CI 1.* to "
            "1.*, all above the threshold 1 + *%, "
            "confirmed by a second round: +*%",
            "  threshold:*+*%: *",
            "  pairs:*interleaved head/base pairs on the same buffers: head *% vs base *% of "
            "peak, base * µs, base built from HEAD (*)",
            "  device:*",
            "  more:*pytest -v adds the measurement",
            "*FAIL A/B*",
        ]
    )
    verdict = repo.report()["results"][0]["verdict"]
    assert verdict["status"] == "fail" and verdict["comparison"]["state"] == "regressed"
    assert verdict["comparison"]["head_efficiency"] < verdict["comparison"]["base_efficiency"]


def test_a_regression_fails_only_after_a_second_round_confirms_it(repo):
    """Both rounds are in the failure text, the table, the summary and the JSON; the second
    one timed freshly loaded code objects (another module) on fresh buffers."""
    set_efficiency(repo, 0.5)
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*confirmation: measured again with freshly loaded code objects on fresh buffers: "
            "head/base time 1.* (95% CI 1.* to 1.*) over * pairs: regressed again: confirmed",
            "*vector_add*+2*% slower, again +2*%*FAIL A/B*",
            "gpuperf: confirmation: 1 regression measured again: 1 confirmed (failed), 0 not "
            "confirmed*",
        ]
    )
    document = repo.report()
    comparison = document["results"][0]["verdict"]["comparison"]
    assert comparison["first_state"] == "regressed" and comparison["state"] == "regressed"
    second = comparison["confirmation"]
    assert second["state"] == "regressed" and second["pairs"] >= 10
    assert second["ratio"] != comparison["ratio"]  # another round, not a copy
    assert second["confidence"] == pytest.approx(0.95)
    assert document["suite"]["checks"] == 1 and document["suite"]["confirmed"] == 1


def test_a_faster_head_is_reported_as_improved(repo):
    repo.write_kernel(0.5)
    git(repo.path, "commit", "-qam", "slow base")
    repo.write_kernel(None)  # head back to the catalog's efficiency: faster than the base
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*faster*pass (faster)*"])
    assert repo.report()["results"][0]["verdict"]["comparison"]["state"] == "improved"


def test_a_difference_at_the_threshold_is_inconclusive_and_strict_fails_it(repo):
    set_efficiency(repo, 0.7)  # a little slower than the base
    # A budget so short that sampling stops after the first batch of pairs, whatever the
    # threshold: the same seed then gives the same pairs in every run.
    # No code-object allowance: the threshold alone decides (it is what this test is about).
    short = [
        "--gpuperf",
        "--gpuperf-compare=HEAD",
        "--gpuperf-budget=0.000001",
        "--gpuperf-compare-loads=1",
        "--gpuperf-compare-code-spread=0",
    ]
    repo.run(*short, "--gpuperf-json=report.json")
    ratio = repo.report()["results"][0]["verdict"]["comparison"]["ratio"]
    # the threshold right at the measured difference: the interval straddles it
    args = [*short, f"--gpuperf-compare-threshold={ratio - 1:.6f}"]
    result = repo.run(*args, "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*undecided*", "*straddles the threshold at the budget*"])
    assert repo.report()["results"][0]["verdict"]["comparison"]["state"] == "inconclusive"
    strict = repo.run(*args, "--gpuperf-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*FAIL A/B undecided*"])


def test_changed_code_is_judged_with_its_measured_drift_or_an_assumed_one(repo):
    """With 8 loads per side the run measures the drift between loads and the user's
    threshold stays. With fewer than 3 loads it cannot, and the simulated MI300X, as HIP,
    assumes +-1.57% of drift per code object: a pair of different code objects is then
    judged at 2.67% unless the user measured better."""
    from pytest_gpuperf.gate.policy import DEFAULT_CODE_SPREAD, code_allowance

    set_efficiency(repo, 0.5)
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    comparison = repo.report()["results"][0]["verdict"]["comparison"]
    assert (comparison["drift_basis"], comparison["code_spread"]) == ("measured", 0.0)
    assert comparison["threshold_basis"] in ("user", "quantum")
    assumed = repo.run(
        "--gpuperf",
        "--gpuperf-compare=HEAD",
        "--gpuperf-compare-loads=1",
        "--gpuperf-json=report.json",
    )
    assumed.assert_outcomes(failed=1)
    assumed.stdout.fnmatch_lines(
        ["*threshold:*+2.67%: what a different code object's drift of +-1.57% explains*"]
    )
    verbose = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-compare-loads=1", "-v")
    verbose.stdout.fnmatch_lines(["*threshold:*+2.67%*", "*device:*", "*measured:*"])
    comparison = repo.report()["results"][0]["verdict"]["comparison"]
    assert comparison["code_spread"] == DEFAULT_CODE_SPREAD["sim"]
    assert comparison["threshold"] == pytest.approx(code_allowance(DEFAULT_CODE_SPREAD["sim"]))
    assert comparison["user_threshold"] == 0.005
    assert (comparison["threshold_basis"], comparison["drift_basis"]) == ("drift", "assumed")
    assert comparison["drift"] == DEFAULT_CODE_SPREAD["sim"] and comparison["loads"] == 1
    measured = repo.run(
        "--gpuperf",
        "--gpuperf-compare=HEAD",
        "--gpuperf-compare-loads=2",
        "--gpuperf-compare-code-spread=0.002",
        "--gpuperf-json=report.json",
    )
    measured.stdout.fnmatch_lines(
        ["*A/B against HEAD (threshold 0.5%, code spread ±0.20%, 2 loads per side)*"]
    )
    comparison = repo.report()["results"][0]["verdict"]["comparison"]
    assert comparison["code_spread"] == 0.002
    # 2.33 x sqrt(2) x 0.1% is less than the threshold, which a 5 us kernel's jitter widens
    assert comparison["threshold"] == pytest.approx(max(0.005, 0.04e-6 / comparison["base_time_s"]))
    bad = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-compare-code-spread=2")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*code-object spread*must be in [[]0, 0.5], got '2'*"])
    bad = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-compare-loads=0")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*expected a number of module loads from 1 to 64, got '0'*"])


def test_a_kernel_file_added_in_head_has_no_base(repo):
    (repo.path / "new.hip").write_text((repo.path / "vadd.hip").read_text())
    conftest = repo.path / "conftest.py"
    conftest.write_text(
        conftest.read_text() + "\n\nsimulate.model('new.hip', 'vector_add')(vector_add)\n"
    )
    repo.test_file(TWO_KERNELS)
    result = repo.run(
        "--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-strict", "--gpuperf-save"
    )  # strict: a new kernel is still no failure
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*no base*", "*the kernel's file is new: new.hip does not exist at HEAD*"]
    )


NEW_KERNEL = """
def test_scale(gpu_bench):
    kernel = gpu_bench.kernel("vadd.hip", "vector_scale")
    n = 1 << 16
    x = gpu_bench.to_device(np.ones(n, np.float32))
    gpu_bench(kernel, grid=n // 256, block=256, args=(x, n), bytes=8 * n)
"""


def test_a_base_commit_with_no_files_gives_no_base(gp, tmp_path_factory, monkeypatch):
    """A repository whose first commit is empty (`git commit --allow-empty`): git archive of it
    is a tar the reader cannot open; every kernel simply has no base there."""
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    gp.test_file(PLAIN)
    git(gp.path, "init", "-q")
    git(gp.path, "commit", "-q", "--allow-empty", "-m", "empty start")
    result = gp.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    comparison = gp.report()["results"][0]["verdict"]["comparison"]
    assert (comparison["state"], comparison["no_base_why"]) == ("no-base", "file")


def test_a_kernel_added_to_an_existing_file_has_no_base(repo):
    path = repo.path / "vadd.hip"
    path.write_text(
        path.read_text() + "GPUPERF_KERNEL void vector_scale(float* x, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) x[i] *= 2.0f;\n}\n"
    )
    repo.test_file(NEW_KERNEL)
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*the kernel is new: no kernel 'vector_scale' in that file at HEAD*"]
    )


def test_a_ref_that_does_not_resolve_stops_the_run_quoting_git(repo):
    """A typo in REF would otherwise switch the pull-request gate off: every kernel 'no
    base', exit 0."""
    git(repo.path, "remote", "add", "origin", str(repo.path))
    result = repo.run("--gpuperf", "--gpuperf-compare=orgin/main", "--gpuperf-json=report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--gpuperf-compare=orgin/main: git cannot resolve 'orgin/main' to a commit" in err
    assert "fatal: ambiguous argument 'orgin/main': unknown revision" in err  # git's words
    assert "There is no remote 'orgin' (remotes: origin); a typo?" in err
    assert "git fetch --depth=1 origin main" in err and "--gpuperf-compare-missing-ok" in err
    assert "passed" not in result.stdout.str() and not (repo.path / "report.json").exists()
    # a ref the (shallow) clone does not have names its own fetch command
    shallow = repo.run("--gpuperf", "--gpuperf-compare=origin/release-2")
    assert shallow.ret == pytest.ExitCode.USAGE_ERROR
    assert "Fetch it first: `git fetch --depth=1 origin release-2`" in shallow.stderr.str()


def test_the_static_gate_stops_at_a_ref_that_does_not_resolve_too(repo, clang19):
    """The static gate resolves REF at start as well; it needs a clang to get that far (without
    one it stops first, naming the clang to install), so this part asks for clang-19."""
    git(repo.path, "remote", "add", "origin", str(repo.path))
    static = repo.run("--gpuperf-static=gfx942", "--gpuperf-compare=orgin/main")
    assert static.ret == pytest.ExitCode.USAGE_ERROR
    assert "git cannot resolve 'orgin/main'" in static.stderr.str()


def test_missing_ok_runs_on_with_no_base_and_says_so(repo):
    result = repo.run(
        "--gpuperf", "--gpuperf-compare=no-such-branch", "--gpuperf-compare-missing-ok"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*no base*",
            "*the base revision no-such-branch could not be used: --gpuperf-compare=no-such-branch:"
            " git cannot resolve 'no-such-branch'*",
            "gpuperf: nothing was compared with no-such-branch: git cannot resolve it here, and "
            "--gpuperf-compare-missing-ok runs on without a base*",
        ]
    )
    repo.pytester.makeini("[pytest]\ngpuperf_compare_missing_ok = true\n")
    ini = repo.run("--gpuperf", "--gpuperf-compare=no-such-branch", "--gpuperf-strict")
    ini.assert_outcomes(failed=1)  # strict still fails what could not reach its base
    assert "--gpuperf-compare-missing-ok runs on without a base" in ini.stdout.str()


def test_a_work_tree_that_is_not_a_git_repository(gp, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(gp.path.parent))
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf", "--gpuperf-compare=origin/main")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*is not inside a git work tree*--gpuperf-compare-missing-ok*"])
    allowed = gp.run("--gpuperf", "--gpuperf-compare=origin/main", "--gpuperf-compare-missing-ok")
    allowed.assert_outcomes(passed=1)
    allowed.stdout.fnmatch_lines(["*is not inside a git work tree*"])


def test_a_bad_ref_option_is_a_usage_error(gp):
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf", "--gpuperf-compare=--oops")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-compare: expected a git revision*"])


def test_nothing_in_the_work_tree_is_touched(repo):
    set_efficiency(repo, 0.5)
    before = git(repo.path, "status", "--porcelain", "--", ".", ":!.locks")
    branches = git(repo.path, "branch", "--list")
    repo.run("--gpuperf", "--gpuperf-compare=HEAD")
    assert git(repo.path, "status", "--porcelain", "--", ".", ":!.locks") == before
    assert git(repo.path, "branch", "--list") == branches
    assert git(repo.path, "worktree", "list").count("\n") == 0


@pytest.mark.slow
def test_compare_under_xdist(repo):
    pytest.importorskip("xdist")
    repo.test_file(PLAIN + PLAIN.replace("test_add", "test_add_again"))
    set_efficiency(repo, 0.5)
    result = repo.run_subprocess(
        "--gpuperf", "--gpuperf-compare=HEAD", "-n", "2", "--gpuperf-json=report.json", "-v"
    )
    result.assert_outcomes(failed=2)
    document = repo.report()
    states = [r["verdict"]["comparison"]["state"] for r in document["results"]]
    assert states == ["regressed", "regressed"]
    assert [r["verdict"]["comparison"]["confirmation"]["state"] for r in document["results"]] == [
        "regressed",
        "regressed",
    ]
    # each worker counted the whole run at collection: the budget is shared by 2 tests
    assert document["suite"]["checks"] == 2 and document["suite"]["confirmations"] == 2
    result.stdout.fnmatch_lines(["*false alarms: 2 checks judged (2 A/B, 0 stored) in 2 *"])


def test_stored_baselines_are_shown_not_gated_while_comparing(repo):
    repo.run("--gpuperf-save").assert_outcomes(passed=1)
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-qm", "baselines")
    repo.path.joinpath("baselines", "mi300x-sim.toml").write_text(
        repo.path.joinpath("baselines", "mi300x-sim.toml")
        .read_text()
        .replace("efficiency = 0.", "efficiency = 0.9", 1)  # a baseline far above reach
    )
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD")
    result.assert_outcomes(passed=1)  # same code: the stored regression is only shown
    result.stdout.fnmatch_lines(["*stored baselines are shown, not gated*"])


def test_the_pairs_are_spread_over_a_buffer_set_per_load(repo, monkeypatch):
    """Each load runs on its own set of buffers (the test's own, then fresh device copies),
    so where the buffers landed is measured with the loads and carried in the interval: the
    failure text, the JSON (both rounds) and the header say so. --gpuperf-compare-buffer-sets
    (and its ini key) sets how many; out of range stops the run naming the range."""
    monkeypatch.setenv("GPUPERF_SIM_BUFFER_CODE_SPREAD", "0.02")
    set_efficiency(repo, 0.5)
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the drift between module loads and buffer sets, measured in this run at +-*% "
            "over 8 loads per side on 8 buffer sets, is carried in the interval*"
        ]
    )
    comparison = repo.report()["results"][0]["verdict"]["comparison"]
    assert (comparison["buffer_sets"], comparison["buffer_sets_note"]) == (8, "")
    assert comparison["confirmation"]["buffer_sets"] == 8
    one = repo.run(
        "--gpuperf",
        "--gpuperf-compare=HEAD",
        "--gpuperf-compare-buffer-sets=1",
        "--gpuperf-json=report.json",
    )
    one.stdout.fnmatch_lines(["*A/B against HEAD (threshold 0.5%, 1 buffer set)*"])
    assert repo.report()["results"][0]["verdict"]["comparison"]["buffer_sets"] == 1
    repo.pytester.makeini("[pytest]\ngpuperf_compare_buffer_sets = 2\n")
    two = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    two.stdout.fnmatch_lines(["*over 8 loads per side on 2 buffer sets*"])
    assert repo.report()["results"][0]["verdict"]["comparison"]["buffer_sets"] == 2
    for bad_value in ("0", "65", "two"):
        bad = repo.run(
            "--gpuperf", "--gpuperf-compare=HEAD", f"--gpuperf-compare-buffer-sets={bad_value}"
        )
        assert bad.ret == pytest.ExitCode.USAGE_ERROR
        bad.stderr.fnmatch_lines(
            [
                f"*expected a number of buffer sets from 1 to 64 (1: the test's own buffers "
                f"only), got '{bad_value}'*"
            ]
        )


def test_a_base_tree_changed_in_the_cache_is_extracted_again_and_named(repo):
    """A file of the cached base tree edited (a runner that keeps its home, a restored CI
    cache): the tree was reused as found, and a +61% regression read "-41.5% faster, pass"
    for every later pull request against that base."""
    import os
    from pathlib import Path

    set_efficiency(repo, 0.5)  # head is slower than the base's 0.7185
    repo.run("--gpuperf", "--gpuperf-compare=HEAD").assert_outcomes(failed=1)
    commit = git(repo.path, "rev-parse", "HEAD")
    cached = Path(os.environ["GPUPERF_CACHE_DIR"]) / "trees" / commit
    kernel = cached / "vadd.hip"
    kernel.write_text("// gpuperf-sim: efficiency=0.3\n" + kernel.read_text())  # a slow base
    (cached / "extra.h").write_text("#define SNEAKY 1\n")
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)  # still the regression it is
    assert repo.report()["results"][0]["verdict"]["comparison"]["state"] == "regressed"
    result.stdout.fnmatch_lines(
        [f"gpuperf: WARNING: the cached tree of HEAD ({commit[:12]}) in the kernel cache was "
         "not git's: extra.h (not in git), vadd.hip; it was extracted again, and this run "
         "compared with git's (who else writes that cache?)"]
    )  # fmt: skip
    assert "efficiency=0.3" not in kernel.read_text() and not (cached / "extra.h").exists()
    again = repo.run("--gpuperf", "--gpuperf-compare=HEAD")
    assert "was not git's" not in again.stdout.str()  # checked, and found git's
