"""Reading kernel resources from AMD code objects: ELF notes, offload bundles, errors.

The code objects here are built byte by byte to the ELF64 and clang-offload-bundle layouts;
tests/compile reads real ones from hiprtc and clang-19.
"""

from __future__ import annotations

import struct

import msgpack
import pytest

from pytest_gpuperf.runtime.amd_codeobject import (
    BUNDLE_MAGIC,
    EM_AMDGPU,
    NT_AMD_HSA_METADATA,
    NT_AMDGPU_METADATA,
    CodeObjectError,
    is_code_object,
    read_code_object,
    target_arch,
    unbundle,
)

KERNEL = {
    ".name": "vector_add",
    ".symbol": "vector_add.kd",
    ".vgpr_count": 25,
    ".agpr_count": 21,
    ".sgpr_count": 14,
    ".group_segment_fixed_size": 4096,
    ".private_segment_fixed_size": 32,
    ".wavefront_size": 64,
    ".max_flat_workgroup_size": 256,
    ".vgpr_spill_count": 2,
    ".sgpr_spill_count": 1,
    ".uses_dynamic_stack": True,
    ".kernarg_segment_size": 28,
}


def metadata(target: str = "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", kernels=(KERNEL,)):
    return {"amdhsa.version": [1, 2], "amdhsa.target": target, "amdhsa.kernels": list(kernels)}


def note(owner: bytes, kind: int, desc: bytes) -> bytes:
    name = owner + b"\0"
    pad = lambda data: data + b"\0" * (-len(data) % 4)  # noqa: E731
    return struct.pack("<III", len(name), len(desc), kind) + pad(name) + pad(desc)


def elf(notes: bytes, machine: int = EM_AMDGPU) -> bytes:
    """A minimal ELF64: null section, one SHT_NOTE section, the section-name table."""
    names = b"\0.note\0.shstrtab\0"
    notes_at = 64
    names_at = notes_at + len(notes)
    sections_at = names_at + len(names) + (-(names_at + len(names)) % 8)
    header = b"\x7fELF" + bytes([2, 1, 1, 64, 3]) + b"\0" * 7
    header += struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 0, sections_at, 0x4C, 64, 56, 0,
                          64, 3, 2)  # fmt: skip

    def section(name: int, kind: int, offset: int, size: int) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name, kind, 0, 0, offset, size, 0, 0, 4, 0)

    body = header + notes + names
    body += b"\0" * (sections_at - len(body))
    return (
        body
        + section(0, 0, 0, 0)
        + section(1, 7, notes_at, len(notes))
        + section(7, 3, names_at, len(names))
    )


def code_object(meta=None) -> bytes:
    packed = msgpack.packb(metadata() if meta is None else meta)
    return elf(note(b"AMDGPU", NT_AMDGPU_METADATA, packed))


def bundle(entries: list[tuple[str, bytes]]) -> bytes:
    header_size = len(BUNDLE_MAGIC) + 8 + sum(24 + len(t) for t, _ in entries)
    blob, data, offset = BUNDLE_MAGIC + struct.pack("<Q", len(entries)), b"", header_size
    for triple, payload in entries:
        blob += struct.pack("<QQQ", offset, len(payload), len(triple)) + triple.encode()
        data += payload
        offset += len(payload)
    return blob + data


def test_reads_every_resource_field():
    result = read_code_object(code_object())
    assert result.target == "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"
    assert result.arch == "gfx942"
    kernel = result.kernels["vector_add"]
    assert (kernel.vgpr_count, kernel.agpr_count, kernel.sgpr_count) == (25, 21, 14)
    assert (kernel.lds_bytes, kernel.scratch_bytes) == (4096, 32)
    assert (kernel.wavefront_size, kernel.max_flat_workgroup_size) == (64, 256)
    assert (kernel.spill_count, kernel.uses_dynamic_stack, kernel.kernarg_bytes) == (3, True, 28)


def test_optional_fields_default_when_an_older_compiler_omits_them():
    minimal = {k: v for k, v in KERNEL.items() if "spill" not in k and "agpr" not in k}
    kernel = read_code_object(code_object(metadata(kernels=[minimal]))).kernels["vector_add"]
    assert (kernel.agpr_count, kernel.spill_count) == (0, 0)


def test_missing_required_field_is_named():
    broken = {k: v for k, v in KERNEL.items() if k != ".vgpr_count"}
    with pytest.raises(CodeObjectError, match=r"'vector_add'.*\.vgpr_count"):
        read_code_object(code_object(metadata(kernels=[broken])))


def test_reads_through_an_offload_bundle():
    wrapped = bundle([("host-x86_64-unknown-linux", b""),
                      ("hipv4-amdgcn-amd-amdhsa--gfx90a", code_object())])  # fmt: skip
    assert is_code_object(wrapped)
    assert unbundle(wrapped) == code_object()
    assert set(read_code_object(wrapped).kernels) == {"vector_add"}


def test_a_bundle_with_several_devices_needs_the_arch():
    gfx90a = code_object(metadata(target="amdgcn-amd-amdhsa--gfx90a"))
    gfx942 = code_object(metadata(target="amdgcn-amd-amdhsa--gfx942"))
    wrapped = bundle([("hipv4-amdgcn-amd-amdhsa--gfx90a", gfx90a),
                      ("hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+", gfx942)])  # fmt: skip
    with pytest.raises(
        CodeObjectError, match=r"holds 2 AMDGPU code objects.*gfx90a.*pass the arch"
    ):
        unbundle(wrapped)
    assert read_code_object(wrapped, "gfx942:xnack-").arch == "gfx942"
    with pytest.raises(CodeObjectError, match="no AMDGPU code object for gfx1100"):
        unbundle(wrapped, "gfx1100")


def test_compressed_bundles_are_refused_with_the_way_out():
    with pytest.raises(CodeObjectError, match="--offload-compress"):
        read_code_object(b"CCOB" + b"\0" * 60)


def test_other_binaries_are_named_not_misread():
    assert not is_code_object(b"\x7fELF" + b"\0" * 60)  # not AMDGPU
    assert not is_code_object(b"//\n// Generated by NVIDIA NVVM Compiler\n.version 8.0")
    with pytest.raises(CodeObjectError, match="not an AMD code object"):
        read_code_object(b"//\n// Generated by NVIDIA NVVM Compiler\n")
    x86 = elf(note(b"AMDGPU", NT_AMDGPU_METADATA, msgpack.packb(metadata())), machine=62)
    with pytest.raises(CodeObjectError, match="ELF machine 62 is not AMDGPU"):
        read_code_object(x86)


def test_a_code_object_without_the_metadata_note_says_so():
    with pytest.raises(CodeObjectError, match="no NT_AMDGPU_METADATA"):
        read_code_object(elf(note(b"GNU", 3, b"\x01\x02\x03\x04")))


def test_code_object_v2_is_refused_by_name():
    with pytest.raises(CodeObjectError, match="v2"):
        read_code_object(elf(note(b"AMD", NT_AMD_HSA_METADATA, b"---\n...")))


def test_truncated_input_is_a_code_object_error():
    whole = code_object()
    with pytest.raises(CodeObjectError):
        read_code_object(whole[:100])
    with pytest.raises(CodeObjectError, match="truncated offload bundle"):
        unbundle(BUNDLE_MAGIC + struct.pack("<Q", 2) + b"\0" * 10)


@pytest.mark.parametrize(
    ("target", "arch"),
    [("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", "gfx942"), ("gfx90a:xnack-", "gfx90a"),
     ("gfx942", "gfx942"), ("hipv4-amdgcn-amd-amdhsa--gfx90a", "gfx90a")],
)  # fmt: skip
def test_target_arch_drops_triple_and_features(target, arch):
    assert target_arch(target) == arch
