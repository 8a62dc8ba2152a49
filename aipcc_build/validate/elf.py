"""The CUDA release a CUDA runtime library was built as, read from its ELF file, never run.

`cudaRuntimeGetVersion(int *v)` stores a constant, 1000 * major + 10 * minor (12060 for
12.6): the exported function (or a function it calls directly) writes it through its
pointer argument. This finds the symbol in the dynamic symbol table, maps its address to a
file offset through the program headers, and follows direct calls a few levels deep
looking for that store: `movl $imm32, (%reg)` on x86_64; `movz wN, #imm16` followed by
`str wN, [xM]` on aarch64. Anything else (another machine, a stripped symbol, no such
store) answers None: the caller then knows the major from the file name only.
"""

from __future__ import annotations

import struct
from typing import Optional

SYMBOL = b"cudaRuntimeGetVersion"
EM_X86_64, EM_AARCH64 = 62, 183
_PT_LOAD, _SHT_DYNSYM = 1, 11
WINDOW = 512  # bytes of one function searched
MAX_FUNCTIONS = 12  # the exported function and what it calls, breadth first
MAX_DEPTH = 2


class _Elf:
    def __init__(self, data: bytes) -> None:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError("not a little-endian ELF64 file")
        self.data = data
        self.machine = struct.unpack_from("<H", data, 18)[0]
        phoff, shoff = struct.unpack_from("<QQ", data, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 54)
        self.loads = []  # (vaddr, offset, size) of the executable loadable segments
        for i in range(phnum):
            p_type, flags, offset, vaddr, _, filesz, _, _ = struct.unpack_from(
                "<IIQQQQQQ", data, phoff + i * phentsize)
            if p_type == _PT_LOAD and flags & 1:
                self.loads.append((vaddr, offset, filesz))
        self.sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                         for i in range(shnum)]

    def offset(self, address: int) -> Optional[int]:
        for vaddr, offset, size in self.loads:
            if vaddr <= address < vaddr + size:
                return offset + address - vaddr
        return None

    def symbol(self, name: bytes) -> Optional[int]:
        """The address of a defined dynamic symbol NAME."""
        for _, sh_type, _, _, offset, size, link, _, _, entsize in self.sections:
            if sh_type != _SHT_DYNSYM or not entsize or link >= len(self.sections):
                continue
            strings = self.sections[link][4]
            for at in range(offset, offset + size, entsize):
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
    """"12.6" for a CUDA 12.6 libcudart (x86_64 or aarch64); None when it cannot tell."""
    try:
        elf = _Elf(data)
        decode = {EM_X86_64: _x86_64, EM_AARCH64: _aarch64}.get(elf.machine)
        start = elf.symbol(SYMBOL) if decode else None
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
