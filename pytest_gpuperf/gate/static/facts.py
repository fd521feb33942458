"""The static facts of one compiled kernel for one launch shape, as plain data.

Registers, LDS, scratch and spills come from the code object's metadata note (the same
numbers the HIP runtime reads when it loads the kernel); arch VGPRs from LLVM's "; NumVgprs"
comment (the metadata gives only the unified VGPR+AGPR count on gfx90a/gfx942); occupancy
from runtime/occupancy.py, the CDNA model checked against LLVM's own "; Occupancy" in the
compile tests. A `StaticFacts` converts to and from a dict of TOML/JSON-safe values (no
None: unknown values are left out), since the plugin keeps them in baseline files and
reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.errors import KernelNotFound
from pytest_gpuperf.gate.static.asm import kernel_asm
from pytest_gpuperf.gate.static.build import StaticBuild
from pytest_gpuperf.gate.static.errors import StaticFactsError
from pytest_gpuperf.runtime.amd_codeobject import AmdKernelMetadata, read_code_object, target_arch
from pytest_gpuperf.runtime.fingerprint import kernel_fingerprint
from pytest_gpuperf.runtime.occupancy import DEFAULT_BLOCK_THREADS, cu_limits, occupancy


@dataclass(frozen=True)
class StaticFacts:
    """What the compiler decided for one kernel, and the occupancy that follows.

    `vgprs` is what the hardware allocates per work-item (arch VGPRs rounded to 4 plus
    AGPRs on gfx90a/gfx942); `arch_vgprs` and `agprs` are its two parts. `lds_bytes` is the
    static LDS plus the launch's dynamic LDS. `scratch_bytes` is the private segment per
    work-item. Occupancy (`waves_per_simd`, `occupancy` as a fraction of the CU's maximum,
    and the `occupancy_limiter`: "waves", "vgprs", "sgprs" or "lds") is None for an arch
    the model does not cover. `calls` lists functions the kernel calls (device-library
    functions left unlinked under -nogpulib; see `static.build`).
    """

    kernel: str
    arch: str
    compiler: str
    hip_runtime: str
    block_threads: int
    dynamic_lds_bytes: int
    vgprs: int
    arch_vgprs: int
    agprs: int
    sgprs: int
    static_lds_bytes: int
    scratch_bytes: int
    vgpr_spills: int
    sgpr_spills: int
    max_block_threads: int
    fingerprint: str
    fingerprint_scope: str
    waves_per_simd: int | None = None
    occupancy: float | None = None
    occupancy_limiter: str | None = None
    calls: tuple[str, ...] = ()

    @property
    def lds_bytes(self) -> int:
        return self.static_lds_bytes + self.dynamic_lds_bytes

    @property
    def spills(self) -> int:
        return self.vgpr_spills + self.sgpr_spills

    @property
    def toolchain(self) -> str:
        """ "clang 19.1.7, gpuperf HIP header": what produced the code."""
        return f"{self.compiler}, {self.hip_runtime} HIP header"

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (lists, not tuples; no None), for TOML and JSON."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            out[field.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StaticFacts:
        """The inverse of `to_dict`; `StaticFactsError` names a missing or mistyped field.
        Unknown keys are ignored, so newer files stay readable."""
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name not in data:
                if field.default is dataclasses.MISSING:
                    raise StaticFactsError(
                        f"static facts lack the field {field.name!r}", field.name
                    )
                continue
            values[field.name] = _typed(field.name, data[field.name])
        return cls(**values)


_INT_FIELDS = {
    "block_threads", "dynamic_lds_bytes", "vgprs", "arch_vgprs", "agprs", "sgprs",
    "static_lds_bytes", "scratch_bytes", "vgpr_spills", "sgpr_spills", "max_block_threads",
    "waves_per_simd",
}  # fmt: skip


def _typed(name: str, value: Any) -> Any:
    if name in _INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise StaticFactsError(
                f"static facts field {name!r} must be an integer, not {value!r}", name
            )
        return value
    if name == "occupancy":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise StaticFactsError(
                f"static facts field 'occupancy' must be a number, not {value!r}", name
            )
        return float(value)
    if name == "calls":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise StaticFactsError(
                f"static facts field 'calls' must be a list of names: {value!r}", name
            )
        return tuple(value)
    if not isinstance(value, str):
        raise StaticFactsError(f"static facts field {name!r} must be a string, not {value!r}", name)
    return value


def kernel_facts(
    build: StaticBuild,
    kernel: str,
    *,
    block_threads: int = DEFAULT_BLOCK_THREADS,
    dynamic_lds_bytes: int = 0,
) -> StaticFacts:
    """The static facts of `kernel` in `build` for workgroups of `block_threads` using
    `dynamic_lds_bytes` of dynamic shared memory (`KernelNotFound` lists the kernels
    there are). The block is capped at the kernel's maximum workgroup size, as the
    runtime would refuse a larger one."""
    metadata = _kernel_metadata(build.code_object, kernel, build.arch, build.source_name)
    text = kernel_asm(build.asm, kernel)
    vgpr_spills = metadata.vgpr_spill_count
    if not metadata.spill_counts_known:
        vgpr_spills = text.vgpr_spill_stores
    return _metadata_facts(
        build.code_object,
        kernel,
        metadata,
        arch=build.arch,
        compiler=build.compiler,
        hip_runtime=build.hip_runtime,
        block_threads=block_threads,
        dynamic_lds_bytes=dynamic_lds_bytes,
        arch_vgprs=text.info.get("NumVgprs", metadata.vgpr_count - metadata.agpr_count),
        vgpr_spills=vgpr_spills,
        calls=text.called_functions,
    )


def loaded_kernel_facts(
    binary: bytes,
    kernel: str,
    *,
    arch: str,
    compiler: str,
    hip_runtime: str = "rocm",
    block_threads: int = DEFAULT_BLOCK_THREADS,
    dynamic_lds_bytes: int = 0,
) -> StaticFacts:
    """The static facts of `kernel` in a code object a GPU run loaded (a hiprtc build, bare
    or bundled): what a save on a real AMD GPU records, from the binary the HIP runtime
    actually ran. There is no assembly, so the arch-VGPR share is the unified count less the
    AGPRs, spills come from the metadata alone and calls are unknown (left empty).
    `compiler` names the toolchain ("hiprtc 6.2.41133"): facts compare like with like, and
    a comparison with a clang build says the toolchain changed."""
    metadata = _kernel_metadata(binary, kernel, arch, "the loaded code object")
    return _metadata_facts(
        binary,
        kernel,
        metadata,
        arch=target_arch(arch),
        compiler=compiler,
        hip_runtime=hip_runtime,
        block_threads=block_threads,
        dynamic_lds_bytes=dynamic_lds_bytes,
        arch_vgprs=metadata.vgpr_count - metadata.agpr_count,
        vgpr_spills=metadata.vgpr_spill_count,
        calls=(),
    )


def _kernel_metadata(binary: bytes, kernel: str, arch: str, where: str) -> AmdKernelMetadata:
    """`kernel`'s entry in the code object's metadata; `KernelNotFound` lists those `where`
    (a source's build, the loaded code object) has."""
    code_object = read_code_object(binary, arch)
    metadata = code_object.kernels.get(kernel)
    if metadata is None:
        raise KernelNotFound(kernel, sorted(code_object.kernels), where)
    return metadata


def _metadata_facts(
    binary: bytes,
    kernel: str,
    metadata: AmdKernelMetadata,
    *,
    arch: str,
    compiler: str,
    hip_runtime: str,
    block_threads: int,
    dynamic_lds_bytes: int,
    arch_vgprs: int,
    vgpr_spills: int,
    calls: tuple[str, ...],
) -> StaticFacts:
    """The facts both kinds of build give the same way: the metadata's counts, the block
    capped at the kernel's maximum workgroup size, the code's fingerprint, the occupancy.
    What only the assembly knows (the arch-VGPR share, spills the metadata lacks, calls) is
    given by the caller."""
    fingerprint = kernel_fingerprint(binary, kernel)
    facts = StaticFacts(
        kernel=kernel,
        arch=arch,
        compiler=compiler,
        hip_runtime=hip_runtime,
        block_threads=min(block_threads, metadata.max_flat_workgroup_size),
        dynamic_lds_bytes=dynamic_lds_bytes,
        vgprs=metadata.vgpr_count,
        arch_vgprs=arch_vgprs,
        agprs=metadata.agpr_count,
        sgprs=metadata.sgpr_count,
        static_lds_bytes=metadata.lds_bytes,
        scratch_bytes=metadata.scratch_bytes,
        vgpr_spills=vgpr_spills,
        sgpr_spills=metadata.sgpr_spill_count,
        max_block_threads=metadata.max_flat_workgroup_size,
        fingerprint=fingerprint.digest,
        fingerprint_scope=fingerprint.scope,
        calls=calls,
    )
    return with_occupancy(facts)


def with_occupancy(facts: StaticFacts) -> StaticFacts:
    """`facts` with occupancy computed for its launch shape (unchanged for an arch the
    CDNA model does not cover)."""
    limits = cu_limits(facts.arch)
    if limits is None:
        return facts
    result = occupancy(
        limits,
        block_threads=facts.block_threads,
        vgprs=facts.vgprs,
        sgprs=facts.sgprs,
        lds_bytes=facts.lds_bytes,
    )
    return dataclasses.replace(
        facts,
        waves_per_simd=result.waves_per_simd,
        occupancy=result.fraction,
        occupancy_limiter=result.limiter,
    )
