"""A stored-baseline failure is explained against the code the baseline measured: the
explain pass's child builds the kernel at the commit of the baseline's latest save
(plugin/explain_pass.py's saved_commit), when this clone can resolve it, and the lines say
which base they compare with (explain/counters/measured.py)."""

from __future__ import annotations

import subprocess

from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.explain.counters.measured import explanation
from pytest_gpuperf.explain.counters.profile import PlannedLaunch, Profiled
from pytest_gpuperf.explain.counters.traffic import Traffic
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.plugin.explain_pass import saved_commit
from pytest_gpuperf.record.checks import BaselineCheck
from pytest_gpuperf.session.profile_child import BASE, CALLABLE, HEAD
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


def _profiled(*, with_base: bool) -> Profiled:
    planned = [
        PlannedLaunch(0, "gather4", side, "gather4", "cold", 335_500_000)
        for side in ((HEAD, BASE) if with_base else (HEAD,))
    ]
    read = {HEAD: 276.5e6, BASE: 268.4e6}
    launches = tuple(
        (p, Traffic("gather4", dram_read_bytes=read[p.side], dram_write_bytes=61.3e6))
        for p in planned
    )
    return Profiled("ncu", "all", 7.5, launches)


def test_the_explanation_says_the_base_is_the_stored_baselines_commit():
    commit = "ac685a07e6e4" + "0" * 28
    explained = explanation(
        _profiled(with_base=True), 0, check_bytes=False, l2_bytes=50 << 20, stored_commit=commit
    )
    traffic = explained["traffic"]
    assert traffic["against"] == "the stored baseline's commit ac685a07e6e4"
    assert (
        traffic["lines"][0] == "base: the kernel built at the stored baseline's commit ac685a07e6e4"
    )
    assert (
        traffic["lines"][1].startswith("head moved ")
        and "read +3.0% (268.4 -> 276.5 MB)" in (traffic["lines"][1])
    )


def test_a_callables_base_is_the_callable_loaded_at_the_saved_commit():
    """A stored failure of a gpu_bench.run: the child profiled base's callable (its test's
    Python at the saved commit) beside head's, each side the launches up to its marker."""
    launches = tuple(
        (PlannedLaunch(0, "op", side, CALLABLE, "cold", 335_500_000),
         Traffic("copy_kernel", dram_read_bytes=read, dram_write_bytes=61.3e6))
        for side, read in ((HEAD, 276.5e6), (BASE, 268.4e6))
    )  # fmt: skip
    commit = "ac685a07e6e4" + "0" * 28
    explained = explanation(
        Profiled("ncu", "all", 7.5, launches), 0, check_bytes=False, l2_bytes=50 << 20,
        stored_commit=commit,
    )  # fmt: skip
    lines = explained["traffic"]["lines"]
    assert lines[0] == "base: the callable loaded at the stored baseline's commit ac685a07e6e4"
    assert "read +3.0% (268.4 -> 276.5 MB)" in lines[1]


def test_without_a_base_profiled_no_base_is_claimed():
    """The child could not build the saved commit's kernel: head's counters alone, and no
    line naming a base that was not profiled."""
    explained = explanation(
        _profiled(with_base=False), 0, check_bytes=False, l2_bytes=50 << 20, stored_commit="ab" * 20
    )
    assert "against" not in explained["traffic"]
    assert not any(line.startswith("base:") for line in explained["traffic"]["lines"])


def test_a_callable_launching_a_kernel_more_often_says_so_first():
    """What a callable launched is known from the profile alone (a Triton or torch launch
    bypasses the plugin): head's launches against base's lead the explanation."""
    sides = ((HEAD, "add_kernel + add_kernel", 2 * 134.2e6), (BASE, "add_kernel", 134.2e6))
    launches = tuple(
        (PlannedLaunch(0, "op", side, CALLABLE, "cold", 201_300_000),
         Traffic(kernel, dram_read_bytes=read, dram_write_bytes=67.1e6))
        for side, kernel, read in sides
    )  # fmt: skip
    profiled = Profiled("ncu", "all", 7.5, launches)
    lines = explanation(profiled, 0, check_bytes=False, l2_bytes=50 << 20)["traffic"]["lines"]
    assert lines[0] == "launches per call: add_kernel 1 -> 2"
    assert lines[1].startswith("head moved +")
    same = tuple((p, Traffic("add_kernel", 134.2e6, 67.1e6)) for p, _ in launches)
    lines = explanation(Profiled("ncu", "all", 7.5, same), 0, check_bytes=False, l2_bytes=0)
    assert not any("launches per call" in line for line in lines["traffic"]["lines"])


def test_a_demangled_kernel_name_loses_its_return_type_and_parameters():
    torch_add = (
        "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, "
        "std::array<char *, 3>>(int, T2, T3)"
    )
    sides = ((HEAD, f"{torch_add} + {torch_add}"), (BASE, torch_add))
    launches = tuple(
        (PlannedLaunch(0, "op", side, CALLABLE, "cold", 1), Traffic(kernel, 1e6, 1e6))
        for side, kernel in sides
    )
    lines = explanation(Profiled("ncu", "all", 1.0, launches), 0, check_bytes=False, l2_bytes=0)
    assert lines["traffic"]["lines"][0] == (
        "launches per call: at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, "
        "std::array<char *, 3>> 1 -> 2"
    )


def test_a_callables_l2_bytes_move_with_its_buffers_and_are_not_a_change():
    """Each side of a callable runs on its own test body's buffers: the same Triton add read
    313.9 -> 308.2 MB of L2 on an H200 (-1.8%) with the same DRAM bytes. Not named; a
    kernel's sides share their buffers, and the same move is a change there."""
    sides = ((HEAD, 308.2e6), (BASE, 313.9e6))

    def lines(kernel: str) -> list[str]:
        launches = tuple(
            (PlannedLaunch(0, "op", side, kernel, "cold", 1),
             Traffic("add_kernel", 134.2e6, 45.0e6, l2_bytes=l2))
            for side, l2 in sides
        )  # fmt: skip
        profiled = Profiled("ncu", "all", 1.0, launches)
        return explanation(profiled, 0, check_bytes=False, l2_bytes=60 << 20)["traffic"]["lines"]

    assert not any("L2" in line for line in lines(CALLABLE))
    assert lines(CALLABLE)[0].endswith("no counter moved: the time changed without the traffic")
    assert lines("add_kernel")[0] == "L2 bytes -1.8% (313.9 -> 308.2 MB) with the same DRAM bytes"
