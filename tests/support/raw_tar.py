"""Tar members written header by header, for the cases `tarfile` cannot write: a GNU long
name next to a PAX path, PAX sparse files (formats 0.1 and 1.0, named by
GNU.sparse.name), global headers, any type flag, duplicates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

BLOCK = 512


def _pad(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def header(name: bytes, kind: bytes = b"0", size: int = 0, link: bytes = b"",
           mode: int = 0o644, gnu: bool = False) -> bytes:
    """One 512-byte header; NAME and LINK must fit their 100-byte fields."""
    block = bytearray(BLOCK)
    block[0:len(name[:100])] = name[:100]
    block[100:108] = b"%07o\0" % mode
    block[108:116] = b"%07o\0" % 0
    block[116:124] = b"%07o\0" % 0
    block[124:136] = b"%011o\0" % size
    block[136:148] = b"%011o\0" % 0
    block[156:157] = kind
    block[157:157 + len(link[:100])] = link[:100]
    block[257:265] = b"ustar  \0" if gnu else b"ustar\x0000"
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def pax_data(records: dict[str, bytes]) -> bytes:
    out = b""
    for key, value in records.items():
        body = b" " + key.encode() + b"=" + value + b"\n"
        length = len(body) + 1
        while len(str(length)) + len(body) != length:
            length = len(str(length)) + len(body)
        out += str(length).encode() + body
    return out


@dataclass
class Member:
    """One member and the records before it."""

    name: bytes
    kind: bytes = b"0"
    data: bytes = b""
    link: bytes = b""
    mode: int = 0o644
    pax: dict[str, bytes] = field(default_factory=dict)
    gnu_long_name: bytes = b""  # an L record before the header
    gnu_long_link: bytes = b""  # a K record before the header
    sparse: Sequence[tuple[int, bytes]] = ()  # PAX sparse 1.0: (offset, bytes) regions
    sparse_size: int = 0  # the file's logical size
    sparse_0_1: bool = False  # the map in GNU.sparse.map instead of the data

    def encode(self) -> bytes:
        out = b""
        if self.gnu_long_name:
            out += header(b"././@LongLink", b"L", len(self.gnu_long_name) + 1, gnu=True)
            out += _pad(self.gnu_long_name + b"\0")
        if self.gnu_long_link:
            out += header(b"././@LongLink", b"K", len(self.gnu_long_link) + 1, gnu=True)
            out += _pad(self.gnu_long_link + b"\0")
        data = self.data
        records = dict(self.pax)
        if self.sparse or self.sparse_size:
            numbers = [n for offset, chunk in self.sparse for n in (offset, len(chunk))]
            packed = b"".join(chunk for _, chunk in self.sparse)
            records["GNU.sparse.realsize" if not self.sparse_0_1 else "GNU.sparse.size"] = \
                str(self.sparse_size).encode()
            if self.sparse_0_1:
                records.update({"GNU.sparse.major": b"0", "GNU.sparse.minor": b"1",
                                "GNU.sparse.numblocks": str(len(self.sparse)).encode(),
                                "GNU.sparse.map": ",".join(map(str, numbers)).encode()})
                data = packed
            else:
                records.update({"GNU.sparse.major": b"1", "GNU.sparse.minor": b"0"})
                table = "\n".join(map(str, [len(self.sparse), *numbers])).encode() + b"\n"
                data = _pad(table) + packed
        if records:
            body = pax_data(records)
            out += header(b"PaxHeaders/x", b"x", len(body)) + _pad(body)
        out += header(self.name, self.kind, len(data), self.link, self.mode)
        return out + _pad(data)


def raw_tar(members: Sequence[Member], end: bool = True) -> bytes:
    return b"".join(m.encode() for m in members) + (bytes(2 * BLOCK) if end else b"")
