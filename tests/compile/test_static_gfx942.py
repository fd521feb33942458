"""The static gate on real clang-19 gfx942 output: facts that agree with LLVM's own, the
rules on real register growth, unchanged code, ISA checks and the errors a user meets."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_gpuperf.errors import CompileError
from pytest_gpuperf.gate.static import (
    StaticStatus,
    StaticUnavailable,
    UnknownArch,
    check_isa,
    compare_facts,
    compile_static,
    find_clang,
    kernel_asm,
    kernel_facts,
    kernel_names,
    render_failure,
    render_markdown,
)
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.occupancy import cu_limits, occupancy, register_waves_per_simd
from pytest_gpuperf.runtime.signature import parse_signatures
from tests.toolchains import device_libs_dir, need

pytestmark = pytest.mark.compile

KERNEL_FILES = sorted(KERNELS_DIR.glob("*.hip"))
VECTOR_ADD = KERNELS_DIR / "vector_add.hip"

# A kernel whose register use grows with N: N floats live across a loop.
PRESSURE = """#include "gpuperf.h"
GPUPERF_KERNEL void heavy(const float* a, float* c, int n) {
    float acc[N];
#pragma unroll
    for (int j = 0; j < N; ++j) acc[j] = a[threadIdx.x + j * 256];
    for (int it = 0; it < n; ++it) {
#pragma unroll
        for (int j = 0; j < N; ++j) acc[j] = acc[j] * acc[(j + 1) % N] + 1.0f;
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < N; ++j) s += acc[j];
    c[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""

# The HIP device API the gate's own hip_runtime.h provides, used once each.
HIP_API = """#include <hip/hip_runtime.h>
extern "C" __global__ void __launch_bounds__(256, 2)
api(float* f, int* i, unsigned* u, double* d, unsigned long long* q) {
    const unsigned t = threadIdx.x + blockIdx.y * blockDim.z + gridDim.x + threadIdx.z;
    float v = f[t];
    v += __shfl(v, 3) + __shfl_up(v, 1u) + __shfl_down(v, 2u, 32) + __shfl_xor(v, 4);
    int w = __shfl_xor(i[t], 1) + __shfl(u[t], 0) + __popc(u[t]) + __popcll(q[t]);
    w += __clz(i[t]) + __ffs(i[t]) + __clzll(q[t]) + __ffsll(q[t]);
    q[t] = __ballot(v > 0) + (__any(w) ? 1 : 0) + (__all(w) ? 2 : 0) + __lane_id();
    q[t + 1] = clock64() + wall_clock64() + clock();
    atomicAdd(f, v); atomicAdd(i, w); atomicAdd(u, 1u); atomicAdd(d, 1.0); atomicAdd(q, 1ull);
    atomicMax(i, w); atomicMin(u, 3u); atomicExch(f + 1, v);
    atomicCAS(i + 1, 0, w); atomicCAS(u + 1, 0u, 1u);
    __threadfence(); __threadfence_block(); __threadfence_system(); __syncthreads();
    float4 a = make_float4(v, v, v, v); int2 b = make_int2(w, w);
    uchar4 c = make_uchar4(1, 2, 3, 4); double2 e = make_double2(1.0, 2.0);
    dim3 g(2, 3); dim3 h(threadIdx.x, threadIdx.y);
    f[t] = a.x + b.y + c.z + e.x + g.y + h.x + warpSize + __ldg(f + t);
    f[t + 1] = expf(v) + sqrtf(v) + fmaxf(v, 1.0f);
    int3 k = make_int3(1, 2, 3); longlong4 l = make_longlong4(1, 2, 3, 4);
    i[t] = k.z + (int)l.w + min(w, 3) + max(w, 4);
}
"""


@pytest.fixture(scope="module")
def device_libs_90a() -> Path:
    """The ROCm device libraries' folder (Debian's ROCm 5.2 covers gfx90a, not gfx942)."""
    need("rocm", "rocm-device-libs")
    found = device_libs_dir()
    assert found is not None
    if not (found / "oclc_isa_version_90a.bc").exists():
        pytest.fail(f"{found} has no oclc_isa_version_90a.bc: these libraries lack gfx90a")
    return found


@pytest.fixture(scope="module")
def clang(clang19):
    return find_clang(clang19, "gfx942")


@pytest.fixture(autouse=True)
def private_cache(kernel_cache, monkeypatch):
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(kernel_cache))


def llvm_waves(facts, info) -> tuple[int, int]:
    """(ours, LLVM's) waves per SIMD by registers and by LDS at the kernel's largest
    workgroup, as LLVM's "; Occupancy" counts them (tests/compile/test_gfx942_asm.py)."""
    limits = cu_limits(facts.arch)
    registers = register_waves_per_simd(limits, facts.vgprs, facts.sgprs)
    lds = occupancy(limits, block_threads=facts.max_block_threads, vgprs=0,
                    lds_bytes=facts.static_lds_bytes).waves_per_simd  # fmt: skip
    return min(registers, lds), info["Occupancy"]


@pytest.mark.parametrize("path", KERNEL_FILES, ids=[p.name for p in KERNEL_FILES])
def test_shipped_kernels_facts_agree_with_llvm(path, clang, record_property):
    build = compile_static(path, "gfx942", clang=clang)
    assert (build.compiler, build.hip_runtime) == (clang.label, "gpuperf")
    names = kernel_names(build.asm)
    assert set(names) == set(parse_signatures(path.read_text()))
    rows = []
    for name in names:
        facts = kernel_facts(build, name, block_threads=256)
        info = kernel_asm(build.asm, name).info
        assert facts.vgprs == info["TotalNumVgprs"], name
        assert facts.arch_vgprs == info["NumVgprs"] and facts.agprs == info["NumAgprs"], name
        assert facts.sgprs == info["NumSgprs"], name
        assert facts.scratch_bytes == info["ScratchSize"], name
        assert facts.static_lds_bytes == info["LDSByteSize"], name
        ours, llvm = llvm_waves(facts, info)
        assert ours == llvm, (name, ours, llvm)
        assert facts.fingerprint_scope == "kernel"
        # The gate's own HIP header leaves no launch-coordinate calls (__ockl_*); only math
        # functions of the device libraries stay calls under -nogpulib.
        assert all(call.startswith("__ocml_") for call in facts.calls), facts.calls
        rows.append(
            f"{name}: {facts.vgprs} VGPR, {facts.sgprs} SGPR, {facts.lds_bytes} B LDS, "
            f"{facts.waves_per_simd} waves/SIMD ({facts.occupancy_limiter})"
            + (f", calls {', '.join(facts.calls)}" if facts.calls else "")
        )
    record_property("gfx942_static_facts", "; ".join(rows))
    print(f"{path.name} on gfx942 (block 256):\n  " + "\n  ".join(rows))


@pytest.mark.parametrize(
    "path", [*KERNEL_FILES, "hip_api"], ids=[p.name for p in KERNEL_FILES] + ["hip_api"]
)
def test_gate_header_gives_the_registers_of_a_linked_rocm_build(path, clang19, device_libs_90a):
    """gfx90a, the one arch Debian's ROCm 5.2 device libraries cover: our header without
    device libraries and ROCm's headers with them allocate the same VGPRs, for every kernel
    that calls no math function of the device libraries."""
    clang = find_clang(clang19, "gfx90a")
    source, name = (HIP_API, "hip_api.hip") if path == "hip_api" else (path, None)
    ours = compile_static(source, "gfx90a", clang=clang, name=name)
    rocm = compile_static(source, "gfx90a", clang=clang, hip_runtime="rocm", name=name,
                          options=[f"--rocm-device-lib-path={device_libs_90a}"])  # fmt: skip
    for name in kernel_names(ours.asm):
        gate, linked = kernel_facts(ours, name), kernel_facts(rocm, name)
        assert linked.calls == ()
        if not gate.calls:
            assert gate.vgprs == linked.vgprs, name
            assert gate.waves_per_simd == linked.waves_per_simd, name


def test_gate_header_covers_the_hip_device_api_of_portable_kernels(clang):
    build = compile_static(HIP_API, clang=clang, name="hip_api.hip")
    facts = kernel_facts(build, "api", block_threads=1024)
    assert facts.calls == () and facts.max_block_threads == 256  # __launch_bounds__(256, 2)
    assert check_isa(build.asm, "api", ["ds_bpermute_b32", "s_memrealtime", "s_barrier"]) == []


def heavy(clang, n: int):
    build = compile_static(PRESSURE, "gfx942", clang=clang, defines={"N": n}, name="heavy.hip")
    return build, kernel_facts(build, "heavy", block_threads=256)


def test_more_registers_fail_with_occupancy_before_and_after(clang):
    _, before = heavy(clang, 8)
    _, after = heavy(clang, 64)
    result = compare_facts(before, after)
    assert result.status is StaticStatus.FAILED
    assert (before.waves_per_simd, after.waves_per_simd) == (8, 6)
    assert result.limiter_moved == ("waves", "vgprs")
    assert {c.rule for c in result.failures} == {"occupancy-drop", "vgpr-growth"}
    text = render_failure(result)
    assert "occupancy 100% -> 75% (8 -> 6 waves per SIMD), limited by vgprs (was waves)" in text
    print(text)


def test_spills_and_scratch_appear_past_the_register_limit(clang):
    """1024-thread workgroups (HIP's default bound) allow 128 VGPRs: N=128 spills."""
    _, before = heavy(clang, 8)
    build, after = heavy(clang, 128)
    assert after.vgprs == 128 and after.scratch_bytes > 0 and after.vgpr_spills > 0
    assert kernel_asm(build.asm, "heavy").vgpr_spill_stores == after.vgpr_spills
    rules = {c.rule for c in compare_facts(before, after).failures}
    assert {"scratch-appeared", "vgpr-spill-appeared", "occupancy-drop"} <= rules


def test_a_comment_only_change_leaves_every_kernel_unchanged(clang, tmp_path):
    edited = tmp_path / "vector_add.hip"
    text = VECTOR_ADD.read_text().replace("\n", "\n// a comment that moves every line\n", 1)
    edited.write_text(text.replace("int idx =", "// and one inside\n    int idx =", 1))
    before, after = compile_static(VECTOR_ADD, clang=clang), compile_static(edited, clang=clang)
    assert before.asm != after.asm  # the file name and line numbers differ ...
    results = [
        compare_facts(kernel_facts(before, name), kernel_facts(after, name))
        for name in kernel_names(before.asm)
    ]
    assert [r.status for r in results] == [StaticStatus.UNCHANGED] * 4  # ... the code does not
    assert "does not change the gfx942 code of any kernel (4 checked)" in render_markdown(results)


def test_isa_expectations_are_checked_in_each_kernels_own_code(clang):
    build = compile_static(VECTOR_ADD, clang=clang)
    bypass = ["global_load_dword ... sc0 sc1", "global_store_dword ... sc0 sc1"]
    assert check_isa(build.asm, "vector_add_bypass", bypass) == []
    assert check_isa(build.asm, "vector_add", bypass) == bypass
    assert check_isa(build.asm, "vector_add_nt", ["global_load_dword ... nt"]) == []
    wide = ["global_load_dwordx4", "global_store_dwordx4"]
    assert check_isa(build.asm, "vector_add_vec4", wide) == []
    assert check_isa(build.asm, "vector_add", wide) == wide


def test_a_compile_error_names_the_file_and_line(clang, tmp_path):
    broken = tmp_path / "broken.hip"
    broken.write_text(
        '#include "gpuperf.h"\n\nGPUPERF_KERNEL void k(float* x) {\n  x[0] = 1.0f\n}\n'
    )
    with pytest.raises(CompileError) as failure:
        compile_static(broken, clang=clang)
    error = failure.value
    assert (error.source_path, error.line) == (str(broken), 4)
    assert str(error).startswith(f"{broken}:4: clang {clang.version} could not compile")
    assert "error: expected ';' after expression" in error.log
    with pytest.raises(CompileError) as failure:
        compile_static(broken.read_text(), clang=clang, name="kernels/broken.hip")
    assert (failure.value.source_path, failure.value.line) == ("kernels/broken.hip", 4)
    assert "kernels/broken.hip:4:14: error" in failure.value.log


def test_an_unknown_arch_is_named_with_the_known_ones(clang19):
    with pytest.raises(UnknownArch) as failure:
        compile_static(VECTOR_ADD, "gfx9999", clang=clang19)
    message = str(failure.value)
    assert "does not know the GPU architecture 'gfx9999'" in message
    assert "gfx942" in failure.value.known and "--print-supported-cpus" in message


def test_a_missing_clang_says_how_to_install_or_name_one():
    with pytest.raises(StaticUnavailable) as failure:
        compile_static(VECTOR_ADD, clang="/nonexistent/clang-19")
    assert "apt-get install clang-19" in str(failure.value)
    assert "--gpuperf-clang=PATH" in str(failure.value)


def test_defines_options_and_local_headers_reach_clang_and_the_cache_key(clang, tmp_path):
    source = tmp_path / "k.hip"
    source.write_text(
        '#include "gpuperf.h"\n#include "local.h"\n'
        "#if GPUPERF_TEST_VALUE != 7\n#error wrong value\n#endif\n"
        "GPUPERF_KERNEL void k(float* x) { x[threadIdx.x] = LOCAL_VALUE; }\n"
    )
    (tmp_path / "local.h").write_text("#define LOCAL_VALUE 1.0f\n")
    first = compile_static(
        source, clang=clang, defines={"GPUPERF_TEST_VALUE": 7}, options=["-ffast-math"]
    )
    again = compile_static(
        source, clang=clang, defines={"GPUPERF_TEST_VALUE": 7}, options=["-ffast-math"]
    )
    assert not first.from_cache and again.from_cache and again.code_object == first.code_object
    (tmp_path / "local.h").write_text("#define LOCAL_VALUE 2.0f\n")
    edited = compile_static(
        source, clang=clang, defines={"GPUPERF_TEST_VALUE": 7}, options=["-ffast-math"]
    )
    assert not edited.from_cache
    assert kernel_facts(edited, "k").fingerprint != kernel_facts(first, "k").fingerprint
    with pytest.raises(CompileError, match="wrong value"):
        compile_static(source, clang=clang, defines={"GPUPERF_TEST_VALUE": 6})


def test_launch_bounds_and_dynamic_lds_shape_the_occupancy(clang):
    source = (
        '#include "gpuperf.h"\n'
        'extern "C" __global__ void __launch_bounds__(256) k(float* x) {\n'
        "    HIP_DYNAMIC_SHARED(float, tile)\n"
        "    tile[threadIdx.x] = x[threadIdx.x]; __syncthreads();\n"
        "    x[threadIdx.x] = tile[255 - threadIdx.x];\n}\n"
    )
    build = compile_static(source, clang=clang, name="bounds.hip")
    facts = kernel_facts(build, "k", block_threads=1024, dynamic_lds_bytes=16384)
    assert facts.max_block_threads == 256 and facts.block_threads == 256
    assert (facts.occupancy_limiter, facts.waves_per_simd) == ("lds", 4)
    smaller = kernel_facts(build, "k", block_threads=256, dynamic_lds_bytes=8192)
    result = compare_facts(smaller, facts)
    assert result.failed and result.limiter_moved == ("waves", "lds")
    assert dataclasses.replace(facts, dynamic_lds_bytes=8192).lds_bytes == 8192


def test_rocm_mode_without_device_libraries_says_how(clang, tmp_path):
    with pytest.raises(
        StaticUnavailable,
        match=r"\(Debian/Ubuntu: apt-get install libamdhip64-dev rocm-device-libs\).*"
        "hip_runtime='gpuperf', which needs only clang",
    ):
        compile_static(VECTOR_ADD, clang=clang, hip_runtime="rocm",
                       options=[f"--rocm-path={tmp_path}"])  # fmt: skip


def test_a_compiler_that_runs_too_long_is_stopped(clang, tmp_path):
    with pytest.raises(CompileError, match=r"did not finish compiling for gfx942 within 0 s"):
        compile_static(PRESSURE, clang=clang, defines={"N": 4}, name="slow.hip", timeout_s=0.001,
                       use_cache=False)  # fmt: skip
