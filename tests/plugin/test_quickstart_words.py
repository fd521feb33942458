"""What the quickstart's commands say where a new user meets them (issue 45 item 14): a save
from a tree whose kernel is not committed says what it records; `--gpuperf-require`'s help,
docs and behaviour agree on `static`; `--gpuperf-check-bytes` alone on the simulated device
says what was not checked, once.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.git_repo import commit_all, git

ONE_TEST = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


def _notes(result) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("gpuperf: NOTE: saved")]


def test_a_save_of_uncommitted_kernels_says_what_it_records(gp):
    gp.test_file(ONE_TEST)
    (gp.path / "vadd.hip").rename(gp.path / "kept.hip")
    first = commit_all(gp.path, "the project, before its kernel")
    (gp.path / "kept.hip").rename(gp.path / "vadd.hip")  # a new, untracked kernel
    result = gp.run("--gpuperf", "--gpuperf-save")
    result.assert_outcomes(passed=1)
    (note,) = _notes(result)
    assert note == (
        f"gpuperf: NOTE: saved at {first[:12]} + uncommitted changes to vadd.hip: the base code "
        f"a later failure is explained against is {first[:12]}'s; commit them and re-save"
    )
    commit_all(gp.path, "the kernel")
    clean = gp.run("--gpuperf", "--gpuperf-save")
    clean.assert_outcomes(passed=1)
    assert _notes(clean) == []  # committed: the save records the code it measured


def test_a_save_of_a_modified_kernel_names_its_path_whole(gp):
    """A committed kernel edited since (git's status line " M vadd.hip" begins with a blank):
    the note said "uncommitted changes to add.hip", its first letter cut."""
    gp.test_file(ONE_TEST)
    first = commit_all(gp.path, "the project")
    gp.write_kernel(0.5)  # edited, not committed
    result = gp.run("--gpuperf", "--gpuperf-save")
    result.assert_outcomes(passed=1)
    (note,) = _notes(result)
    assert f"saved at {first[:12]} + uncommitted changes to vadd.hip:" in note, note


def test_a_save_before_the_first_commit_says_it_records_none(gp):
    gp.test_file(ONE_TEST)
    git(gp.path, "init", "-q")
    result = gp.run("--gpuperf", "--gpuperf-save")
    result.assert_outcomes(passed=1)
    (note,) = _notes(result)
    assert "saved before the repository's first commit" in note and "vadd.hip" in note


def test_outside_a_repository_a_save_says_nothing_more(gp):
    gp.test_file(ONE_TEST)
    result = gp.run("--gpuperf", "--gpuperf-save")
    result.assert_outcomes(passed=1)
    assert _notes(result) == []


def test_require_static_agrees_in_help_docs_and_behaviour(gp):
    helped = subprocess.run(
        [sys.executable, "-m", "pytest", *gp.plugin_args, "--help"],
        capture_output=True, text=True, cwd=gp.path,
    )  # fmt: skip
    text = " ".join(helped.stdout.split())
    text = re.sub(r"-\s+", "-", text)  # older pytest wraps help lines at a hyphen
    wanted = r"--gpuperf-require=KIND\s+gpu, hip or cuda: .*static: only with --gpuperf-static"
    assert re.search(wanted + r" \(alone: exit 4\)", text)
    gp.test_file(ONE_TEST)
    alone = gp.run("--gpuperf", "--gpuperf-require=static")
    assert alone.ret == 4
    assert "add --gpuperf-static=ARCH" in alone.stderr.str() + alone.stdout.str()


def test_check_bytes_alone_on_the_simulated_device_says_what_was_not_checked_once(gp):
    gp.test_file(ONE_TEST + "\n\ndef test_other(gpu_bench):\n    add(gpu_bench)\n")
    result = gp.run("--gpuperf", "--gpuperf-check-bytes")
    result.assert_outcomes(passed=2)
    text = result.stdout.str()
    assert text.count("declared bytes not checked: the simulated device has no counters") == 1
    assert "not explained" not in text
