"""A fingerprint of ONE kernel's machine code, read from a compiled GPU binary.

The static gate (and the A/B path: "a byte-identical code object needs no timing") asks
whether a pull request changed the code of a given kernel. Hashing the whole binary says
too much: another kernel of the same file, a source comment that moves a line, or the file
name can change the file without changing this kernel. So we hash what the kernel runs:

- the bytes of its function symbol (STT_FUNC, `st_value`/`st_size` in its section),
- the relocations that patch those bytes (offset, type, target symbol name, addend), so a
  call that goes to another function shows even where the bytes hold only a placeholder,
- AMD (EM_AMDGPU, an HSA code object): its kernel descriptor `<kernel>.kd` (64 bytes: LDS,
  scratch, kernarg size, the register-block fields of COMPUTE_PGM_RSRC1/2/3; LLVM AMDGPUUsage
  "Kernel Descriptor"), so a resource change with identical instructions still shows. Its
  `kernel_code_entry_byte_offset` field is left out: it is the distance from the descriptor
  to the code, which moves when another kernel of a linked file grows.
- NVIDIA (EM_CUDA, a CUBIN): the kernel's entries in the `.nv.info` attribute section
  (register count EIATTR_REGCOUNT, frame and stack sizes; found by the kernel's symbol index,
  which is itself left out since it moves when a kernel is added), the register count older
  CUBINs keep in the top byte of `.text.<kernel>`'s `sh_info`, and the size of
  `.nv.shared.<kernel>` (static shared memory). The attribute layout (a format byte, an
  attribute byte, then a 16-bit value or a 16-bit size and that many bytes) is the one
  cuobjdump prints; NVRTC 13's sm_90 CUBINs were read to check it.

When the ELF cannot be parsed, or has no such symbol, the whole binary is hashed and the
`Fingerprint` says so (`scope="binary"` and the reason). Pure Python: the few ELF64
structures we need are read with `struct`, as runtime/amd_codeobject.py reads its notes.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from pytest_gpuperf.runtime.amd_codeobject import (
    BUNDLE_MAGIC,
    ELF_MAGIC,
    EM_AMDGPU,
    CodeObjectError,
    unbundle,
)

EM_CUDA = 190
SHT_SYMTAB = 2
SHT_RELA = 4
SHT_REL = 9
SHT_DYNSYM = 11
STT_FUNC = 2
AMD_KD_BYTES = 64
AMD_KD_ENTRY_OFFSET = slice(16, 24)  # kernel_code_entry_byte_offset (int64)
_DOMAIN = b"gpuperf-kernel-fingerprint-v1\0"

SCOPE_KERNEL = "kernel"
SCOPE_BINARY = "binary"


@dataclass(frozen=True)
class Fingerprint:
    """`digest` ("sha256:<hex>") of one kernel's code (`scope="kernel"`) or, when that could
    not be found, of the whole binary (`scope="binary"`, with `reason` saying why)."""

    digest: str
    scope: str
    reason: str = ""

    @property
    def per_kernel(self) -> bool:
        return self.scope == SCOPE_KERNEL


def code_fingerprint(binary: bytes, kernel: str) -> str:
    """ "sha256:<hex>" of `kernel`'s machine code in `binary` (see `kernel_fingerprint`)."""
    return kernel_fingerprint(binary, kernel).digest


def kernel_fingerprint(binary: bytes, kernel: str) -> Fingerprint:
    """The fingerprint of `kernel` in an AMD code object (bare ELF or offload bundle) or a
    CUBIN; the whole binary's hash, with the reason, when the kernel cannot be isolated."""
    try:
        elf = unbundle(binary) if binary.startswith(BUNDLE_MAGIC) else binary
        digest = _kernel_digest(_Elf(elf), kernel)
    except (CodeObjectError, _ElfError, struct.error, IndexError) as failure:
        return Fingerprint(_sha256(_DOMAIN, b"binary\0", binary), SCOPE_BINARY, str(failure))
    return Fingerprint(digest, SCOPE_KERNEL)


class _ElfError(Exception):
    pass


@dataclass(frozen=True)
class _Section:
    index: int
    name: str
    kind: int
    address: int
    offset: int
    size: int
    link: int
    info: int
    entry_size: int


@dataclass(frozen=True)
class _Symbol:
    index: int
    name: str
    kind: int
    section: int
    value: int
    size: int


class _Elf:
    """Sections and symbols of a little-endian ELF64 file, read on demand."""

    def __init__(self, data: bytes) -> None:
        if not data.startswith(ELF_MAGIC):
            raise _ElfError(f"not an ELF file (starts with {data[:4]!r})")
        if len(data) < 64 or data[4] != 2 or data[5] != 1:
            raise _ElfError("not a little-endian ELF64 file")
        self.data = data
        self.machine = _u16(data, 18)
        table, entry_size = _u64(data, 40), _u16(data, 58)
        count, names_index = _u16(data, 60), _u16(data, 62)
        raw = [
            struct.unpack_from("<IIQQQQIIQQ", data, table + i * entry_size) for i in range(count)
        ]
        names = raw[names_index] if names_index < count else None
        self.sections = [
            _Section(
                index=i,
                name=self._string(names[4], name) if names else "",
                kind=kind,
                address=address,
                offset=offset,
                size=size,
                link=link,
                info=info,
                entry_size=entsize,
            )
            for i, (
                name,
                kind,
                _flags,
                address,
                offset,
                size,
                link,
                info,
                _a,
                entsize,
            ) in enumerate(raw)
        ]

    def _string(self, table_offset: int, offset: int) -> str:
        end = self.data.index(b"\0", table_offset + offset)
        return self.data[table_offset + offset : end].decode(errors="replace")

    def section_bytes(self, section: _Section) -> bytes:
        return self.data[section.offset : section.offset + section.size]

    def symbols(self, table: _Section) -> list[_Symbol]:
        strings = self.sections[table.link]
        found = []
        step = table.entry_size or 24
        for index, position in enumerate(range(table.offset, table.offset + table.size, step)):
            name, info, _other, shndx, value, size = struct.unpack_from(
                "<IBBHQQ", self.data, position
            )
            found.append(
                _Symbol(index, self._string(strings.offset, name), info & 0xF, shndx, value, size)
            )
        return found

    def symbol_tables(self) -> list[_Section]:
        """.symtab first (relocatable objects, CUBINs), then .dynsym (linked code objects)."""
        tables = [s for s in self.sections if s.kind == SHT_SYMTAB]
        return tables + [s for s in self.sections if s.kind == SHT_DYNSYM]

    def find_symbol(self, name: str) -> tuple[_Section, _Symbol] | None:
        for table in self.symbol_tables():
            for symbol in self.symbols(table):
                if symbol.name == name and 0 < symbol.section < len(self.sections):
                    return table, symbol
        return None

    def symbol_bytes(self, symbol: _Symbol) -> bytes:
        """The symbol's bytes: `st_value` is section-relative in relocatable files and an
        address in linked ones; `offset + value - address` is right for both."""
        section = self.sections[symbol.section]
        start = section.offset + symbol.value - section.address
        if start < section.offset or start + symbol.size > section.offset + section.size:
            raise _ElfError(f"symbol {symbol.name!r} lies outside its section {section.name!r}")
        return self.data[start : start + symbol.size]

    def relocations(self, symtab: _Section, symbol: _Symbol) -> list[bytes]:
        """(offset within the symbol, type, target name, addend) of each relocation that
        patches the symbol's bytes, encoded for hashing."""
        section = self.sections[symbol.section]
        start, end = symbol.value - section.address, symbol.value - section.address + symbol.size
        found = []
        for rel in self.sections:
            if rel.kind not in (SHT_RELA, SHT_REL) or rel.info != section.index:
                continue
            targets = self.symbols(self.sections[rel.link])
            size = rel.entry_size or (24 if rel.kind == SHT_RELA else 16)
            for position in range(rel.offset, rel.offset + rel.size, size):
                offset, info = struct.unpack_from("<QQ", self.data, position)
                addend = struct.unpack_from("<q", self.data, position + 16)[0] if size >= 24 else 0
                if start <= offset < end:  # r_offset is section-relative where sh_info is set
                    target = targets[info >> 32].name if (info >> 32) < len(targets) else "?"
                    found.append(
                        struct.pack("<QI", offset - start, info & 0xFFFFFFFF)
                        + target.encode()
                        + struct.pack("<q", addend)
                    )
        return found


def _kernel_digest(elf: _Elf, kernel: str) -> str:
    if elf.machine not in (EM_AMDGPU, EM_CUDA):
        raise _ElfError(
            f"ELF machine {elf.machine} is neither AMDGPU ({EM_AMDGPU}) nor CUDA ({EM_CUDA})"
        )
    found = elf.find_symbol(kernel)
    if found is None or found[1].kind != STT_FUNC:
        raise _ElfError(f"no function symbol {kernel!r} in the binary's symbol tables")
    table, function = found
    parts = [
        b"code\0",
        elf.symbol_bytes(function),
        b"relocations\0",
        *elf.relocations(table, function),
    ]
    if elf.machine == EM_AMDGPU:
        parts += [b"descriptor\0", _amd_descriptor(elf, kernel)]
    else:
        parts += [b"resources\0", _cuda_resources(elf, function, kernel)]
    return _sha256(_DOMAIN, *parts)


def _amd_descriptor(elf: _Elf, kernel: str) -> bytes:
    found = elf.find_symbol(f"{kernel}.kd")
    if found is None:
        raise _ElfError(f"no kernel descriptor {kernel}.kd for {kernel!r}")
    descriptor = bytearray(elf.symbol_bytes(found[1])[:AMD_KD_BYTES])
    descriptor[AMD_KD_ENTRY_OFFSET] = bytes(8)
    return bytes(descriptor)


def _cuda_resources(elf: _Elf, function: _Symbol, kernel: str) -> bytes:
    registers = elf.sections[function.section].info >> 24
    shared = next((s.size for s in elf.sections if s.name == f".nv.shared.{kernel}"), 0)
    attributes = b"".join(
        struct.pack("<BI", attribute, value)
        for section in elf.sections
        if section.name == ".nv.info"
        for attribute, symbol, value in _nv_info_entries(elf.section_bytes(section))
        if symbol == function.index
    )
    return struct.pack("<IQ", registers, shared) + attributes


EIFMT_SVAL = 0x04  # a 16-bit size, then that many bytes
_PER_FUNCTION_ATTRIBUTES = {
    0x2F: "EIATTR_REGCOUNT",
    0x11: "EIATTR_FRAME_SIZE",
    0x12: "EIATTR_MIN_STACK_SIZE",
    0x23: "EIATTR_MAX_STACK_SIZE",
}


def _nv_info_entries(data: bytes):
    """(attribute, symbol index, value) of the per-function attributes in `.nv.info`."""
    position = 0
    while position + 4 <= len(data):
        fmt, attribute = data[position], data[position + 1]
        if fmt != EIFMT_SVAL:
            position += 4  # the other formats carry a 16-bit value inline
            continue
        size = _u16(data, position + 2)
        payload = data[position + 4 : position + 4 + size]
        position += 4 + size
        if attribute in _PER_FUNCTION_ATTRIBUTES and len(payload) == 8:
            symbol, value = struct.unpack("<II", payload)
            yield attribute, symbol, value


def _sha256(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(struct.pack("<Q", len(part)))
        digest.update(part)
    return "sha256:" + digest.hexdigest()


def _u16(data: bytes, offset: int) -> int:
    return struct.unpack_from("<H", data, offset)[0]


def _u64(data: bytes, offset: int) -> int:
    return struct.unpack_from("<Q", data, offset)[0]


EIATTR_MAX_THREADS = 0x05  # __launch_bounds__: three 32-bit block dimensions


def cubin_launch_bound(binary: bytes, kernel: str) -> int | None:
    """The thread count `kernel`'s `__launch_bounds__` allows (EIATTR_MAX_THREADS in its
    `.nv.info.<kernel>` section), None when it declares none or the CUBIN cannot be read."""
    try:
        elf = _Elf(binary)
    except (_ElfError, struct.error, IndexError):
        return None
    for section in elf.sections:
        if section.name != f".nv.info.{kernel}":
            continue
        data = elf.section_bytes(section)
        position = 0
        while position + 4 <= len(data):
            fmt, attribute = data[position], data[position + 1]
            if fmt != EIFMT_SVAL:
                position += 4
                continue
            size = _u16(data, position + 2)
            payload = data[position + 4 : position + 4 + size]
            position += 4 + size
            if attribute == EIATTR_MAX_THREADS and len(payload) == 12:
                x, y, z = struct.unpack("<III", payload)
                return x * y * z
    return None
