"""Small ELF64 shared objects built byte by byte, for the static version read of a CUDA
runtime: an exported `cudaRuntimeGetVersion` whose code stores the version as NVIDIA's
libcudart does (x86_64: `movl $imm32, (%rdi)`, aarch64: `movz` then `str`), directly or in
a function it calls."""

from __future__ import annotations

import struct

EM_X86_64, EM_AARCH64 = 62, 183
SYMBOL = b"cudaRuntimeGetVersion"
BASE = 0x400000  # where the loadable segment sits: addresses differ from file offsets
TEXT = 0x200  # file offset of the code
INNER = 0x40  # offset of the called function within the code


def _x86_64(version: int, via_call: bool) -> bytes:
    store = b"\x48\x85\xff\x74\x08" + b"\xc7\x07" + struct.pack("<i", version) + b"\x31\xc0\xc3"
    if not via_call:
        return store
    # push %rbp; mov %rsp,%rbp; movl $0x0,-0xc4(%rbp) (a store NVIDIA's code also has, not
    # through the argument); call inner; pop %rbp; ret
    outer = b"\x55\x48\x89\xe5" + b"\xc7\x85\x3c\xff\xff\xff" + struct.pack("<i", 12345)
    call_at = len(outer)
    outer += b"\xe8" + struct.pack("<i", INNER - (call_at + 5)) + b"\x5d\xc3"
    return outer.ljust(INNER, b"\xcc") + store


def _aarch64(version: int, via_call: bool) -> bytes:
    def words(*values: int) -> bytes:
        return struct.pack(f"<{len(values)}I", *values)

    store = words(0xAA0003E1,  # mov x1, x0
                  0x52800000 | (version << 5) | 2,  # movz w2, #version
                  0x52800000,  # movz w0, #0
                  0xB9000022,  # str w2, [x1]
                  0xD65F03C0)  # ret
    if not via_call:
        return store
    # stp x29, x30, [sp, #-16]!; movz w3, #120 (no store of it); bl inner; ret
    outer = words(0xA9BF7BFD, 0x52800F03)
    bl_at = len(outer)
    outer += words(0x94000000 | ((INNER - bl_at) // 4), 0xD65F03C0)
    return outer.ljust(INNER, b"\0") + store


def runtime_elf(machine: int, version: int, via_call: bool = True,
                symbol: bytes = SYMBOL) -> bytes:
    """A shared object exporting SYMBOL, whose code stores VERSION (12060 for 12.6)."""
    code = (_x86_64 if machine == EM_X86_64 else _aarch64)(version, via_call)
    dynstr = b"\0" + symbol + b"\0"
    dynsym = bytes(24) + struct.pack("<IBBHQQ", 1, 0x12, 0, 1, BASE + TEXT, len(code))
    dynsym_at = TEXT + len(code) + (-len(code) % 8)
    dynstr_at = dynsym_at + len(dynsym)
    sections_at = dynstr_at + len(dynstr) + (-(dynstr_at + len(dynstr)) % 8)
    end = sections_at + 4 * 64

    def section(kind: int, offset: int, size: int, link: int = 0, entsize: int = 0) -> bytes:
        return struct.pack("<IIQQQQIIQQ", 0, kind, 0, 0, offset, size, link, 0, 8, entsize)

    header = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
              + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, BASE + TEXT, 64, sections_at,
                            0, 64, 56, 1, 64, 4, 0))
    program = struct.pack("<IIQQQQQQ", 1, 5, 0, BASE, BASE, end, end, 0x1000)
    data = bytearray(end)
    data[:64] = header
    data[64:64 + 56] = program
    data[TEXT:TEXT + len(code)] = code
    data[dynsym_at:dynsym_at + len(dynsym)] = dynsym
    data[dynstr_at:dynstr_at + len(dynstr)] = dynstr
    sections = (bytes(64) + section(1, TEXT, len(code))
                + section(11, dynsym_at, len(dynsym), link=3, entsize=24)
                + section(3, dynstr_at, len(dynstr)))
    data[sections_at:end] = sections
    return bytes(data)


def dynsym_bomb(copies: int) -> bytes:
    """A small x86_64 shared object whose section table holds COPIES dynamic symbol tables,
    each spanning the whole file: a reader searching every table for a symbol reads the
    file COPIES times (1,000 copies in 77 kB)."""
    runtime = bytearray(runtime_elf(EM_X86_64, 12080, via_call=False))
    sections_at = len(runtime) + (-len(runtime) % 8)
    size = sections_at + 64 * (copies + 1)
    table = struct.pack("<IIQQQQIIQQ", 0, 11, 0, 0, 0, size, 0, 0, 8, 24)
    data = runtime.ljust(sections_at, b"\0") + bytes(64) + table * copies
    struct.pack_into("<Q", data, 40, sections_at)
    struct.pack_into("<H", data, 60, copies + 1)
    return bytes(data)


def dynamic_elf(soname: bytes, needed: tuple[bytes, ...] = (), padding: int = 0) -> bytes:
    """A small x86_64 shared object with a dynamic section: its SONAME and NEEDED entries
    (PADDING zero bytes at its end make it as large as a real library)."""
    strings = b"\0"
    offsets = []
    for name in (soname, *needed):
        offsets.append(len(strings))
        strings += name + b"\0"
    dynstr_at = 64 + 2 * 56
    dynamic_at = dynstr_at + len(strings) + (-(dynstr_at + len(strings)) % 8)
    entries = [(5, BASE + dynstr_at), (10, len(strings)), (14, offsets[0])]
    entries += [(1, offset) for offset in offsets[1:]]
    dynamic = b"".join(struct.pack("<qQ", tag, value) for tag, value in [*entries, (0, 0)])
    end = dynamic_at + len(dynamic)
    header = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
              + struct.pack("<HHIQQQIHHHHHH", 3, EM_X86_64, 1, 0, 64, 0, 0, 64, 56, 2, 64,
                            0, 0))
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, BASE, BASE, end, end, 0x1000)
    dyn = struct.pack("<IIQQQQQQ", 2, 6, dynamic_at, BASE + dynamic_at, BASE + dynamic_at,
                      len(dynamic), len(dynamic), 8)
    data = bytearray(end)
    data[:64 + 2 * 56] = header + load + dyn
    data[dynstr_at:dynstr_at + len(strings)] = strings
    data[dynamic_at:end] = dynamic
    return bytes(data) + bytes(padding)
