"""The static gate through pytest (--gpuperf-static=gfx942) with the real clang-19: the table
of the shipped kernels, a register-hungry edit failing with occupancy before -> after, a
comment-only edit reported as unchanged, expect_isa, the A/B diff against a git revision,
and what a user meets when clang is missing, a kernel does not compile, the arch is unknown,
or the run is spread over xdist workers."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from pytest_gpuperf.gate.static import compile_static, find_clang, kernel_asm, kernel_names
from pytest_gpuperf.gate.static.store import StaticStore
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from tests.git_repo import git

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/doc_samples.py
from doc_samples import check_sample, excerpt

REPO = Path(__file__).resolve().parents[2]
STATIC = "--gpuperf-static=gfx942"


@functools.cache
def clang_label() -> str:
    """ "clang 19.1.7" here; the CI image's clang-19 may be another build."""
    return find_clang("clang-19", "gfx942").label


# vadd.hip's vector_add made register-hungry: 64 floats live across a loop the compiler
# cannot drop (n >> 30 is unknown to it), and still c = a + b (the sim's model computes it).
HUNGRY = """\
#include "gpuperf.h"
GPUPERF_KERNEL void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc[64];
#pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = a[(i + j * 256) % n];
    for (int it = 0; it < (n >> 30); ++it) {
#pragma unroll
        for (int j = 0; j < 64; ++j) acc[j] = acc[j] * acc[(j + 1) % 64] + 1.0f;
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 64; ++j) s += acc[j];
    c[i] = a[i] + b[i] + s * 0.0f;
}
"""
ADD_TEST = """
def test_add(gpu_bench):
    add(gpu_bench)
"""
# The shipped vector_add.hip kernels (the simulated device computes their outputs).
SHIPPED_TEST = """
N = 1 << 16


def launch(gpu_bench, name, expect_isa=()):
    kernel = gpu_bench.kernel("kernels/vector_add.hip", name, expect_isa=expect_isa)
    a = np.arange(N, dtype=np.float32)
    b = np.ones(N, dtype=np.float32)
    da, db, dc = gpu_bench.to_device(a), gpu_bench.to_device(b), gpu_bench.empty(N)
    gpu_bench(kernel, grid=N // 256, block=256, args=(da, db, dc, N), reads=(a, b), writes=(a,))
    np.testing.assert_allclose(gpu_bench.from_device(dc, np.float32, N), a + b)


def test_bypass(gpu_bench):
    launch(gpu_bench, "vector_add_bypass",
           expect_isa=["global_load_dword ... sc0 sc1", "global_store_dword ... sc0 sc1"])


def test_plain_claims_the_bypass(gpu_bench):
    launch(gpu_bench, "vector_add", expect_isa=["global_load_dword ... sc0 sc1", "s_endpgm"])
"""


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One kernel cache for this module's runs: each build is compiled once."""
    return tmp_path_factory.mktemp("static-cache")


@pytest.fixture
def sgp(gp, kernel_cache, monkeypatch, clang19):
    """`gp` with clang-19 (skipped without it) and the static builds cached across this
    module's inner runs."""
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(kernel_cache))
    return gp


def stored(gp) -> str:
    return (gp.path / "baselines" / "static" / "gfx942.toml").read_text()


# -- the shipped kernels ------------------------------------------------------------------------


def llvm_facts() -> dict[str, dict[str, int]]:
    """LLVM's own kernel-info numbers for every kernel of kernels/ as the gate builds them."""
    found = {}
    for path in sorted(KERNELS_DIR.glob("*.hip")):
        build = compile_static(path, "gfx942")
        for name in kernel_names(build.asm):
            found[name] = kernel_asm(build.asm, name).info
    return found


def test_the_perf_suite_gets_a_table_of_every_kernel_matching_llvm(kernel_cache, tmp_path, clang19):
    """tests/perf itself, from the repository, as the CI job runs it: every kernel's
    resources and occupancy in the table agree with LLVM's own numbers for the same build,
    every stored entry is "code unchanged", and the variants' instructions are asserted."""
    markdown = tmp_path / "static.md"
    env = {**os.environ, "GPUPERF_CACHE_DIR": str(kernel_cache), "GPUPERF_SIM_SEED": "1"}
    env["GPUPERF_LOCK_DIR"] = str(tmp_path / "locks")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("GITHUB_STEP_SUMMARY", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "tests/perf", STATIC, f"--gpuperf-markdown={markdown}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out[-6000:] + done.stderr[-2000:]
    assert (
        f"gpuperf: static gate for gfx942 with {clang_label()}; the SIMULATED device runs the "
        "tests' data flow; nothing is timed" in out
    )
    # The committed facts were recorded with clang 19.1.7; another clang-19 build may allocate
    # differently: then its code is "changed" with the toolchain named, never failed on that.
    stored_facts = StaticStore(REPO / "baselines").load("gfx942").entries.values()
    same_toolchain = all(e.facts.compiler == clang_label() for e in stored_facts)
    rows = {}
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 13 and cells[1].startswith("kernels/"):
            rows[cells[0]] = cells
    llvm = llvm_facts()
    expected = {"vector_add", "vector_add_bypass", "vector_add_nt", "vector_add_vec4", "dot",
                "dot_finish", "rmsnorm", "rope", "silu_and_mul", "copy", "scale", "triad",
                "copy_vec4", "triad_vec4", "gemm_bf16_fp32"}  # fmt: skip
    assert set(rows) == expected, out[-6000:]
    for name, cells in rows.items():
        _, _, block, vgprs, _, sgprs, lds, scratch, spills, occupancy, _, _, verdict = cells
        info = llvm[name]
        assert (int(vgprs), int(sgprs), int(lds), int(scratch)) == (
            info["TotalNumVgprs"], info["NumSgprs"], info["LDSByteSize"], info["ScratchSize"],
        ), name  # fmt: skip
        assert occupancy == f"{info['Occupancy'] / 8:.0%} ({info['Occupancy']} w/SIMD)", name
        assert block == "256" and spills == "0", name
        unchanged = verdict.startswith("code unchanged")
        assert unchanged or (not same_toolchain and verdict.startswith("changed")), verdict
    for variant in ("vector_add_bypass", "vector_add_nt", "vector_add_vec4"):
        assert rows[variant][-1].endswith(", ISA ok")
    text = markdown.read_text()
    if same_toolchain:
        assert "15 kernel entries in 18 tests: 15 unchanged" in out
        assert "**No kernel's gfx942 code changed against the stored facts** (15 checked)." in text
    assert "| `vector_add_bypass` | kernels/vector_add.hip | 256 | 8 |" in text
    if same_toolchain:  # docs/static-gate.md shows this table, some rows elided
        check_sample("static-table", static_table_excerpt(out), _clang_elided)


def static_table_excerpt(out: str) -> str:
    """The static gate's section as docs/static-gate.md shows it: the header, four rows, the
    count."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "gpuperf static gate (gfx942)" in line)
    shown = lines[start : start + 3]
    rows = ("dot ", "rmsnorm ", "vector_add ", "vector_add_bypass ")
    shown += [line for line in lines[start + 3 :] if line.startswith(rows)]
    shown += ["...", next(line for line in lines[start:] if "kernel entries in" in line)]
    return "\n".join(shown) + "\n"


def _clang_elided(text: str) -> str:
    return re.sub(r"clang \d+\.\d+\.\d+ \(\S+\)", "clang X.Y.Z (PATH)", text)


# -- the gate on an edited kernel ---------------------------------------------------------------


def test_a_register_hungry_edit_fails_with_occupancy_before_and_after(sgp):
    sgp.test_file(ADD_TEST)
    saved = sgp.run(STATIC, "--gpuperf-save")
    saved.assert_outcomes(passed=1)
    assert "vgprs = 8\n" in stored(sgp)
    (sgp.path / "vadd.hip").write_text(HUNGRY)
    result = sgp.run(STATIC)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "gpuperf static gate: test_perf.py::test_add" in out
    assert "vector_add (gfx942, 256 threads per block): static check failed" in out
    match = re.search(
        r"occupancy 100% -> (\d+)% \(8 -> (\d) waves per SIMD\), limited by vgprs \(was waves\)"
        r": occupancy dropped",
        out,
    )
    assert match and int(match[2]) < 8, out
    assert re.search(r"VGPRs 8 -> \d+ \(\+\d+%\): VGPR growth beyond the margin", out)
    assert "compared with the stored facts in baselines/static/gfx942.toml" in out
    assert (
        "if this is intended, record the new facts: pytest --gpuperf-static=gfx942 "
        "--gpuperf-save test_perf.py::test_add" in out
    )
    assert re.search(r"vector_add\s+vadd\.hip\s+256\s+\d+ .*FAILED", out)  # the table
    assert "1 kernel entry in 1 test: 1 failed" in out
    check_sample(  # docs/static-gate.md
        "static-failure",
        excerpt(out, "gpuperf static gate: test_perf.py::test_add", "if this is intended"),
    )
    # Recording the edit, as the message says, makes it the new reference.
    sgp.run(STATIC, "--gpuperf-save", "test_perf.py::test_add").assert_outcomes(passed=1)
    again = sgp.run(STATIC)
    again.assert_outcomes(passed=1)
    assert "code unchanged" in again.stdout.str()


def test_a_comment_only_change_reports_code_unchanged(sgp):
    sgp.test_file(ADD_TEST)
    sgp.run(STATIC, "--gpuperf-save").assert_outcomes(passed=1)
    kernel = sgp.path / "vadd.hip"
    kernel.write_text("// a comment that moves every line\n\n" + kernel.read_text())
    result = sgp.run(STATIC)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert re.search(r"vector_add\s+vadd\.hip\s+256\s+8\s.*code unchanged$", out, re.M), out
    assert "1 kernel entry in 1 test: 1 unchanged" in out


def test_a_kernel_that_grows_within_the_rules_passes_and_says_what_changed(sgp):
    sgp.test_file(ADD_TEST)
    sgp.run(STATIC, "--gpuperf-save").assert_outcomes(passed=1)
    kernel = sgp.path / "vadd.hip"
    kernel.write_text(kernel.read_text().replace("a[i] + b[i]", "a[i] * 2.0f + b[i] - a[i]"))
    result = sgp.run(STATIC)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert re.search(r"vector_add .*changed \(within the rules\)", out), out
    assert "vector_add: machine code changed; resources and occupancy are the same" in out


def test_each_launch_shape_is_its_own_entry(sgp):
    sgp.test_file(
        """
        def test_two_blocks(gpu_bench):
            kernel = gpu_bench.kernel("vadd.hip", "vector_add")
            a = np.ones(1024, np.float32)
            da, db, dc = gpu_bench.to_device(a), gpu_bench.to_device(a), gpu_bench.empty(1024)
            gpu_bench.launch(kernel, grid=4, block=256, args=(da, db, dc, 1024))
            gpu_bench.launch(kernel, grid=1, block=1024, args=(da, db, dc, 1024))
        """
    )
    result = sgp.run(STATIC, "--gpuperf-save")
    result.assert_outcomes(passed=1)
    text = stored(sgp)
    assert 'name = "vector_add [block=256]"' in text
    assert 'name = "vector_add [block=1024]"' in text


# -- ISA assertions -----------------------------------------------------------------------------


def test_expect_isa_passes_on_the_bypass_kernel_and_names_what_another_lacks(sgp):
    sgp.test_file(SHIPPED_TEST)
    result = sgp.run(STATIC)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "test_perf.py::test_bypass PASSED" in out or "1 failed, 1 passed" in out
    assert (
        "vector_add (gfx942): not in the kernel's own instructions: "
        "'global_load_dword ... sc0 sc1'." in out
    )
    assert "'s_endpgm'" not in out.split("not in the kernel's own instructions")[1].split("\n")[0]
    shipped = r"pytest-gpuperf:kernels/vector_add\.hip"
    assert re.search(rf"vector_add_bypass\s+{shipped} .*ISA ok", out), out
    assert re.search(rf"vector_add\s+{shipped} .*FAILED \(ISA\)", out), out


def test_expect_isa_is_not_checked_outside_the_static_gate_but_is_validated(sgp):
    sgp.test_file(SHIPPED_TEST)
    sgp.run().assert_outcomes(passed=2)  # smoke mode: nothing compiled for gfx942
    sgp.test_file(
        """
        def test_bad(gpu_bench):
            gpu_bench.kernel("vadd.hip", "vector_add", expect_isa="sc0 sc1")
        """,
        name="test_bad",
    )
    result = sgp.run("test_bad.py")
    result.assert_outcomes(failed=1)
    assert "expect_isa takes a list of instruction patterns" in result.stdout.str()


def test_expect_isa_per_arch_only_applies_to_that_arch(sgp):
    sgp.test_file(
        """
        def test_add(gpu_bench):
            gpu_bench.kernel("vadd.hip", "vector_add",
                             expect_isa={"gfx90a": ["v_pk_fma_f32"], "gfx942": ["s_endpgm"]})
        """
    )
    result = sgp.run(STATIC)
    result.assert_outcomes(passed=1)
    assert "ISA ok" in result.stdout.str()


# -- A/B against a git revision --------------------------------------------------------------


def test_compare_with_a_revision_makes_a_markdown_table_for_the_pull_request(sgp):
    sgp.test_file(
        """
        def test_add(gpu_bench):
            add(gpu_bench)


        def test_bypass(gpu_bench):
            gpu_bench.kernel("kernels/vector_add.hip", "vector_add_bypass")
        """
    )
    git(sgp.path, "init", "-q")
    git(sgp.path, "add", "-A")
    git(sgp.path, "commit", "-qm", "base")
    (sgp.path / "vadd.hip").write_text("// reviewed\n" + (sgp.path / "vadd.hip").read_text())
    summary = sgp.path / "static.md"
    unchanged = sgp.run(STATIC, "--gpuperf-compare=HEAD", f"--gpuperf-markdown={summary}")
    unchanged.assert_outcomes(passed=2)
    assert "gpuperf: kernels compared with their version at HEAD" in unchanged.stdout.str()
    text = summary.read_text()
    assert "<!-- pytest-gpuperf-static -->" in text
    assert (
        "**This pull request does not change the gfx942 code of any kernel** (2 checked)." in text
    )
    (sgp.path / "vadd.hip").write_text(HUNGRY)
    changed = sgp.run(STATIC, "--gpuperf-compare=HEAD", f"--gpuperf-markdown={summary}")
    changed.assert_outcomes(passed=1, failed=1)
    out = changed.stdout.str()
    assert re.search(r"compared with the kernel at HEAD \([0-9a-f]{12}\)", out)
    assert not (sgp.path / "baselines" / "static").exists()  # nothing stored was needed
    text = summary.read_text()
    assert "**2 kernel entries in 2 tests: 1 failed, 1 unchanged.**" in text
    row = next(line for line in text.splitlines() if line.startswith("| `vector_add` |"))
    assert "| vadd.hip | 1 | **FAILED** | 100% → " in row
    assert "(waves → vgprs)" in row and "| 8 → " in row and "occupancy dropped" in row
    assert "| `vector_add_bypass` |" not in text.split("<details>")[0]  # unchanged: not listed
    assert "#### Failures" in text


def test_compare_lists_a_kernel_file_the_base_revision_does_not_have(sgp):
    (sgp.path / "vadd.hip").rename(sgp.path / "vadd.later")
    git(sgp.path, "init", "-q")
    git(sgp.path, "add", "-A")
    git(sgp.path, "commit", "-qm", "before the kernel")
    (sgp.path / "vadd.later").rename(sgp.path / "vadd.hip")
    sgp.test_file(ADD_TEST)
    summary = sgp.path / "static.md"
    result = sgp.run(STATIC, "--gpuperf-compare=HEAD", f"--gpuperf-markdown={summary}")
    result.assert_outcomes(passed=1)
    assert "vector_add: new: vadd.hip does not exist at HEAD" in result.stdout.str()
    row = next(line for line in summary.read_text().splitlines() if "| `vector_add` |" in line)
    assert "new (not at the base)" in row and "vadd.hip does not exist at HEAD" in row
    strict = sgp.run(STATIC, "--gpuperf-compare=HEAD", "--gpuperf-strict")
    strict.assert_outcomes(failed=1)
    assert "--gpuperf-strict fails a kernel without stored facts" in strict.stdout.str()


# -- stored facts ----------------------------------------------------------------------------


def test_a_toolchain_change_is_reported_not_failed_on_the_fingerprint(sgp):
    sgp.test_file(ADD_TEST)
    sgp.run(STATIC, "--gpuperf-save").assert_outcomes(passed=1)
    path = sgp.path / "baselines" / "static" / "gfx942.toml"
    text = re.sub(r'fingerprint = "sha256:\w+"', 'fingerprint = "sha256:0123"', stored(sgp))
    path.write_text(text.replace(f'compiler = "{clang_label()}"', 'compiler = "hiprtc 6.2.41133"'))
    result = sgp.run(STATIC)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "changed (within the rules)" in out
    assert (
        "note: the toolchain changed (hiprtc 6.2.41133, gpuperf HIP header -> "
        f"{clang_label()}, gpuperf HIP header)" in out
    )


def test_a_broken_facts_file_stops_the_run_naming_its_line(sgp):
    sgp.test_file(ADD_TEST)
    sgp.run(STATIC, "--gpuperf-save").assert_outcomes(passed=1)
    path = sgp.path / "baselines" / "static" / "gfx942.toml"
    lines = path.read_text().splitlines()
    number = lines.index("vgprs = 8") + 1
    lines[number - 1] = 'vgprs = "8"'
    path.write_text("\n".join(lines) + "\n")
    result = sgp.run(STATIC)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"baselines/static/gfx942.toml:{number}: entry #1 (test 'test_perf.py::test_add'" in err
    assert "static facts field 'vgprs' must be an integer, not '8'" in err
    lines[number - 1] = "vgprz = 8"
    path.write_text("\n".join(lines) + "\n")
    typo = sgp.run(STATIC).stderr.str()
    assert f"gfx942.toml:{number}: entry #1" in typo and "'vgprz' is not a known key" in typo


def test_saving_keeps_other_entries_and_timing_baselines_never_see_the_file(sgp):
    sgp.test_file(ADD_TEST)
    sgp.test_file(
        """
        def test_other(gpu_bench):
            add(gpu_bench, name="other")
        """,
        name="test_other",
    )
    sgp.run(STATIC, "--gpuperf-save").assert_outcomes(passed=2)
    sgp.run(STATIC, "--gpuperf-save", "test_perf.py").assert_outcomes(passed=1)
    text = stored(sgp)
    assert 'id = "test_perf.py::test_add"' in text and 'id = "test_other.py::test_other"' in text
    timed = sgp.run("--gpuperf", "--gpuperf-save")  # the timing store: baselines/*.toml only
    timed.assert_outcomes(passed=2)
    assert sorted(p.name for p in (sgp.path / "baselines").glob("*.toml")) == ["mi300x-sim.toml"]


# -- what a user meets ------------------------------------------------------------------------


def test_missing_clang_stops_the_run_saying_what_was_tried(gp, monkeypatch):
    """Asked for and unable to act: exit 4 with one clear line, never a skip to green, and
    no report file left behind."""
    sgp = gp  # needs no clang: it hides every one
    sgp.test_file(ADD_TEST)
    empty = sgp.path / "no-tools"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    for extra in ([], ["--gpuperf-require=static"]):
        result = sgp.run(STATIC, "--gpuperf-json=report.json", *extra)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        err = result.stderr.str()
        assert "pytest-gpuperf: --gpuperf-static=gfx942: the static gate cannot run: " in err
        assert "no clang on PATH cannot compile HIP for gfx942" in err
        assert "clang-19: not found" in err and "apt-get install clang-19" in err
        assert "--gpuperf-clang=PATH" in err and "Traceback" not in err
        assert not (sgp.path / "report.json").exists()


def test_a_clang_given_that_does_not_exist_is_named(gp):
    sgp = gp  # needs no clang
    sgp.test_file(ADD_TEST)
    result = sgp.run(STATIC, "--gpuperf-clang=/nowhere/clang-99")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "the clang given (/nowhere/clang-99) cannot compile HIP for gfx942" in (
        result.stderr.str()
    )


def test_the_gate_runs_with_a_clang_that_has_no_rocm(sgp, clang19):
    """clang-19 with an empty sysroot sees no ROCm (tests/compile/test_static_without_rocm.py
    shows it refuses HIP without -nogpuinc): the gate still builds, judges and saves."""
    empty = sgp.path / "empty-sysroot"
    empty.mkdir()
    script = sgp.path / "clang-19-without-rocm"
    unset = "unset ROCM_PATH HIP_PATH HIP_DEVICE_LIB_PATH"
    script.write_text(f'#!/bin/sh\n{unset}\nexec {clang19} --sysroot={empty} "$@"\n')
    script.chmod(0o755)
    sgp.test_file(ADD_TEST)
    saved = sgp.run(STATIC, f"--gpuperf-clang={script}", "--gpuperf-save")
    saved.assert_outcomes(passed=1)
    again = sgp.run(STATIC, f"--gpuperf-clang={script}", "--gpuperf-strict")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(
        [
            f"gfx942: compiled with clang 19.* ({script}), gpuperf HIP header; compared with "
            "baselines/static/gfx942.toml",
            "vector_add  vadd.hip * code unchanged",
        ]
    )


def test_a_compile_error_fails_the_test_with_file_and_line(sgp):
    sgp.test_file(ADD_TEST)
    kernel = sgp.path / "vadd.hip"
    kernel.write_text(kernel.read_text().replace("a[i] + b[i]", "a[i] + b[i] + not_declared"))
    result = sgp.run(STATIC)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "vector_add (vadd.hip): could not be built for gfx942:" in out
    assert re.search(
        r"\S*vadd\.hip:4: clang 19\.[\d.]+ could not compile \S*vadd\.hip for gfx942", out
    )
    assert "use of undeclared identifier 'not_declared'" in out
    assert re.search(r"vector_add\s+vadd\.hip\s+.*ERROR \(not built\)", out)


def test_an_unknown_arch_is_a_usage_error_naming_it_and_how_to_list_them(sgp):
    sgp.test_file(ADD_TEST)
    result = sgp.run("--gpuperf-static=gfx9999")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "does not know the GPU architecture 'gfx9999'" in err
    assert "gfx942" in err and "--print-supported-cpus" in err
    malformed = sgp.run("--gpuperf-static=gfx942,sm 90")
    assert malformed.ret == pytest.ExitCode.USAGE_ERROR
    assert "'sm 90' is not an architecture name" in malformed.stderr.str()


def test_static_and_measuring_exclude_each_other(sgp):
    sgp.test_file(ADD_TEST)
    result = sgp.run(STATIC, "--gpuperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gpuperf and --gpuperf-static exclude each other" in result.stderr.str()
    wrong = sgp.run("--gpuperf-require=static")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR
    assert "add --gpuperf-static=ARCH" in wrong.stderr.str()


def test_the_ini_file_turns_it_on_and_names_the_clang(sgp):
    sgp.test_file(ADD_TEST)
    clang = shutil.which("clang-19")
    sgp.pytester.makeini(f"[pytest]\ngpuperf_static = gfx942\ngpuperf_clang = {clang}\n")
    result = sgp.run()
    result.assert_outcomes(passed=1)
    assert f"gpuperf: static gate for gfx942 with {clang_label()};" in result.stdout.str()


@pytest.mark.slow
def test_xdist_workers_compile_and_save_in_parallel_and_the_controller_renders(sgp):
    for index in range(4):
        sgp.test_file(
            f"""
            def test_add_{index}(gpu_bench):
                add(gpu_bench, name="m{index}")
            """,
            name=f"test_perf_{index}",
        )
    saved = sgp.run_subprocess(STATIC, "--gpuperf-save", "-n", "2")
    saved.assert_outcomes(passed=4)
    text = stored(sgp)
    assert all(f'id = "test_perf_{i}.py::test_add_{i}"' in text for i in range(4))
    checked = sgp.run_subprocess(STATIC, "-n", "2", "--gpuperf-markdown=out.md")
    checked.assert_outcomes(passed=4)
    out = checked.stdout.str()
    assert "gpuperf static gate (gfx942)" in out
    assert re.search(r"vector_add\s+vadd\.hip\s+256\s+8\s.*\s4\s+code unchanged", out), out
    assert "(4 checked)" not in out  # one kernel entry, used by four tests
    assert "**No kernel's gfx942 code changed against the stored facts** (1 checked)." in (
        (sgp.path / "out.md").read_text()
    )


# -- the reports ------------------------------------------------------------------------------


def test_results_go_into_the_json_report_junit_and_markdown(sgp):
    sgp.test_file(ADD_TEST)
    sgp.run(STATIC, "--gpuperf-save").assert_outcomes(passed=1)
    result = sgp.run(
        STATIC, "--gpuperf-json=out.json", "--gpuperf-markdown=out.md", "--junitxml=junit.xml"
    )
    result.assert_outcomes(passed=1)
    document = json.loads((sgp.path / "out.json").read_text())
    assert document["schema_version"] == 4 and document["results"] == []
    static = document["static"]
    assert static["archs"] == ["gfx942"]
    assert static["compilers"]["gfx942"].startswith(clang_label())
    assert static["summary"] == {
        "tests": 1, "kernels": 1, "failed": 0, "statuses": {"unchanged": 1},
    }  # fmt: skip
    (test,) = static["results"]
    (check,) = test["checks"]
    assert test["test_id"] == "test_perf.py::test_add"
    assert (check["name"], check["arch"], check["status"]) == ("vector_add", "gfx942", "unchanged")
    assert check["facts"]["vgprs"] > 0 and check["before"]["fingerprint"]
    assert static["orphans"] == []
    properties = {
        p.get("name"): p.get("value")
        for p in ElementTree.parse(sgp.path / "junit.xml").getroot().iter("property")
    }
    assert properties["gpuperf.static.gfx942.vector_add.status"] == "unchanged"
    assert properties["gpuperf.static.gfx942.vector_add.fails"] == "false"
    assert int(properties["gpuperf.static.gfx942.vector_add.vgprs"]) == check["facts"]["vgprs"]
    assert "gpuperf.static.gfx942.vector_add.occupancy" in properties
    assert "vector_add" in (sgp.path / "out.md").read_text()


def test_static_entries_of_removed_tests_are_listed_as_orphans_and_pruned(sgp):
    test_file = sgp.test_file(ADD_TEST)
    sgp.test_file("def test_other(gpu_bench):\n    add(gpu_bench)\n", name="test_other")
    sgp.run(STATIC, "--gpuperf-save").assert_outcomes(passed=2)
    test_file.write_text(test_file.read_text().replace("def test_add(", "def test_add_renamed("))
    result = sgp.run(STATIC, "--gpuperf-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "gpuperf: 1 static entry no test of this run produced (a renamed or removed test or "
            "kernel?): --gpuperf-prune removes them",
            "gpuperf:   orphan: test_perf.py::test_add [[]vector_add[]] in "
            "baselines/static/gfx942.toml (test not collected)",
        ]
    )
    orphans = json.loads((sgp.path / "out.json").read_text())["static"]["orphans"]
    assert orphans == [
        {"test_id": "test_perf.py::test_add", "name": "vector_add", "arch": "gfx942",
         "path": "baselines/static/gfx942.toml", "why": "test"}
    ]  # fmt: skip
    # a run of another file says nothing about this file's entries
    other = sgp.run(STATIC, "test_other.py")
    assert "orphan:" not in other.stdout.str()
    pruned = sgp.run(STATIC, "--gpuperf-prune")
    pruned.stdout.fnmatch_lines(
        ["gpuperf: pruned 1 orphaned static entry from baselines/static/gfx942.toml"]
    )
    text = stored(sgp)
    assert 'id = "test_perf.py::test_add"' not in text
    assert 'id = "test_other.py::test_other"' in text
