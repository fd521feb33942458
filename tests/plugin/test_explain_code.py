"""A failure explains itself with the code facts of head and base (explain/), on the
simulated device: the failure text, the JSON's `explain` object and the Markdown summary, for
an A/B regression and a stored-baseline regression; a passing run computes none.

The simulated device runs no code: its facts are what clang-19 compiles for its gfx942, and
the text says so. The edits here change the code (a third load) or only the simulator's
directive (no change in the code), so both answers are shown.
"""

from __future__ import annotations

import pytest

from tests import toolchains
from tests.git_repo import commit_all

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


@pytest.fixture(autouse=True)
def _clang(request, monkeypatch, tmp_path):
    if "no_clang" not in request.fixturenames:
        toolchains.need("clang-19")
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "kernel-cache"))


@pytest.fixture
def no_clang(monkeypatch):
    """A machine without any clang, as `.ci/without clang` makes one: no candidate is found
    (the inner runs are in this process), and no facts are left over from earlier tests."""
    from pytest_gpuperf.explain.code import kernel_facts
    from pytest_gpuperf.gate.static import clang

    monkeypatch.setattr(clang, "_resolve", lambda name: None)
    monkeypatch.setattr(kernel_facts, "_cache", {})


def _slower_with_an_extra_load(gp) -> None:
    """Head reads a third value per element (and the sim's directive makes it slower)."""
    path = gp.write_kernel(0.5)
    path.write_text(
        path.read_text().replace(
            "c[i] = a[i] + b[i];", "c[i] = a[i] + b[i] + (i + 1 < n ? a[i + 1] * 0.0f : 0.0f);"
        )
    )


@pytest.fixture
def repo(gp):
    gp.test_file(PLAIN)
    commit_all(gp.path, "the base")
    return gp


def test_an_ab_regression_names_what_changed_in_the_code(repo):
    _slower_with_an_extra_load(repo)
    result = repo.run(
        "--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json",
        "--gpuperf-markdown=summary.md",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "vector_add: A/B regressed against HEAD*",
            "  code:*global loads 2 -> 3 (b32 2 -> 3)*",
            "  code from:*head against the A/B base HEAD (*); resources from the code object's "
            "metadata (clang 19*; compiled for gfx942 by clang 19*: the simulated device runs "
            "no code",
        ]
    )
    explain = repo.report()["results"][0]["verdict"]["explain"]
    assert set(explain) == {"code", "traffic", "bytes_check"}
    assert explain["traffic"] is None and explain["bytes_check"] is None
    code = explain["code"]
    assert code["head"]["global_loads"] == {"b32": 3}
    assert code["base"]["global_loads"] == {"b32": 2}
    assert code["head"]["arch"] == "gfx942" and code["head"]["registers"] > 0
    assert any("global loads 2 -> 3" in line for line in code["changes"])
    assert 0 < code["cost_s"] < 120  # compiled and disassembled for this failure only
    markdown = (repo.path / "summary.md").read_text()
    assert "code:" in markdown and "global loads 2 -> 3 (b32 2 -> 3)" in markdown


def test_an_edit_that_leaves_the_code_alone_says_so(repo):
    repo.write_kernel(0.5)  # only the simulator's directive (a comment to a compiler)
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["  code:*no change in the code (byte-identical machine code)"])
    code = repo.report()["results"][0]["verdict"]["explain"]["code"]
    assert code["changes"] == ["no change in the code (byte-identical machine code)"]
    assert code["head"]["fingerprint"] == code["base"]["fingerprint"]


def test_a_passing_run_computes_no_explanation(repo, tmp_path):
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    assert repo.report()["results"][0]["verdict"]["explain"] is None
    assert not (tmp_path / "kernel-cache" / "static").exists()  # clang never ran


def _saved(repo) -> str:
    """A baseline saved at the committed code; the commit it records."""
    result = repo.run("--gpuperf-save")
    result.assert_outcomes(passed=1)
    saved = (repo.path / "baselines" / "mi300x-sim.toml").read_text()
    commit = next(line for line in saved.splitlines() if line.startswith("commit = "))
    return commit.split('"')[1]


def test_a_stored_regression_is_explained_against_the_commit_the_baseline_was_saved_from(repo):
    commit = _saved(repo)
    _slower_with_an_extra_load(repo)
    result = repo.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "vector_add: regressed: *",
            "  code:*global loads 2 -> 3 (b32 2 -> 3)*",
            f"  code from:*head against the stored baseline ({commit[:12]}*",
        ]
    )
    code = repo.report()["results"][0]["verdict"]["explain"]["code"]
    assert code["base"]["global_loads"] == {"b32": 2} and code["unavailable"] == ""


def test_a_stored_regression_of_unchanged_code_says_so(repo):
    _saved(repo)
    repo.write_kernel(0.2)  # the simulator's directive only
    result = repo.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["vector_add: regressed: *", "  code:*no change in the code*"])


def test_a_stored_baseline_without_a_commit_has_no_base_code(gp):
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["  code:*base code not available: the stored baseline records no commit"]
    )
    code = gp.report()["results"][0]["verdict"]["explain"]["code"]
    assert code["base"] is None and code["head"]["registers"] > 0


def test_a_stored_commit_git_cannot_find_is_said_and_the_verdict_stands(gp):
    """A baseline saved from a commit this clone lacks (a shallow CI checkout): the failure
    names it in one line; the verdict and everything else are as without an explanation."""
    gp.test_file(PLAIN)
    commit_all(gp.path, "the base")
    path = gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    missing = "0123456789abcdef0123456789abcdef01234567"
    path.write_text(path.read_text().replace('note = "written by hand"', f'commit = "{missing}"'))
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "vector_add: regressed: *",
            "  code:*base code not available: commit 0123456789ab, which the baseline was saved "
            "from, is not in this repository (a shallow clone? `git fetch --depth=1 origin "
            f"{missing}`)",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    verdict = gp.report()["results"][0]["verdict"]
    assert verdict["status"] == "fail" and verdict["explain"]["code"]["base"] is None


TWO_OF_ONE_KERNEL = """
def test_add(gpu_bench):
    add(gpu_bench)


def test_add_again(gpu_bench):
    add(gpu_bench, name="again")
"""


def test_without_clang_each_row_is_short_and_the_advice_is_said_once(gp, no_clang):
    """Two failures on a machine without clang: each `code:` row says only that the facts
    need clang-19; how to install it (and every clang tried) is one note of the run, in the
    terminal and the Markdown summary; the JSON keeps it with each failure."""
    gp.test_file(TWO_OF_ONE_KERNEL)
    commit_all(gp.path, "the base")
    gp.write_kernel(0.5)
    result = gp.run(
        "--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json",
        "--gpuperf-markdown=summary.md",
    )  # fmt: skip
    result.assert_outcomes(failed=2)
    output = result.stdout.str()
    rows = [line for line in output.splitlines() if line.startswith("  code: ")]
    assert rows and set(rows) == {"  code:         the code facts need clang-19"}, rows
    advice = [line for line in output.splitlines() if "apt-get install clang-19" in line]
    assert len(advice) == 1, advice
    assert advice[0].startswith("note: no code facts: no clang on PATH cannot compile HIP for ")
    assert "(tried clang-19: not found;" in advice[0]
    markdown = (gp.path / "summary.md").read_text()
    assert markdown.count("apt-get install clang-19") == 1
    assert "the code facts need clang-19" in markdown
    for row in gp.report()["results"]:
        code = row["verdict"]["explain"]["code"]
        assert code["unavailable"] == "the code facts need clang-19"
        assert code["advice"].startswith("no clang on PATH cannot compile HIP for gfx942: ")


def test_a_base_that_does_not_compile_is_named_as_git_names_it_never_by_a_runners_path(
    gp, tmp_path
):
    """The baseline's commit holds a kernel that does not compile (saved from a fixed, dirty
    tree): the `code:` row quoted the compiler's absolute path of the extracted tree, the
    runner's cache folder, into the failure, the JSON and the Markdown summary."""
    gp.test_file(PLAIN)
    path = gp.path / "vadd.hip"
    good = path.read_text()
    path.write_text(good.replace("c[i] = a[i] + b[i];", "c[i] = a[i] + b[i] + flaot(0);"))
    commit = commit_all(gp.path, "a base that does not compile")
    path.write_text(good)
    stored = gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    stored.write_text(
        stored.read_text().replace('note = "written by hand"', f'commit = "{commit}-dirty"')
    )
    result = gp.run("--gpuperf", "--gpuperf-json=report.json", "--gpuperf-markdown=summary.md")
    result.assert_outcomes(failed=1)
    short = commit[:12]
    result.stdout.fnmatch_lines(
        [f"  code:*base code not available (stored baseline from {short}): {short}:vadd.hip:4: "
         "does not compile (clang *): error: use of undeclared identifier 'flaot'"]
    )  # fmt: skip
    code = gp.report()["results"][0]["verdict"]["explain"]["code"]
    markdown = (gp.path / "summary.md").read_text()
    rows = "\n".join(line for line in result.stdout.lines if "code" in line)
    for text in (rows, str(code), markdown):
        assert str(tmp_path) not in text and str(gp.path) + "/" not in text
    assert f"{short}:vadd.hip:4: does not compile" in markdown
