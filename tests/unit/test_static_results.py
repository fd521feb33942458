"""The static gate's per-test decisions (gate/static/gate.py), their trip through plain data, the
renderers that read them (gate/static/report.py), and the session's pure helpers (entry names,
expect_isa, launch shapes)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_gpuperf.engine.plain import from_plain, to_plain
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.static import StaticFacts, with_occupancy
from pytest_gpuperf.gate.static.gate import (
    AGAINST_REF,
    CHANGED,
    FAILED,
    NEW,
    UNCHANGED,
    StaticTestResult,
    error_check,
    judge_kernel,
    judge_test,
)
from pytest_gpuperf.gate.static.report import (
    failure_message,
    kernel_rows,
    markdown_section,
    terminal_lines,
)
from pytest_gpuperf.gate.static.run import (
    KernelUse,
    LaunchLog,
    entry_names,
    expect_isa_spec,
    expectations_for,
)

BASE = with_occupancy(
    StaticFacts(
        kernel="k",
        arch="gfx942",
        compiler="clang 19.1.7",
        hip_runtime="gpuperf",
        block_threads=256,
        dynamic_lds_bytes=0,
        vgprs=8,
        arch_vgprs=8,
        agprs=0,
        sgprs=14,
        static_lds_bytes=0,
        scratch_bytes=0,
        vgpr_spills=0,
        sgpr_spills=0,
        max_block_threads=1024,
        fingerprint="sha256:aa",
        fingerprint_scope="kernel",
    )
)


def facts(**changes) -> StaticFacts:
    if changes and "fingerprint" not in changes:
        changes["fingerprint"] = f"sha256:{sorted(changes.items())}"
    return with_occupancy(dataclasses.replace(BASE, **changes))


def judge(after, before=BASE, **options):
    options.setdefault("source", "kernels/k.hip")
    options.setdefault("against_label", "baselines/static/gfx942.toml")
    return judge_kernel("k", after, before, **options)


# -- deciding --------------------------------------------------------------------------------


def test_same_code_is_unchanged_and_passes():
    check = judge(BASE)
    assert (check.status, check.fails, check.changes) == (UNCHANGED, False, ())


def test_an_occupancy_drop_fails_unless_the_run_saves():
    hungry = facts(vgprs=72, arch_vgprs=72)
    check = judge(hungry)
    assert check.status == FAILED and check.fails and check.rules_failed
    saving = judge(hungry, saving=True)
    assert saving.status == FAILED and not saving.fails and saving.accepted


def test_missing_instructions_fail_even_when_saving():
    check = judge(BASE, expect_isa=["sc0 sc1"], missing_isa=["sc0 sc1"], saving=True)
    assert check.status == UNCHANGED and check.fails and check.missing_isa == ("sc0 sc1",)


def test_nothing_to_compare_with_passes_unless_strict():
    assert not judge(BASE, None).fails
    strict = judge(BASE, None, strict=True, no_base="no stored facts")
    assert strict.status == NEW and strict.fails and strict.strict_no_base
    assert not judge(BASE, None, strict=True, saving=True).fails  # a save records it


def test_another_toolchain_is_reported_not_failed_on_the_fingerprint():
    other = dataclasses.replace(BASE, compiler="hiprtc 6.2.41133", fingerprint="sha256:bb")
    check = judge(BASE, other)
    assert check.status == CHANGED and not check.fails and check.toolchain_changed


def test_a_test_saves_only_when_none_of_its_kernels_fails():
    good, bad = judge(BASE, None), judge(facts(vgprs=72, arch_vgprs=72))
    assert all(c.saved for c in judge_test("t", [good], saving=True).checks)
    assert not any(c.saved for c in judge_test("t", [good, bad], saving=True).checks)
    assert not any(c.saved for c in judge_test("t", [good]).checks)
    errored = judge_test("t", [error_check("k", "k", "gfx942", "k.hip", "boom")], saving=True)
    assert errored.failed and not errored.checks[0].saved


def test_results_travel_as_plain_data_and_come_back_equal():
    result = judge_test(
        "t.py::test",
        [
            judge(facts(vgprs=72, arch_vgprs=72)),
            judge(BASE, None, against=AGAINST_REF, no_base="k.hip does not exist at HEAD"),
            error_check("e", "e", "gfx942", "e.hip", "e.hip:3: boom"),
        ],
        update_command="pytest --gpuperf-static=gfx942 --gpuperf-save t.py::test",
    )
    back = from_plain(StaticTestResult, to_plain(result))
    assert back == result
    assert back.checks[0].comparison is not None and back.checks[0].comparison.failed


# -- rendering ------------------------------------------------------------------------------


def test_a_failing_test_says_before_after_the_limiter_and_how_to_accept():
    result = judge_test(
        "t.py::test",
        [judge(facts(vgprs=72, arch_vgprs=72)), judge(BASE, missing_isa=["sc0 sc1"])],
        update_command="pytest --gpuperf-static=gfx942 --gpuperf-save t.py::test",
    )
    text = failure_message(result)
    assert text.startswith("gpuperf static gate: t.py::test")
    assert "occupancy 100% -> 88% (8 -> 7 waves per SIMD), limited by vgprs (was waves)" in text
    assert "compared with the stored facts in baselines/static/gfx942.toml" in text
    assert "k (gfx942): not in the kernel's own instructions: 'sc0 sc1'" in text
    assert text.endswith(
        "if this is intended, record the new facts: "
        "pytest --gpuperf-static=gfx942 --gpuperf-save t.py::test"
    )


def test_the_tables_show_a_kernel_once_with_its_tests_and_worst_outcome():
    same = judge(BASE)
    results = [
        judge_test("a", [same]),
        judge_test("b", [same]),
        judge_test("c", [judge(facts(vgprs=72, arch_vgprs=72))]),
    ]
    rows = kernel_rows(results, "gfx942")
    assert [(row.tests, row.outcome) for row in rows] == [(("a", "b"), UNCHANGED), (("c",), FAILED)]
    lines = terminal_lines(results, ["gfx942"], {"gfx942": "clang 19.1.7"})
    assert (
        lines[0] == "gfx942: compiled with clang 19.1.7; compared with baselines/static/gfx942.toml"
    )
    assert lines[1].split() == [
        "kernel", "source", "block", "VGPRs", "AGPRs", "SGPRs", "LDS", "B", "scratch", "B",
        "spills", "occupancy", "limiter", "tests", "static", "check",
    ]  # fmt: skip
    assert lines[2].split()[-3:] == ["2", "code", "unchanged"]
    assert "88% (7 w/SIMD)" in lines[3] and lines[3].endswith("FAILED")
    assert lines[-1] == "  2 kernel entries in 3 tests: 1 failed, 1 unchanged"


def test_markdown_says_in_one_sentence_when_a_pull_request_changes_no_kernel():
    same = judge(BASE, against=AGAINST_REF, against_label="origin/main (0123456789ab)")
    text = markdown_section([judge_test("a", [same])], ["gfx942"], {"gfx942": "clang 19.1.7"})
    assert text.startswith(
        "<!-- pytest-gpuperf-static -->\n### pytest-gpuperf static gate (gfx942)"
    )
    assert "Compared with origin/main (0123456789ab)." in text
    assert (
        "**This pull request does not change the gfx942 code of any kernel** (1 checked)." in text
    )
    assert "| `k` | kernels/k.hip |" not in text.split("<details>")[0]


def test_markdown_lists_what_changed_failures_first():
    grew = judge(facts(sgprs=20), against=AGAINST_REF, against_label="HEAD")
    dropped = judge(facts(vgprs=72, arch_vgprs=72), against=AGAINST_REF, against_label="HEAD")
    new = judge(BASE, None, against=AGAINST_REF, no_base="k.hip does not exist at HEAD")
    results = [judge_test("a", [grew]), judge_test("b", [dropped]), judge_test("c", [new])]
    text = markdown_section(results, ["gfx942"], {"gfx942": "clang 19.1.7"})
    assert "**3 kernel entries in 3 tests: 1 failed, 1 changed, 1 new.**" in text
    table = [line for line in text.splitlines() if line.startswith("| `k` |")]
    assert "**FAILED**" in table[0] and "100% → 88% (waves → vgprs)" in table[0]
    assert "| 8 → 72 |" in table[0] and "occupancy dropped" in table[0]
    assert "changed (within the rules)" in table[1] and "| 14 → 20 |" in table[1]
    assert "new (not at the base)" in table[2] and "k.hip does not exist at HEAD" in table[2]
    assert "#### Failures" in text and "- `b`:" in text


# -- the session's helpers -------------------------------------------------------------------


def test_expect_isa_takes_a_list_or_a_mapping_per_arch():
    assert expect_isa_spec(None, "t") == {} and expect_isa_spec([], "t") == {}
    spec = expect_isa_spec(["s_endpgm"], "t")
    assert expectations_for(spec, "gfx90a") == ("s_endpgm",)
    per_arch = expect_isa_spec(
        {"gfx942": ["sc0 sc1"], "gfx90a": ("global_load_dword ... glc",)}, "t"
    )
    assert expectations_for(per_arch, "gfx942") == ("sc0 sc1",)
    for bad in ("sc0 sc1", [""], [3], 7):
        with pytest.raises(ConfigError, match="expect_isa"):
            expect_isa_spec(bad, "t.py::test: gpu_bench.kernel('k')")


def use(kernel="k", source="k.hip", defines=(), shapes=((256, 0),)) -> KernelUse:
    return KernelUse(kernel, Path(source), (), tuple(defines), tuple(shapes))


def test_entry_names_add_only_what_tells_two_uses_of_a_kernel_apart():
    assert [n for *_, n in entry_names([use(), use("other")])] == ["k", "other"]
    two_shapes = entry_names([use(shapes=((256, 0), (128, 1024)))])
    assert [n for *_, n in two_shapes] == ["k [block=256]", "k [block=128 lds=1024]"]
    two_builds = entry_names([use(defines=(("N", "4"),)), use(defines=(("N", "8"),))])
    assert [n for *_, n in two_builds] == ["k [N=4]", "k [N=8]"]
    two_files = entry_names([use(source="a/k.hip"), use(source="b/k2.hip")])
    assert [n for *_, n in two_files] == ["k [k.hip]", "k [k2.hip]"]
    assert entry_names([use(shapes=())])[0][1:] == (None, "k")  # loaded, never launched


def test_the_launch_log_sees_every_launch_of_the_backend():
    calls = []
    backend = SimpleNamespace(launch=lambda *args, **kwargs: calls.append((args, kwargs)))
    log = LaunchLog()
    log.attach(backend)
    log.attach(backend)  # once per backend
    kernel = object()
    backend.launch(kernel, 4, (16, 16), (), shared_bytes=512)
    backend.launch(kernel, 4, 256, ())
    backend.launch(kernel, 8, 256, ())
    assert len(calls) == 3
    assert log.shapes(kernel) == ((256, 512), (256, 0))
    log.clear()
    assert log.shapes(kernel) == ()
