"""The output samples of the docs (tests/doc_samples.py), produced by real runs on the
simulated device and compared with what the docs show: a change of wording fails here until
the docs follow (`GPUPERF_UPDATE_DOC_SAMPLES=1` rewrites them from these runs)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/doc_samples.py

from doc_samples import MARKER, SCENARIOS, check_sample, documents, excerpt

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""

# A commit with these names and dates has the same id on every machine, so the sample's
# "base built from HEAD (...)" does not change from run to run.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "docs",
    "GIT_AUTHOR_EMAIL": "docs@example.com",
    "GIT_COMMITTER_NAME": "docs",
    "GIT_COMMITTER_EMAIL": "docs@example.com",
    "GIT_AUTHOR_DATE": "2026-11-25T12:00:00Z",
    "GIT_COMMITTER_DATE": "2026-11-25T12:00:00Z",
}


def commit_all(gp) -> None:
    for key, value in GIT_ENV.items():
        gp.monkeypatch.setenv(key, value)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=gp.path, check=True, capture_output=True)


CODE_ROWS = re.compile(r"^  code(?: from)?: .*\n", re.M)
NEEDS_CLANG = "the code facts need clang-19"


def _code_rows_checked(output: str, code_row: str):
    """The samples' `code:` rows are clang-19's facts for gfx942. On a machine without
    clang-19 (a laptop running the README's command) the row says only that the facts need
    it, the long advice is said once in the run's notes, and the sample is compared with its
    code rows left out; with clang-19 every row is compared."""
    if shutil.which("clang-19"):
        return str
    assert f"  code:         {code_row}\n" in output, output
    advice = [line for line in output.splitlines() if "install one (Debian/Ubuntu" in line]
    assert len(advice) == 1 and advice[0].startswith("note: no code facts: no clang on PATH")
    return lambda text: CODE_ROWS.sub("", text)


def test_ab_regression(gp, tmp_path_factory):
    """docs/writing-perf-tests.md, "Reading a failure": a kernel edited to stream at 0.6 of
    its speed, compared with HEAD."""
    gp.monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    gp.test_file(PLAIN)
    commit_all(gp)
    gp.write_kernel(0.6)
    result = gp.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-budget=1")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    elide = _code_rows_checked(output, NEEDS_CLANG)
    check_sample("ab-regression", excerpt(output, "vector_add: A/B regressed", "  more:"), elide)


def test_stored_regression(gp):
    """docs/writing-perf-tests.md: a stored baseline of 90% of peak, measured at ~46%."""
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    result = gp.run("--gpuperf", "--gpuperf-budget=1")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    no_commit = "base code not available: the stored baseline records no commit"
    elide = _code_rows_checked(output, f"{no_commit}; {NEEDS_CLANG}")
    check_sample("stored-regression", excerpt(output, "vector_add: regressed", "  update:"), elide)


def _reasons_elided(text: str) -> str:
    """A machine's library paths and driver words vary: the backends' reasons are elided."""
    return re.sub(r"no usable GPU \(hip: .*?\)\)?\. ", "no usable GPU (...). ", text)


def test_require_missing(gp, hidden_gpus):
    """docs/ci.md: the GPU job on a runner whose GPU is gone."""
    gp.test_file(PLAIN)
    result = gp.run_subprocess("--gpuperf", "--gpuperf-require=hip", backend="hip")
    assert result.ret == 1
    output = result.stdout.str()
    shown = excerpt(output, "gpuperf: --gpuperf-require") + excerpt(
        output, "gpuperf: ERROR:", "====="
    )
    check_sample("require-missing", _reasons_elided(shown), _reasons_elided)


def test_every_sample_in_the_docs_has_a_scenario_and_every_scenario_a_sample():
    marked = [m["name"] for path in documents() for m in MARKER.finditer(path.read_text())]
    assert sorted(marked) == sorted(set(marked)), "a sample name is used twice"
    assert set(marked) == set(SCENARIOS), set(marked) ^ set(SCENARIOS)


ROOT = Path(__file__).resolve().parents[2]
# Samples merged without a producing scenario yet, listed so the gap stays visible (each
# needs a scenario here): the GPU-lock wait line of writing-perf-tests.md (two processes
# contending for one lock).
PENDING = ("gpuperf: test_perf.py::test_add [vector_add]: waiting ",)
RECORDED = re.compile(
    r"^<!-- recorded: (?P<source>docs/measurements/[\w.-]+) -->\n```\n(?P<body>.*?)^```$",
    re.M | re.S,
)
# (`gpuperf compare ...` and the other commands at a line's start are commands, not output)
OUTPUT_WORDS = re.compile(
    r"^(=+ |gpuperf(:| (?!(compare|history|publish|merge|bisect) ))|!+ |note: )"
    r"|\b(passed|failed|skipped) in\b|regressed|\d+ measurements? in",
    re.M,
)


def test_every_output_block_in_the_docs_is_a_checked_sample():
    """A fenced block that looks like pytest's or the plugin's output must be marked as a
    sample (so a test produces it); commands, code and file trees need no marker."""
    unmarked = []
    for path in documents():
        text = path.read_text()
        samples = {m.start("body") for m in MARKER.finditer(text)}
        # A GPU run's output cannot be re-run here: its marker names the committed
        # measurement it came from, which must exist (in the repository: an sdist ships no
        # docs/measurements).
        for recorded in RECORDED.finditer(text):
            if (ROOT / "docs" / "measurements").is_dir():
                assert (ROOT / recorded["source"]).is_file(), recorded["source"]
            samples.add(recorded.start("body"))
        for block in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S):
            if block.start(2) in samples or block.group(1):
                continue
            if OUTPUT_WORDS.search(block.group(2)) and not block.group(2).startswith(PENDING):
                line = text[: block.start()].count("\n") + 1
                unmarked.append(f"{path.name}:{line}")
    assert not unmarked, f"output samples without a <!-- sample: NAME --> marker: {unmarked}"


def test_accept_flow(gp, tmp_path_factory):
    """docs/ci.md, "Accepting an intended slowdown": a pull request whose commit slows the
    kernel down, without and then with a Gpuperf-Accept trailer, compared with HEAD~1."""
    gp.monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    gp.test_file(PLAIN)
    commit_all(gp)
    gp.write_kernel(0.5)  # streams at 50% instead of the model's 71.85%: a real slowdown
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@example.com"]
    subprocess.run([*git, "commit", "-qam", "slower vadd"], cwd=gp.path, check=True)
    failed = gp.run("--gpuperf", "--gpuperf-compare=HEAD~1", "--gpuperf-budget=1")
    failed.assert_outcomes(failed=1)
    out = failed.stdout.str()
    shown = excerpt(out, "vector_add: A/B regressed") + "  ...\n" + excerpt(out, "  accept:")
    check_sample("accept-failure", shown)

    message = (
        "slower vadd\n\nGpuperf-Accept: test_perf.py::test_add fused epilogue, -5% here, +12% "
        "end to end"
    )
    subprocess.run([*git, "commit", "-q", "--amend", "-m", message], cwd=gp.path, check=True)
    accepted = gp.run("--gpuperf", "--gpuperf-compare=HEAD~1", "--gpuperf-budget=1")
    accepted.assert_outcomes(passed=1)
    out = accepted.stdout.str()
    shown = excerpt(out, "  test_perf.py::test_add", "1 measurement in 1 test")
    check_sample("accept-passed", shown)
