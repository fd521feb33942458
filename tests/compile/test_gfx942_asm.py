"""clang-19's gfx942 code for kernels/: the cache-control bits the L2 bypass and the
nontemporal accesses rely on, and each kernel's registers and occupancy - ours checked against
LLVM's own "; Occupancy:".

Assembly is parsed per kernel function (from its label to its `.Lfunc_end`), never as a
whole file, so one kernel's `sc0 sc1` cannot make another pass.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from pytest_gpuperf.gate.static.build import hip_flags
from pytest_gpuperf.runtime.amd_codeobject import read_code_object
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.occupancy import (
    cu_limits,
    kernel_resources,
    occupancy,
    register_waves_per_simd,
)

pytestmark = pytest.mark.compile

KERNEL_FILES = sorted(KERNELS_DIR.glob("*.hip"))
VECTOR_ADD = KERNELS_DIR / "vector_add.hip"

_FUNCTION_RE = re.compile(
    r"^(?P<name>[A-Za-z_]\w*):\s+; @(?P=name)\n(?P<body>.*?)^\.Lfunc_end\d+:\n(?P<after>.*?)"
    r"(?=^\s*\.protected\s|^\s*\.globl\s|\Z)",
    re.M | re.S,
)
_STAT_RE = re.compile(r"^; (\w+): (\d+)", re.M)


def compile_asm(clang: str, source: Path, arch: str, out_dir: Path) -> Path:
    """`clang-19 -x hip --offload-arch=<arch> --cuda-device-only -O3 -S` with the static gate's
    HIP device API (`hip_flags()`: -nogpulib -nogpuinc and the plugin's own header), so the
    code is the gate's and no ROCm package is needed."""
    out = out_dir / f"{source.stem}-{arch}.s"
    run([clang, "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only", "-O3",
         *hip_flags(), "-S", f"-I{KERNELS_DIR}", str(source), "-o", str(out)])  # fmt: skip
    return out


def assemble(clang: str, asm: Path, arch: str) -> bytes:
    """A relocatable code object from clang's .s: no lld needed, and it carries the same
    NT_AMDGPU_METADATA note as a linked one."""
    out = asm.with_suffix(".o")
    run([clang, "--target=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-c", str(asm), "-o", str(out)])
    return out.read_bytes()


def run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-4000:]}")


def functions(asm: str) -> dict[str, tuple[str, dict[str, int]]]:
    """Kernel name -> (its instructions, LLVM's "; Key: value" kernel-info numbers)."""
    found = {}
    for match in _FUNCTION_RE.finditer(asm):
        stats = {key: int(value) for key, value in _STAT_RE.findall(match["after"])}
        found[match["name"]] = (match["body"], stats)
    return found


def instructions(body: str, opcode: str) -> list[str]:
    return re.findall(rf"^\s*{opcode}\s[^\n]*", body, re.M)


@pytest.fixture(scope="module")
def vector_add_gfx942(clang19, tmp_path_factory) -> dict[str, str]:
    if not VECTOR_ADD.exists():
        pytest.skip("kernels/vector_add.hip is not written yet")
    asm = compile_asm(clang19, VECTOR_ADD, "gfx942", tmp_path_factory.mktemp("asm"))
    return {name: body for name, (body, _) in functions(asm.read_text()).items()}


def test_each_vector_add_kernel_is_parsed_on_its_own(vector_add_gfx942):
    expected = {"vector_add", "vector_add_bypass", "vector_add_nt", "vector_add_vec4"}
    assert expected <= set(vector_add_gfx942)
    for name, body in vector_add_gfx942.items():  # its own descriptor, nobody else's
        assert re.findall(r"\.amdhsa_kernel (\w+)", body) == [name]


def test_l2_bypass_loads_and_stores_carry_sc0_sc1(vector_add_gfx942):
    body = vector_add_gfx942["vector_add_bypass"]
    loads = instructions(body, "global_load_dword")
    stores = instructions(body, "global_store_dword")
    assert len(loads) == 2 and len(stores) == 1
    assert all(re.search(r"\bsc0 sc1\b", line) for line in loads + stores), loads + stores


def test_plain_vector_add_has_no_cache_bits(vector_add_gfx942):
    body = vector_add_gfx942["vector_add"]
    memory = instructions(body, "global_load_dword") + instructions(body, "global_store_dword")
    assert len(memory) == 3
    assert not any(re.search(r"\b(sc0|sc1|nt)\b", line) for line in memory), memory


def test_nontemporal_vector_add_shows_nt(vector_add_gfx942):
    body = vector_add_gfx942["vector_add_nt"]
    memory = instructions(body, "global_load_dword") + instructions(body, "global_store_dword")
    assert len(memory) == 3
    assert all(re.search(r"\bnt\b", line) for line in memory), memory
    assert not any(re.search(r"\bsc[01]\b", line) for line in memory), memory


def test_vec4_vector_add_moves_128_bits(vector_add_gfx942):
    body = vector_add_gfx942["vector_add_vec4"]
    assert instructions(body, "global_load_dwordx4")
    assert instructions(body, "global_store_dwordx4")


def check_against_llvm(code_object, stats_by_kernel) -> list[str]:
    """Our registers and waves per SIMD for each kernel, asserted equal to LLVM's."""
    limits = cu_limits(code_object.arch)
    lines = []
    for name, kernel in sorted(code_object.kernels.items()):
        stats = stats_by_kernel[name]
        assert kernel.vgpr_count == stats["TotalNumVgprs"], name
        assert kernel.sgpr_count == stats["NumSgprs"], name
        # LLVM reports the per-SIMD limit of registers and of LDS (at the kernel's largest
        # workgroup) separately from workgroup granularity; compare like with like.
        registers = register_waves_per_simd(limits, kernel.vgpr_count, kernel.sgpr_count)
        lds = occupancy(limits, block_threads=kernel.max_flat_workgroup_size, vgprs=0,
                        lds_bytes=kernel.lds_bytes).waves_per_simd  # fmt: skip
        assert min(registers, lds) == stats["Occupancy"], (name, registers, lds, stats)
        resources = kernel_resources(kernel, code_object.arch, block_threads=256)
        lines.append(f"{name}: {resources.summary()}, {resources.waves_per_simd} waves/SIMD")
    return lines


@pytest.mark.parametrize("path", KERNEL_FILES, ids=[p.name for p in KERNEL_FILES])
def test_gfx942_code_object_resources_and_occupancy(path, clang19, tmp_path, record_property):
    asm = compile_asm(clang19, path, "gfx942", tmp_path)
    code_object = read_code_object(assemble(clang19, asm, "gfx942"))
    assert code_object.arch == "gfx942"
    stats = {name: stats for name, (_, stats) in functions(asm.read_text()).items()}
    assert set(code_object.kernels) == set(stats)
    lines = check_against_llvm(code_object, stats)
    record_property("gfx942_resources", "; ".join(lines))
    print(f"{path.name} on gfx942 (block 256):\n  " + "\n  ".join(lines))


def register_pressure_source() -> str:
    """Kernels that must use exactly v<N>, a<N> or s<N> (an inline-asm clobber), and LDS."""
    lines = ["#include <hip/hip_runtime.h>", '#define K extern "C" __global__']
    clobbers = [f"v{n}" for n in (0, 63, 64, 71, 72, 84, 101, 128, 160, 167, 168, 169, 255)]
    clobbers += [f"a{n}" for n in (63, 100, 255)] + [f"s{n}" for n in (79, 90, 99)]
    write = {"v": "v_mov_b32", "a": "v_accvgpr_write_b32", "s": "s_mov_b32"}
    for reg in clobbers:
        clobber = f'asm volatile("{write[reg[0]]} {reg}, 0" ::: "{reg}");'
        lines.append(f"K void r_{reg}(float* c) {{ {clobber} c[0] = 1.0f; }}")
    for threads, floats in ((1024, 4096), (256, 5000), (64, 3000)):
        lines.append(
            f"K void __attribute__((amdgpu_flat_work_group_size(1, {threads}))) "
            f"lds_{threads}(float* c) {{ __shared__ float t[{floats}]; "
            "t[__builtin_amdgcn_workitem_id_x()] = c[0]; __builtin_amdgcn_s_barrier(); "
            "c[1] = t[5]; }"
        )
    return "\n".join(lines) + "\n"


# Waves per SIMD LLVM allows for these, with 512 VGPRs allocated in blocks of 8 (the guide's
# "blocks of 16" would give 6 for 65-72 and 2 for 161-168).
EXPECTED_WAVES = {"r_v63": 8, "r_v64": 7, "r_v71": 7, "r_v72": 6, "r_v160": 3, "r_v167": 3,
                  "r_v168": 2, "r_v169": 2, "r_a255": 1, "r_s90": 8, "r_s99": 7}  # fmt: skip


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_occupancy_rules_match_llvm(arch, clang19, tmp_path):
    source = tmp_path / "pressure.hip"
    source.write_text(register_pressure_source())
    asm = compile_asm(clang19, source, arch, tmp_path)
    code_object = read_code_object(assemble(clang19, asm, arch))
    stats = {name: stats for name, (_, stats) in functions(asm.read_text()).items()}
    check_against_llvm(code_object, stats)
    for name, waves in EXPECTED_WAVES.items():
        assert stats[name]["Occupancy"] == waves, name
    assert code_object.kernels["r_a255"].agpr_count == 256
