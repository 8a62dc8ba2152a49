"""Crafted device code: CUDA fatbinaries and clang offload bundles, plain and compressed,
inside bytes that start like an ELF file, laid out as nvcc and clang lay them out."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import zstandard

ELF_HEAD = b"\x7fELF\x02\x01\x01" + bytes(57)


def fatbin_entry(kind: int, arch: int, flags: int = 0, payload: bytes = b"x" * 40,
                 header: int = 64, claimed: int | None = None) -> bytes:
    """One entry: KIND 1 PTX or 2 SASS, ARCH 80 for sm_80, FLAGS 0x100000 for `a`; its
    header HEADER bytes long, claiming CLAIMED."""
    head = bytearray(header)
    struct.pack_into("<HHIQ", head, 0, kind, 0x101, header if claimed is None else claimed,
                     len(payload))
    struct.pack_into("<I", head, 28, arch)
    struct.pack_into("<Q", head, 40, flags)
    return bytes(head) + payload


def fatbin(entries: Sequence[bytes], size: int | None = None) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body) if size is None else size) + body


def bundle(triples: Sequence[str], count: int | None = None, code: bytes = b"\0" * 64,
           offset: int | None = None, size: int | None = None) -> bytes:
    """A plain clang offload bundle of one code object per triple."""
    head_size = 24 + 8 + sum(24 + len(t) for t in triples)
    out = bytearray(b"__CLANG_OFFLOAD_BUNDLE__")
    out += struct.pack("<Q", len(triples) if count is None else count)
    for number, triple in enumerate(triples):
        at = head_size + number * len(code) if offset is None else offset
        out += struct.pack("<QQQ", at, len(code) if size is None else size, len(triple))
        out += triple.encode()
    return bytes(out) + code * len(triples)


def compressed(plain: bytes, version: int = 2, method: int = 1,
               total: int | None = None) -> bytes:
    """A CCOB bundle: version 1 (no total size), 2 (32-bit sizes) or 3 (64-bit sizes)."""
    frame = zstandard.ZstdCompressor().compress(plain) if method == 1 else \
        zlib.compress(plain)
    layout = {1: "<4sHHIQ", 2: "<4sHHIIQ", 3: "<4sHHQQQ"}[version]
    header_size = struct.calcsize(layout)
    whole = header_size + len(frame) if total is None else total
    sizes = (len(plain),) if version == 1 else (whole, len(plain))
    return struct.pack(layout, b"CCOB", version, method, *sizes, 0x1234) + frame


def elf_with(*parts: tuple[int, bytes], tail: int = 256) -> bytes:
    """ELF-looking bytes with each (offset, bytes) of PARTS placed at its offset."""
    end = max(offset + len(data) for offset, data in parts) + tail
    out = bytearray(end)
    out[:len(ELF_HEAD)] = ELF_HEAD
    for offset, data in parts:
        out[offset:offset + len(data)] = data
    return bytes(out)
