"""A stored-baseline failure is explained against the code the baseline measured: the
explain pass's child builds the kernel at the commit of the baseline's latest save
(plugin/explain_pass.py's saved_commit), when this clone can resolve it."""

from __future__ import annotations

import subprocess

from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.plugin.explain_pass import saved_commit
from pytest_gpuperf.record.checks import BaselineCheck
from tests import records
from tests.git_repo import commit_all


def _ref(commit: str) -> BaselineRef:
    return BaselineRef(
        efficiency=0.9, efficiency_ci=(0.89, 0.91), run_spread=0.01, bandwidth_bps=4.3e12,
        time_s=1e-4, cache="cold", source="measured", provenance="saved", path="b.toml",
        commit=commit,
    )  # fmt: skip


def _judged(outcome: str, commit: str) -> tuple:
    check = BaselineCheck(outcome=outcome, baseline=_ref(commit), delta=-0.06, allowance=0.01)
    return (records.measurement(0.84, time_s=1e-4), decide(baseline=check))


def _repo(tmp_path):
    (tmp_path / "add.hip").write_text("// base\n")
    commit_all(tmp_path, "base")
    saved = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.strip()
    (tmp_path / "add.hip").write_text("// head reads more\n")
    commit_all(tmp_path, "head")
    return saved


def test_a_stored_regression_is_profiled_against_its_baselines_saved_commit(tmp_path):
    saved = _repo(tmp_path)
    verdicts = (_judged("within-noise", "deadbeef"), _judged("regressed", saved[:12]))
    assert saved_commit(verdicts, tmp_path) == saved  # the failing one's, resolved in full


def test_a_commit_this_clone_lacks_leaves_head_alone(tmp_path):
    _repo(tmp_path)
    assert saved_commit((_judged("regressed", "0" * 40),), tmp_path) == ""
    assert saved_commit((_judged("regressed", ""),), tmp_path) == ""  # a reported entry


def test_nothing_failed_against_a_baseline_no_base(tmp_path):
    saved = _repo(tmp_path)
    assert saved_commit((_judged("within-noise", saved),), tmp_path) == ""
    assert saved_commit((), tmp_path) == ""
