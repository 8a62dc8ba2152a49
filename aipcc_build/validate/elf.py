"""What an ELF shared object says about the toolkit it was built for, read, never run.

Two readings, each linear in the bytes it is given and bounded by the limits below (a
file past a limit is not read, and the caller warns naming it):

- `dynamic_entries`: the `NEEDED` libraries and the `RUNPATH`/`RPATH` of a shared object,
  from its program headers and its dynamic section, reading the file from its start only
  as far as the dynamic section reaches and holding only its first bytes (a 500 MB ROCm
  provider library keeps both in its first 15 MB). `libamdhip64.so.7` names the ROCm major a
  binary was linked against, `libcudart.so.12` the CUDA major, `/opt/rocm-7.2.4/lib` the
  ROCm release.
- `runtime_release`: the release of a CUDA runtime whose name gives its major only.
  `cudaRuntimeGetVersion(int *v)` stores a constant, 1000 * major + 10 * minor (12060 for
  12.6): the exported function (or a function it calls directly) writes it through its
  pointer argument. This finds the symbol in the dynamic symbol table, maps its address to
  a file offset through the program headers, and follows direct calls a few levels deep
  looking for that store: `movl $imm32, (%reg)` on x86_64; `movz wN, #imm16` followed by
  `str wN, [xM]` on aarch64. Anything else (another machine, a stripped symbol, no such
  store) answers None: the caller then knows the major from the file name only.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from ..patterns import lazy
from .results import Evidence, Hazard

SYMBOL = b"cudaRuntimeGetVersion"
EM_X86_64, EM_AARCH64 = 62, 183
_PT_LOAD, _PT_DYNAMIC, _SHT_DYNSYM = 1, 2, 11
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = \
    0, 1, 5, 10, 14, 15, 29
WINDOW = 512  # bytes of one function searched
MAX_FUNCTIONS = 12  # the exported function and what it calls, breadth first
MAX_DEPTH = 2
# Real shared objects have about ten program headers and fewer than a hundred sections.
MAX_PROGRAM_HEADERS = 256
MAX_SECTIONS = 4096
# A shared object's dynamic section sits after its code (ROCm's 513 MB ONNX Runtime
# provider: at 14.5 MB; triton's libtriton.so and ONNX Runtime's CUDA provider: past 64 MB),
# its string table in the first segment, before the code. The first KEPT_PREFIX bytes are
# held for the strings; the file is read (passed over) up to DYNAMIC_READ_LIMIT bytes.
KEPT_PREFIX = 16 << 20
DYNAMIC_READ_LIMIT = 4 << 30
MAX_DYNAMIC_ENTRIES = 4096  # a real dynamic section has a few dozen
MAX_STRING = 1 << 16  # one NEEDED name or search path (JAX's ROCm 7 plugin: 5 kB of RUNPATH)


class ElfLimit(ValueError):
    """The file is past one of this module's stated limits: not read (the caller warns)."""


@dataclass(frozen=True)
class DynamicEntries:
    needed: tuple[str, ...]  # "libamdhip64.so.7", "libcudart.so.12"
    search_path: tuple[str, ...]  # RUNPATH, else RPATH, split: "/opt/rocm-7.2.4/lib"
    soname: Optional[str] = None  # its own name for the loader: "libamdhip64.so.7"


def _elf64(head: bytes) -> None:
    if head[:4] != b"\x7fELF" or len(head) < 64 or head[4] != 2 or head[5] != 1:
        raise ValueError("not a little-endian ELF64 file")


def _program_headers(data: bytes, at: Optional[int] = None
                     ) -> list[tuple[int, int, int, int, int]]:
    """(type, flags, offset, vaddr, filesz) of each program header: at the offset the ELF
    header names, or AT."""
    phoff = struct.unpack_from("<Q", data, 32)[0] if at is None else at
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    if phnum > MAX_PROGRAM_HEADERS:
        raise ElfLimit(f"{phnum} program headers, more than {MAX_PROGRAM_HEADERS}")
    if phentsize < 56:
        raise ValueError("program headers too small")
    headers = []
    for i in range(phnum):
        p_type, flags, offset, vaddr, _, filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize)
        headers.append((p_type, flags, offset, vaddr, filesz))
    return headers


def _file_offset(headers: list[tuple[int, int, int, int, int]], address: int
                 ) -> Optional[int]:
    for p_type, _, offset, vaddr, filesz in headers:
        if p_type == _PT_LOAD and vaddr <= address < vaddr + filesz:
            return offset + address - vaddr
    return None


class _Forward:
    """A file read once from its start: the first KEPT_PREFIX bytes are kept (headers,
    and the string table, which linkers put in the first segment); later ranges are read
    when reached, what lies between is passed over, never held."""

    def __init__(self, read: Callable[[int], bytes],
                 skip: Optional[Callable[[int], int]]) -> None:
        self.read, self.skip = read, skip
        # The prefix as the pieces read, not copied into one buffer (a shared object's
        # first 16 MiB are mostly code no range is asked of).
        self.kept: list[bytes] = []
        self.kept_size = 0
        self.position = 0  # bytes of the file consumed

    def _next(self, size: int) -> bytes:
        piece = self.read(size)
        if self.kept_size == self.position < KEPT_PREFIX:
            part = piece[:KEPT_PREFIX - self.position]
            self.kept.append(part)
            self.kept_size += len(part)
        self.position += len(piece)
        return piece

    def _kept_range(self, offset: int, end: int) -> bytes:
        """Bytes OFFSET to END of the kept prefix (which holds them)."""
        parts = []
        start = 0
        for piece in self.kept:
            stop = start + len(piece)
            if stop > offset:
                parts.append(piece[max(offset - start, 0):end - start])
                if stop >= end:
                    break
            start = stop
        return b"".join(parts)

    def at(self, offset: int, size: int) -> Optional[bytes]:
        """The SIZE bytes at OFFSET; None past the file's end."""
        end = offset + size
        if end > DYNAMIC_READ_LIMIT:
            raise ElfLimit(f"its dynamic section or strings end past byte {DYNAMIC_READ_LIMIT}")
        if end <= KEPT_PREFIX:
            while self.position < end:
                if not self._next(min(end - self.position, 1 << 20)):
                    return None
            return self._kept_range(offset, end)
        if offset < self.position:
            raise ElfLimit(f"its string table lies past the first {KEPT_PREFIX} bytes, "
                           "before its dynamic section")
        while self.position < offset:
            if self.skip is not None and self.position >= KEPT_PREFIX:
                passed = self.skip(offset - self.position)
                self.position += passed
                if not passed:
                    return None
            elif not self._next(min(offset - self.position, 1 << 20)):
                return None
        out = bytearray()
        while len(out) < size:
            piece = self._next(min(size - len(out), 1 << 20))
            if not piece:
                return None
            out.extend(piece)
        return bytes(out)


def dynamic_entries(read: Callable[[int], bytes],
                    skip: Optional[Callable[[int], int]] = None) -> Optional[DynamicEntries]:
    """NEEDED and RUNPATH (or RPATH) of the ELF64 file READ yields from its start (READ(n)
    answers at most n more bytes, fewer at its end; SKIP(n), when given, passes over at
    most n and answers how many); None for a file that is not a
    little-endian ELF64 one or has no dynamic section. Holds at most KEPT_PREFIX bytes
    and the dynamic section, reads at most DYNAMIC_READ_LIMIT bytes; raises ElfLimit for
    a file past a limit."""
    file = _Forward(read, skip)
    try:
        head = file.at(0, 64)
        if head is None:
            return None
        _elf64(head)
        phoff = struct.unpack_from("<Q", head, 32)[0]
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        if phnum > MAX_PROGRAM_HEADERS:
            raise ElfLimit(f"{phnum} program headers, more than {MAX_PROGRAM_HEADERS}")
        table = file.at(phoff, phentsize * phnum)
        if table is None:
            return None
        headers = _program_headers(head[:32] + struct.pack("<Q", 0) + head[40:] + table,
                                   at=64)
        dynamic = next(((offset, size) for p_type, _, offset, _, size in headers
                        if p_type == _PT_DYNAMIC), None)
        if dynamic is None:
            return None
        offset, size = dynamic
        count = min(size // 16, MAX_DYNAMIC_ENTRIES + 1)
        section = file.at(offset, 16 * count)
        if section is None:
            return None
        needed: list[int] = []
        runpath: Optional[int] = None
        rpath: Optional[int] = None
        soname: Optional[int] = None
        strtab = strsz = None
        for i in range(count):
            tag, value = struct.unpack_from("<qQ", section, 16 * i)
            if tag == _DT_NULL:
                break
            if i == MAX_DYNAMIC_ENTRIES:
                raise ElfLimit(f"more than {MAX_DYNAMIC_ENTRIES} dynamic entries")
            if tag == _DT_NEEDED:
                needed.append(value)
            elif tag == _DT_STRTAB:
                strtab = value
            elif tag == _DT_STRSZ:
                strsz = value
            elif tag == _DT_RUNPATH:
                runpath = value
            elif tag == _DT_RPATH:
                rpath = value
            elif tag == _DT_SONAME:
                soname = value
        if strtab is None or strsz is None:
            return None
        start = _file_offset(headers, strtab)
        if start is None:
            return None
        strings = file.at(start, min(strsz, KEPT_PREFIX))
        if strings is None:
            return None
    except ElfLimit:
        raise
    except (ValueError, struct.error):
        return None

    def text(at: int) -> str:
        end = strings.find(b"\0", at, at + MAX_STRING)
        return strings[at:end if end >= 0 else at].decode("utf-8", "replace")

    path = runpath if runpath is not None else rpath
    search = tuple(p for p in text(path).split(":") if p) if path is not None else ()
    return DynamicEntries(tuple(text(n) for n in needed if n < len(strings)), search,
                          text(soname) if soname is not None and soname < len(strings)
                          else None)


class _Elf:
    def __init__(self, data: bytes) -> None:
        _elf64(data[:64])
        self.data = data
        self.machine = struct.unpack_from("<H", data, 18)[0]
        self.loads = [(vaddr, offset, filesz) for p_type, flags, offset, vaddr, filesz
                      in _program_headers(data) if p_type == _PT_LOAD and flags & 1]
        shoff = struct.unpack_from("<Q", data, 40)[0]
        shentsize, shnum = struct.unpack_from("<HH", data, 58)
        if shnum > MAX_SECTIONS:
            raise ElfLimit(f"{shnum} section headers, more than {MAX_SECTIONS}")
        self.sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                         for i in range(shnum)]
        tables = [s for s in self.sections if s[1] == _SHT_DYNSYM]
        if len(tables) > 1:
            # The ELF format allows one; several over the same bytes would make a search
            # for a symbol read the file once per copy.
            raise ElfLimit(f"{len(tables)} dynamic symbol tables (SHT_DYNSYM), where an "
                           "ELF file has one")
        self.dynsym = tables[0] if tables else None

    def offset(self, address: int) -> Optional[int]:
        for vaddr, offset, size in self.loads:
            if vaddr <= address < vaddr + size:
                return offset + address - vaddr
        return None

    def symbol(self, name: bytes) -> Optional[int]:
        """The address of a defined dynamic symbol NAME: one pass over the one table."""
        if self.dynsym is None:
            return None
        _, _, _, _, offset, size, link, _, _, entsize = self.dynsym
        if entsize < 24 or link >= len(self.sections):
            return None
        strings = self.sections[link][4]
        end = min(offset + size, len(self.data))
        for at in range(offset, end - entsize + 1, entsize):
            st_name, _, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", self.data, at)
            start = strings + st_name
            if shndx and value and self.data[start:start + len(name) + 1] == name + b"\0":
                return int(value)
        return None


def _plausible(value: int) -> bool:
    return 9000 <= value < 40000 and value % 10 == 0


def _x86_64(code: bytes, address: int) -> tuple[Optional[int], list[int]]:
    calls: list[int] = []
    for i in range(len(code) - 5):
        byte = code[i]
        # c7 /0 with mod 00 and a plain base register: movl $imm32, (%reg)
        if byte == 0xC7 and code[i + 1] in (0x00, 0x01, 0x02, 0x03, 0x06, 0x07) \
                and i + 6 <= len(code):
            value = struct.unpack_from("<i", code, i + 2)[0]
            if _plausible(value):
                return value, calls
        elif byte == 0xE8:  # call rel32
            calls.append(address + i + 5 + struct.unpack_from("<i", code, i + 1)[0])
    return None, calls


def _aarch64(code: bytes, address: int) -> tuple[Optional[int], list[int]]:
    calls: list[int] = []
    words = struct.unpack_from(f"<{len(code) // 4}I", code)
    for i, word in enumerate(words):
        if word & 0xFFE00000 == 0x52800000:  # movz wN, #imm16 (no shift)
            value, register = (word >> 5) & 0xFFFF, word & 31
            for later in words[i + 1:i + 5]:
                # str wN, [xM, #0]
                if later & 0xFFFFFC1F == 0xB9000000 | register and _plausible(value):
                    return value, calls
        elif word >> 26 == 0x25:  # bl imm26
            offset = word & 0x3FFFFFF
            offset -= (1 << 26) if offset & (1 << 25) else 0
            calls.append(address + 4 * i + 4 * offset)
    return None, calls


def runtime_release(data: bytes) -> Optional[str]:
    """"12.6" for a CUDA 12.6 libcudart (x86_64 or aarch64); None when it cannot tell.
    Raises ElfLimit for a file past a limit."""
    try:
        elf = _Elf(data)
        decode = {EM_X86_64: _x86_64, EM_AARCH64: _aarch64}.get(elf.machine)
        start = elf.symbol(SYMBOL) if decode else None
    except ElfLimit:
        raise
    except (ValueError, struct.error, IndexError):
        return None
    if decode is None or start is None:
        return None
    queue, seen = [(start, 0)], {start}
    while queue and len(seen) <= MAX_FUNCTIONS:
        address, depth = queue.pop(0)
        offset = elf.offset(address)
        if offset is None:
            continue
        value, calls = decode(elf.data[offset:offset + WINDOW], address)
        if value is not None:
            return f"{value // 1000}.{value % 1000 // 10}"
        if depth < MAX_DEPTH:
            for call in calls:
                if call not in seen:
                    seen.add(call)
                    queue.append((call, depth + 1))
    return None


# The hazard kind of a file past one of the ELF reader's limits (not read).
ELF_LIMIT_HAZARD = "elf-limit"
_SONAME_VERSION = lazy(r"\d+(?:\.\d+)*")


def soname_version(stem: str, soname: Optional[str]) -> Optional[str]:
    """The version a library's SONAME gives it, when the SONAME names the same library:
    ("amdhip64", "libamdhip64.so.7") -> "7"; anything else -> None."""
    if not soname or not soname.startswith(f"lib{stem}.so."):
        return None
    version = soname[len(stem) + 7:]
    return version if _SONAME_VERSION.fullmatch(version) else None


def runtime_evidence(path: str, data: bytes, major: str
                     ) -> tuple[Evidence, Optional[Hazard]]:
    """A vendored CUDA runtime at PATH whose name gives its MAJOR at most ("" for none):
    its release read from its code DATA, else its name's major; a hazard when its code is
    past a limit."""
    hazard = None
    try:
        release = runtime_release(data)
    except ElfLimit as exc:
        hazard = Hazard(ELF_LIMIT_HAZARD, path, f"{exc}: not read", severe=False)
        release = None
    if release is not None and (not major or release.split(".")[0] == major):
        return Evidence(
            "library", path, "cuda", "cuda-runtime", release, release, detail=(
                "a vendored copy; its release read from its code: the version "
                "cudaRuntimeGetVersion returns")), hazard
    why = "its code holds no version this reader knows" if release is None else \
        f"its code says {release}, its name {major}"
    return Evidence(
        "library", path, "cuda", "cuda-runtime", major, major or None,
        detail=f"a vendored copy; {why}" + (f": CUDA {major} by its name" if major else "")
    ), hazard
