"""Per-kernel code fingerprints on synthetic ELF files shaped like a CUBIN and an AMD HSA
code object (the real compilers' output is tested in tests/compile/test_static_fingerprint.py)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest

from pytest_gpuperf.runtime.amd_codeobject import BUNDLE_MAGIC, EM_AMDGPU
from pytest_gpuperf.runtime.fingerprint import (
    EM_CUDA,
    SCOPE_BINARY,
    SCOPE_KERNEL,
    code_fingerprint,
    kernel_fingerprint,
)

SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS = 1, 2, 3, 4, 8
STT_OBJECT, STT_FUNC, STB_GLOBAL = 1, 2, 1


@dataclass
class Section:
    name: str
    kind: int = SHT_PROGBITS
    data: bytes = b""
    info: int = 0
    size: int | None = None  # NOBITS sections have a size but no bytes
    link_to: str = ""


def build_elf(machine: int, sections: list[Section], symbols: list[tuple]) -> bytes:
    """An ELF64 file: `symbols` are (name, type, section name, value, size); a RELA
    section's data is a list of (offset, symbol name, type, addend) given as `data`."""
    names = [s.name for s in sections]
    all_sections = ["", *names, ".symtab", ".strtab", ".shstrtab"]
    index = {name: i for i, name in enumerate(all_sections)}
    strtab, symbol_index = b"\0", {}
    symtab = bytes(24)
    for number, (name, kind, section, value, size) in enumerate(symbols, start=1):
        symbol_index[name] = number
        symtab += struct.pack("<IBBHQQ", len(strtab), (STB_GLOBAL << 4) | kind, 0,
                              index[section], value, size)  # fmt: skip
        strtab += name.encode() + b"\0"
    shstrtab = b"\0" + b"".join(n.encode() + b"\0" for n in all_sections[1:])
    body, headers, offset = b"", [bytes(64)], 64

    def add(name, kind, data, *, info=0, link=0, entsize=0, size=None):
        nonlocal body, offset
        name_offset = shstrtab.index(name.encode() + b"\0")
        length = len(data) if size is None else size
        fields = (name_offset, kind, 0, 0, offset, length, link, info, 8, entsize)
        headers.append(struct.pack("<IIQQQQIIQQ", *fields))
        body += data
        offset += len(data)

    for section in sections:
        data = section.data
        entsize = 0
        if section.kind == SHT_RELA:
            data = b"".join(
                struct.pack("<QQq", r_offset, (symbol_index[target] << 32) | r_type, addend)
                for r_offset, target, r_type, addend in section.data
            )
            entsize = 24
        info = index[section.link_to] if section.link_to else section.info
        link = index[".symtab"] if section.kind == SHT_RELA else 0
        add(
            section.name,
            section.kind,
            data,
            info=info,
            link=link,
            entsize=entsize,
            size=section.size,
        )
    add(".symtab", SHT_SYMTAB, symtab, link=index[".strtab"], info=1, entsize=24)
    add(".strtab", SHT_STRTAB, strtab)
    add(".shstrtab", SHT_STRTAB, shstrtab)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack("<HHIQQQIHHHHHH", 2, machine, 1, 0, 0, 64 + len(body), 0, 64, 0, 0, 64,
                          len(headers), len(headers) - 1)  # fmt: skip
    return header + body + b"".join(headers)


def nv_info(*entries: tuple[int, int, int]) -> bytes:
    """`.nv.info` attributes (attribute, symbol index, value), cuobjdump's layout."""
    return b"".join(struct.pack("<BBHII", 0x04, a, 8, symbol, v) for a, symbol, v in entries)


def cubin(k1=b"\x01" * 32, k2=b"\x02" * 16, registers=24, symbol_slot=5, shared=0, call="foo",
          regcount=8, k2_regcount=16, k1_symbol=1):  # fmt: skip
    """Two kernels in their own .text.<name> sections, as NVCC/NVRTC lay them out; symbol 1
    is k1 (`k1_symbol` moves EIATTR_REGCOUNT's reference, to show that it must match)."""
    sections = [
        Section(
            ".nv.info",
            data=nv_info(
                (0x2F, 2, k2_regcount), (0x2F, k1_symbol, regcount), (0x11, 1, 0), (0x12, 2, 0)
            ),
        ),
        Section(".text.k1", data=k1, info=(registers << 24) | symbol_slot),
        Section(".text.k2", data=k2, info=(40 << 24) | 6),
        Section(".rela.text.k1", SHT_RELA, [(8, call, 1, 0)], link_to=".text.k1"),  # type: ignore[arg-type]
        Section(".nv.info.k1", data=b"\x04\x2f\x08\x00"),
    ]
    if shared:
        sections.append(Section(".nv.shared.k1", SHT_NOBITS, size=shared))
    symbols = [
        ("k1", STT_FUNC, ".text.k1", 0, len(k1)),
        ("k2", STT_FUNC, ".text.k2", 0, len(k2)),
        ("foo", STT_FUNC, ".text.k2", 0, 0),
        ("bar", STT_FUNC, ".text.k2", 0, 0),
    ]
    return build_elf(EM_CUDA, sections, symbols)


def amd_object(k1=b"\xaa" * 64, k2=b"\xbb" * 32, lds=0, entry_offset=0, with_kd=True):
    """An HSA code object: kernels in .text, their 64-byte descriptors in .rodata."""

    def descriptor(entry: int) -> bytes:
        return struct.pack("<IIII", lds, 0, 288, 0) + struct.pack("<q", entry) + bytes(40)

    rodata = descriptor(entry_offset) + descriptor(entry_offset + 0x100)
    symbols = [
        ("k1", STT_FUNC, ".text", 0, len(k1)),
        ("k2", STT_FUNC, ".text", 0x100, len(k2)),
        ("k2.kd", STT_OBJECT, ".rodata", 64, 64),
    ]
    if with_kd:
        symbols.append(("k1.kd", STT_OBJECT, ".rodata", 0, 64))
    text = k1.ljust(0x100, b"\0") + k2
    return build_elf(EM_AMDGPU, [Section(".text", data=text), Section(".rodata", data=rodata)],
                     symbols)  # fmt: skip


def test_a_sibling_kernel_and_the_symbol_slot_do_not_change_a_cubin_kernel():
    base = kernel_fingerprint(cubin(), "k1")
    assert base.scope == SCOPE_KERNEL and base.per_kernel and base.digest.startswith("sha256:")
    assert kernel_fingerprint(cubin(k2=b"\x03" * 48), "k1") == base
    assert kernel_fingerprint(cubin(symbol_slot=9), "k1") == base
    assert kernel_fingerprint(cubin(k2_regcount=99), "k1") == base
    # another function's EIATTR_REGCOUNT is not this kernel's
    assert kernel_fingerprint(cubin(k1_symbol=3, regcount=99), "k1") == kernel_fingerprint(
        cubin(k1_symbol=3, regcount=7), "k1"
    )
    assert kernel_fingerprint(cubin(), "k2") != base


@pytest.mark.parametrize(
    "edit",
    [
        {"k1": b"\x01" * 31 + b"\x09"},  # an instruction
        {"registers": 32},  # the register count in sh_info's top byte (older CUBINs)
        {"regcount": 10},  # EIATTR_REGCOUNT in .nv.info (CUDA 12/13 CUBINs)
        {"shared": 1024},  # static shared memory
        {"call": "bar"},  # a call that goes elsewhere, same placeholder bytes
    ],
    ids=["code", "registers", "regcount", "shared", "relocation"],
)
def test_a_cubin_kernel_edit_changes_its_fingerprint(edit):
    assert code_fingerprint(cubin(**edit), "k1") != code_fingerprint(cubin(), "k1")


def test_amd_descriptor_counts_but_not_its_distance_to_the_code():
    base = code_fingerprint(amd_object(), "k1")
    assert code_fingerprint(amd_object(k2=b"\xcc" * 80), "k1") == base
    assert code_fingerprint(amd_object(entry_offset=-4096), "k1") == base  # linked layout moved
    assert code_fingerprint(amd_object(lds=4096), "k1") != base  # same code, more LDS
    assert code_fingerprint(amd_object(k1=b"\xaa" * 60 + b"\xab" * 4), "k1") != base


def test_an_offload_bundle_fingerprints_like_the_elf_inside():
    elf = amd_object()
    triple = b"hipv4-amdgcn-amd-amdhsa--gfx942"
    header_size = len(BUNDLE_MAGIC) + 8 + 24 + len(triple)
    bundle = BUNDLE_MAGIC + struct.pack("<QQQQ", 1, header_size, len(elf), len(triple)) + triple
    assert code_fingerprint(bundle + elf, "k1") == code_fingerprint(elf, "k1")


@pytest.mark.parametrize(
    ("binary", "kernel", "reason"),
    [
        (cubin(), "k3", "no function symbol 'k3'"),
        (amd_object(with_kd=False), "k1", "no kernel descriptor k1.kd"),
        (b"not an elf at all", "k1", "not an ELF file"),
        (build_elf(62, [Section(".text", data=b"\x90")], []), "k1", "neither AMDGPU"),
        (cubin()[:200], "k1", ""),  # truncated: its tables point past the end
    ],
    ids=["missing-symbol", "missing-descriptor", "not-elf", "x86-64", "truncated"],
)
def test_whole_binary_fallback_says_why(binary, kernel, reason):
    fingerprint = kernel_fingerprint(binary, kernel)
    assert fingerprint.scope == SCOPE_BINARY and not fingerprint.per_kernel
    assert reason in fingerprint.reason and fingerprint.reason
    # the whole binary: any byte changes it
    assert kernel_fingerprint(binary + b"\0", kernel).digest != fingerprint.digest
