"""Per-kernel resource usage read from an AMD GPU code object, without a GPU or ROCm tools.

Every AMDGPU code object (v3 and later) carries its kernels' resource usage in the ELF
`.note` section as an NT_AMDGPU_METADATA note: a MessagePack map with one entry per kernel
(`.vgpr_count`, `.sgpr_count`, `.group_segment_fixed_size` = LDS, ...; see LLVM's
AMDGPUUsage "Code Object V3 Metadata"). The same note is in hiprtc's output and in clang's,
so reading it needs no vendor library. hiprtc of ROCm 6 returns the ELF wrapped in a clang
offload bundle (`__CLANG_OFFLOAD_BUNDLE__`), ROCm 5.2's returns the bare ELF; both are read.

The ELF reader is a few lines of `struct` because all we need are the note sections of a
little-endian ELF64 file; a full ELF library would be a dependency for 30 lines.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any

import msgpack

from pytest_gpuperf.errors import GpuPerfError

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_BUNDLE_MAGIC = b"CCOB"
ELF_MAGIC = b"\x7fELF"
EM_AMDGPU = 224
SHT_NOTE = 7
NT_AMDGPU_METADATA = 32
NT_AMD_HSA_METADATA = 10  # code object v2 (YAML), emitted by ROCm before 3.x


class CodeObjectError(GpuPerfError):
    """The binary is not an AMD code object we can read; says what it is instead."""


@dataclass(frozen=True)
class AmdKernelMetadata:
    """One kernel's entry in the code object metadata, in the compiler's own units.

    `vgpr_count` is what the hardware allocates per work-item: on gfx90a and gfx942, with
    their unified register file, the compiler already counts arch VGPRs (rounded to 4)
    plus AGPRs in it (checked against clang-19's `TotalNumVgprs`); `agpr_count` is the
    AGPR share. `lds_bytes` is the static LDS (dynamic shared memory adds to it at launch);
    `scratch_bytes` is the private segment per work-item.
    """

    name: str
    vgpr_count: int
    agpr_count: int
    sgpr_count: int
    lds_bytes: int
    scratch_bytes: int
    wavefront_size: int
    max_flat_workgroup_size: int
    vgpr_spill_count: int = 0
    sgpr_spill_count: int = 0
    uses_dynamic_stack: bool = False
    kernarg_bytes: int = 0
    spill_counts_known: bool = True  # False: the metadata had no .vgpr_spill_count

    @property
    def spill_count(self) -> int:
        return self.vgpr_spill_count + self.sgpr_spill_count


@dataclass(frozen=True)
class AmdCodeObject:
    """The kernels of one code object, with the target it was built for."""

    target: str  # "amdgcn-amd-amdhsa--gfx90a" (may carry ":sramecc+:xnack-" features)
    kernels: dict[str, AmdKernelMetadata]

    @property
    def arch(self) -> str:
        """The processor without feature suffixes: "gfx942"."""
        return target_arch(self.target)


def target_arch(target: str) -> str:
    """ "gfx942" from "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-" or "gfx942:xnack-"."""
    return target.split(":", 1)[0].rsplit("-", 1)[-1]


def is_code_object(blob: bytes) -> bool:
    """Whether `blob` looks like an AMD code object or an offload bundle around one."""
    if blob.startswith((BUNDLE_MAGIC, COMPRESSED_BUNDLE_MAGIC)):
        return True
    return blob.startswith(ELF_MAGIC) and len(blob) >= 20 and _u16(blob, 18) == EM_AMDGPU


def unbundle(blob: bytes, arch: str | None = None) -> bytes:
    """The AMDGPU ELF inside a clang offload bundle (or `blob` itself when it is one).

    With several device entries, `arch` ("gfx90a") picks one; without it there must be one.
    """
    if blob.startswith(ELF_MAGIC):
        return blob
    if blob.startswith(COMPRESSED_BUNDLE_MAGIC):
        raise CodeObjectError(
            "the code object is a compressed offload bundle (CCOB); compile without "
            "--offload-compress to read its metadata"
        )
    if not blob.startswith(BUNDLE_MAGIC):
        raise CodeObjectError(
            f"not an AMD code object or offload bundle (starts with {blob[:8]!r})"
        )
    try:
        count = _u64(blob, len(BUNDLE_MAGIC))
        position = len(BUNDLE_MAGIC) + 8
        entries: list[tuple[str, bytes]] = []
        for _ in range(count):
            offset, size, triple_size = struct.unpack_from("<QQQ", blob, position)
            position += 24
            triple = blob[position : position + triple_size].decode()
            position += triple_size
            entries.append((triple, blob[offset : offset + size]))
    except (struct.error, UnicodeDecodeError) as failure:
        raise CodeObjectError(f"truncated offload bundle: {failure}") from None
    devices = [(triple, data) for triple, data in entries if "amdgcn" in triple and data]
    if arch is not None:
        devices = [(t, d) for t, d in devices if target_arch(t) == target_arch(arch)]
    listing = ", ".join(triple for triple, _ in entries) or "none"
    if not devices:
        wanted = f" for {arch}" if arch else ""
        raise CodeObjectError(
            f"the offload bundle has no AMDGPU code object{wanted} (entries: {listing})"
        )
    if len(devices) > 1:
        raise CodeObjectError(
            f"the offload bundle holds {len(devices)} AMDGPU code objects (entries: "
            f"{listing}); pass the arch to choose one"
        )
    return devices[0][1]


def read_code_object(blob: bytes, arch: str | None = None) -> AmdCodeObject:
    """Kernels and target of a code object (bare ELF or offload bundle)."""
    elf = unbundle(blob, arch)
    try:
        metadata = _metadata_note(elf)
    except (struct.error, ValueError, msgpack.exceptions.UnpackException) as failure:
        raise CodeObjectError(f"unreadable code object: {failure}") from None
    if not isinstance(metadata, dict):
        raise CodeObjectError("the AMDGPU metadata note is not a map")
    target = str(metadata.get("amdhsa.target", ""))
    kernels = {}
    for entry in metadata.get("amdhsa.kernels", []):
        kernel = _kernel(entry)
        kernels[kernel.name] = kernel
    return AmdCodeObject(target=target, kernels=kernels)


@functools.lru_cache(maxsize=64)
def _loaded_code_object(binary: bytes) -> AmdCodeObject | None:
    if not is_code_object(binary):
        return None
    try:
        return read_code_object(binary)
    except CodeObjectError:
        return None


def loaded_kernel(binary: bytes, name: str) -> AmdKernelMetadata | None:
    """The metadata of kernel `name` in a binary a backend loaded, or None where the binary
    is not a readable AMD code object (a CUBIN from a HIP runtime over CUDA, say): the
    backend then asks the runtime instead. Each binary is read once."""
    code_object = _loaded_code_object(binary)
    return code_object.kernels.get(name) if code_object else None


def _kernel(entry: dict[str, Any]) -> AmdKernelMetadata:
    def number(key: str, default: int | None = None) -> int:
        value = entry.get(key, default)
        if value is None:
            raise CodeObjectError(f"kernel {entry.get('.name')!r} metadata lacks {key}")
        return int(value)

    if not isinstance(entry, dict) or ".name" not in entry:
        raise CodeObjectError(f"a kernel entry of the metadata has no .name: {entry!r:.200}")
    return AmdKernelMetadata(
        name=str(entry[".name"]),
        vgpr_count=number(".vgpr_count"),
        agpr_count=number(".agpr_count", 0),
        sgpr_count=number(".sgpr_count"),
        lds_bytes=number(".group_segment_fixed_size"),
        scratch_bytes=number(".private_segment_fixed_size"),
        wavefront_size=number(".wavefront_size"),
        max_flat_workgroup_size=number(".max_flat_workgroup_size"),
        vgpr_spill_count=number(".vgpr_spill_count", 0),
        sgpr_spill_count=number(".sgpr_spill_count", 0),
        uses_dynamic_stack=bool(entry.get(".uses_dynamic_stack", False)),
        kernarg_bytes=number(".kernarg_segment_size", 0),
        spill_counts_known=".vgpr_spill_count" in entry,
    )


def _metadata_note(elf: bytes) -> dict[str, Any]:
    if len(elf) < 64 or elf[4] != 2 or elf[5] != 1:
        raise CodeObjectError("not a little-endian ELF64 file")
    if _u16(elf, 18) != EM_AMDGPU:
        raise CodeObjectError(f"ELF machine {_u16(elf, 18)} is not AMDGPU ({EM_AMDGPU})")
    section_offset = _u64(elf, 40)
    entry_size, count = _u16(elf, 58), _u16(elf, 60)
    for index in range(count):
        header = section_offset + index * entry_size
        if _u32(elf, header + 4) != SHT_NOTE:
            continue
        start, size = _u64(elf, header + 24), _u64(elf, header + 32)
        for owner, kind, desc in _notes(elf[start : start + size]):
            if owner == b"AMDGPU" and kind == NT_AMDGPU_METADATA:
                return msgpack.unpackb(desc, raw=False, strict_map_key=False)
            if kind == NT_AMD_HSA_METADATA:
                raise CodeObjectError(
                    "code object v2 (YAML metadata) is not supported; use ROCm 3.x or later"
                )
    raise CodeObjectError("the code object has no NT_AMDGPU_METADATA note")


def _notes(section: bytes):
    """(owner, type, descriptor) of each ELF note, names and descriptors 4-byte aligned."""
    position = 0
    while position + 12 <= len(section):
        name_size, desc_size, kind = struct.unpack_from("<III", section, position)
        position += 12
        owner = section[position : position + name_size].rstrip(b"\0")
        position += (name_size + 3) & ~3
        desc = section[position : position + desc_size]
        position += (desc_size + 3) & ~3
        yield owner, kind, desc


def _u16(data: bytes, offset: int) -> int:
    return struct.unpack_from("<H", data, offset)[0]


def _u32(data: bytes, offset: int) -> int:
    return struct.unpack_from("<I", data, offset)[0]


def _u64(data: bytes, offset: int) -> int:
    return struct.unpack_from("<Q", data, offset)[0]
