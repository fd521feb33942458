"""The explain pass's child mode (nothing timed, nothing gated) is entered only by a child the
plugin started: an inherited GPUPERF_PROFILE_PLAN, without the parent's proof, is ignored with
one warning, and the run measures, gates and saves as usual (session/profile_plan.py)."""

from __future__ import annotations

import os

import pytest

from pytest_gpuperf.session import profile_plan
from pytest_gpuperf.session.profile_plan import KEY_ENV, PLAN_ENV, child_plan, make_plan

TWO_TESTS = """
def test_add(gpu_bench):
    add(gpu_bench)

@pytest.mark.min_bw(0.99)
def test_too_slow(gpu_bench):
    add(gpu_bench)
"""


@pytest.mark.parametrize("with_key", [False, True])
def test_an_inherited_plan_variable_leaves_the_gate_on(gp, monkeypatch, tmp_path, with_key):
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    link = tmp_path / "plan"
    link.symlink_to(target)
    monkeypatch.setenv(PLAN_ENV, str(link))
    if with_key:  # a key without the parent's private folder proves nothing either
        monkeypatch.setenv(KEY_ENV, "0" * 32)
    gp.test_file(TWO_TESTS)
    result = gp.run("--gpuperf-save", "--gpuperf-strict")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == 1
    output = result.stdout.str()
    assert "smoke mode" not in output
    assert output.count(f"{PLAN_ENV} is set") == 1
    result.stdout.fnmatch_lines(["*GpuPerfWarning: GPUPERF_PROFILE_PLAN is set * ignored*"])
    assert (gp.path / "baselines" / "mi300x-sim.toml").is_file()  # the save happened
    assert target.read_text() == "precious\n"  # nothing appended through the link


def test_the_parents_plan_is_proven_and_anything_less_is_not(tmp_path, monkeypatch):
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    plan, proof = make_plan(folder)
    assert set(proof) == {PLAN_ENV, KEY_ENV} and proof[PLAN_ENV] == str(plan)
    for name, value in proof.items():
        monkeypatch.setenv(name, value)
    assert child_plan() == plan
    assert profile_plan.inherited_plan_line() == ""

    monkeypatch.setenv(KEY_ENV, "f" * 32)  # the wrong key
    assert child_plan() is None
    assert "ignored" in profile_plan.inherited_plan_line()
    monkeypatch.delenv(KEY_ENV)  # no key
    assert child_plan() is None
    monkeypatch.setenv(KEY_ENV, proof[KEY_ENV])

    os.chmod(folder, 0o755)  # a folder others may enter: anyone could have put it there
    assert child_plan() is None
    os.chmod(folder, 0o700)
    assert child_plan() == plan

    plan.unlink()  # the plan a link to another file
    victim = tmp_path / "victim"
    victim.write_text("")
    plan.symlink_to(victim)
    assert child_plan() is None


def test_the_parent_never_follows_a_link_it_finds(tmp_path):
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (folder / "plan.jsonl").symlink_to(victim)
    with pytest.raises(FileExistsError):
        make_plan(folder)
    assert victim.read_text() == "precious"


def test_an_unset_variable_says_nothing(monkeypatch):
    monkeypatch.delenv(PLAN_ENV, raising=False)
    assert child_plan() is None
    assert profile_plan.inherited_plan_line() == ""
