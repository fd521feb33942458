"""Code facts through the real compilers, without a GPU: NVRTC's CUBIN and ptxas report with
nvdisasm's SASS, clang-19's gfx942 code object and assembly; on the simulated device (whose
facts are those compilers' for its arch, labelled so) and on the hip backend over its driver
module with only the calls it makes answered (hipFuncGetAttribute among them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_gpuperf.explain.code.code_facts import DRIVER_HIP, amd_facts, nvidia_facts
from pytest_gpuperf.explain.code.kernel_facts import FactsUnavailable, facts_of
from pytest_gpuperf.explain.code.memory_ops import find_nvdisasm
from pytest_gpuperf.explain.code.ptxas import PTXAS_VERBOSE
from pytest_gpuperf.gate.static.build import compile_static
from pytest_gpuperf.runtime.compile import compile_source, source_request
from tests.unit.conftest import hip_runtime  # noqa: F401 (the stubbed hip.hip fixture)

pytestmark = pytest.mark.compile

KERNELS = Path(__file__).parents[1] / "unit" / "data" / "kernels.hip"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "cache"))


def _cubin(path: Path = KERNELS, options=()):
    request = source_request("nvrtc", path, None, "sm_90", (*options, *PTXAS_VERBOSE))
    return compile_source(request, use_cache=False)


def test_nvrtc_facts_of_every_kernel(nvrtc):
    if find_nvdisasm() is None:
        pytest.skip("nvdisasm is not installed: pip install nvidia-cuda-nvdisasm")
    built = _cubin()
    facts = {
        name: nvidia_facts(built.binary, built.log, name, "sm_90",
                           toolchain=built.compiler_version, block_threads=block)
        for name, block in (("add3", 256), ("tile", 128), ("spill", 256), ("copy4", 256))
    }  # fmt: skip
    assert facts["add3"].global_loads == (("b32", 3),)
    assert facts["copy4"].global_loads == (("b128", 1),)
    assert facts["tile"].shared_bytes == 1024 and facts["tile"].max_threads_per_block == 128
    assert facts["spill"].local_bytes == 256
    assert all(f.occupancy == 1.0 and not f.notes for f in facts.values())
    assert dict(facts["add3"].sources)["memory instructions"].startswith("SASS (nvdisasm 13.")


def test_without_nvdisasm_the_memory_instructions_are_unknown_and_say_the_fix(nvrtc, monkeypatch):
    monkeypatch.setenv("GPUPERF_NVDISASM", "/nonexistent/nvdisasm")
    built = _cubin()
    facts = nvidia_facts(built.binary, built.log, "add3", "sm_90", toolchain="nvrtc",
                         block_threads=256)  # fmt: skip
    assert facts.global_loads is None and facts.registers == 14
    assert any("memory instructions unknown" in note for note in facts.notes)


def test_clang_facts_of_every_kernel(clang19):
    build = compile_static(KERNELS, "gfx942", clang=clang19)
    copy4 = amd_facts(build, "copy4", block_threads=256)
    spill = amd_facts(build, "spill", block_threads=256)
    tile = amd_facts(build, "tile", block_threads=128)
    assert copy4.global_loads == (("b128", 1),) and copy4.global_stores == (("b128", 1),)
    assert spill.local_bytes > 0 and tile.shared_bytes == 1024
    assert tile.max_threads_per_block == 128 and copy4.occupancy == 1.0


@pytest.mark.parametrize("device, arch", [("mi300x", "gfx942"), ("h100-sxm", "sm_90")])
def test_the_simulated_device_gives_its_arch_compilers_facts_labelled(device, arch, request):
    request.getfixturevalue("clang19" if arch == "gfx942" else "nvrtc")
    from pytest_gpuperf.simulate.device import open as open_sim

    backend = open_sim(device=device, seed=1)
    try:
        module = backend.compile(KERNELS)
        module.source_path = KERNELS
        facts = facts_of(module.kernel("add3"), block=(256, 1, 1))
    finally:
        backend.close()
    assert facts.arch == arch and facts.registers and facts.occupancy == 1.0
    assert any("the simulated device runs no code" in note for note in facts.notes)
    if arch == "gfx942" or find_nvdisasm():
        assert facts.global_loads == (("b32", 3),)


def test_the_simulated_device_without_the_compiler_says_so(monkeypatch):
    from pytest_gpuperf.explain.code import kernel_facts

    monkeypatch.setattr(kernel_facts, "_cache", {})  # facts another test computed
    monkeypatch.setenv("PATH", "/nonexistent")
    from pytest_gpuperf.simulate.device import open as open_sim

    backend = open_sim(device="mi300x", seed=1)
    try:
        module = backend.compile(KERNELS)
        module.source_path = KERNELS
        with pytest.raises(FactsUnavailable, match="clang"):
            facts_of(module.kernel("add3"), block=(256, 1, 1))
    finally:
        backend.close()


def test_the_hip_backend_reads_the_runtimes_attributes(hip_runtime, nvrtc):  # noqa: F811
    """hip.py over hip.hip with a CUBIN (what the HIP-over-CUDA shim loads): the resources are
    hipFuncGetAttribute's, answered here by a stub that says 40 registers."""
    from pytest_gpuperf.runtime import hip
    from pytest_gpuperf.runtime.base import Module
    from pytest_gpuperf.runtime.signature import parse_signatures

    ok = hip_runtime.hipError_t.hipSuccess
    answers = {"NUM_REGS": 40, "SHARED_SIZE_BYTES": 0, "LOCAL_SIZE_BYTES": 0,
               "MAX_THREADS_PER_BLOCK": 1024}  # fmt: skip
    asked = []

    def attribute(which, function):
        name = which.name.removeprefix("HIP_FUNC_ATTRIBUTE_")
        asked.append(name)
        return ok, answers[name]

    hip_runtime.hipFuncGetAttribute = attribute
    hip_runtime.hipModuleGetFunction = lambda module, name: (ok, object())
    backend = hip.open(0)
    built = _cubin()
    module = Module(backend, object(), str(KERNELS), parse_signatures(KERNELS.read_text()),
                    binary=built.binary, source_path=KERNELS)  # fmt: skip
    facts = facts_of(module.kernel("add3"), block=(256, 1, 1))
    assert "NUM_REGS" in asked
    assert facts.registers == 40 and facts.occupancy == 0.75  # the rules at 40 registers
    assert dict(facts.sources)["resources"].startswith(DRIVER_HIP)


def test_nvdisasm_is_found_in_the_wheel_or_on_path():
    found = find_nvdisasm()
    if found is None:
        pytest.skip("nvdisasm is not installed: pip install nvidia-cuda-nvdisasm")
    assert Path(found).is_file() or shutil.which(found)
