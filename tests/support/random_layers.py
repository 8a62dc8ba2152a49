"""Random layers (hypothesis) for the differential tests of the scan's one loop over tar
headers (`overlay.Unpacker.walk`) against the reader's and `Unpacker.add`'s full code:
mixes of plain files and directories, hard links and symlinks, whiteouts and opaque
markers, PAX records and GNU long names, odd modes, duplicates, names the detector wants,
damaged bytes, and streams that hand over their bytes in pieces of any size."""

from __future__ import annotations

import io
from typing import Optional

from hypothesis import strategies as st

from tests.support.raw_tar import Member, raw_tar

# Where members go: a few directories (a symlink may stand at one, a file replace one),
# and names, mostly plain and few enough to meet again: a duplicate, a file over a
# directory, a whiteout of a member, a hard link to one. Some the scan's detector takes (a
# CUDA tree, a version file, a shared object, a dist-info, pip's config).
_DIRECTORIES = ["", "a", "a/b", "usr", "usr/lib", "c", "usr/local/cuda-12.8", "a/b/c"]
_LEAVES = [f"f{n}" for n in range(8)] + ["a", "b", "c", "usr", "lib"]
_ODD_LEAVES = ["version.json", "x.so.1", "pkg.dist-info", "pip.conf", ".wh.f1", ".wh.b",
               ".wh..wh..opq", ".hidden", ".", "..", "", "f1/../f2", "f1//f3"]
_MODES = [0o644, 0o755, 0o600, 0o777, 0o4755, 0o2755, 0o666, 0o1777, 0o7777]
# True once in ten draws, once in three (hypothesis favours the ends of a range of integers)
_rarely = st.sampled_from([False] * 4 + [True] + [False] * 5)
_sometimes = st.sampled_from([False, True, False])


@st.composite
def _path(draw: st.DrawFn) -> str:
    leaf = draw(st.sampled_from(_ODD_LEAVES if draw(_rarely) else _LEAVES))
    return "/".join(part for part in (draw(st.sampled_from(_DIRECTORIES)), leaf) if part)


@st.composite
def _name(draw: st.DrawFn) -> bytes:
    prefix = draw(st.sampled_from(["", "", "", "", "./", "/"]))
    suffix = "/" if draw(_sometimes) else ""
    return (prefix + draw(_path()) + suffix).encode()


@st.composite
def _member(draw: st.DrawFn) -> Member:
    kind = draw(st.sampled_from([b"0", b"\0", b"5"] * 4
                                + [b"2", b"2", b"1", b"1", b"3", b"6"]
                                + [b"7", b"g"] * draw(_rarely)))
    if kind == b"2" and draw(_sometimes):  # a link to a directory, members written through
        name = draw(st.sampled_from(_DIRECTORIES[1:])).encode()
        link = draw(st.sampled_from(["a", "/a/b", "../usr", "usr/lib", "nowhere"])).encode()
    else:
        name = draw(_name())
        link = draw(_name()) if kind in (b"1", b"2") or draw(_rarely) else b""
    data = draw(st.sampled_from([b"", b"", b"x" * 700,
                                 b'{"cuda": {"version": "12.9.1"}}',
                                 b"[global]\nindex-url = https://example/simple\n"]))
    if kind not in (b"0", b"\0", b"7") and draw(st.sampled_from([True] * 20 + [False])):
        data = b""  # a type that holds none (Go reads no data for it: headers follow)
    mode = draw(st.sampled_from(_MODES)) if draw(_sometimes) else 0o644
    member = Member(name, kind, data, link, mode)
    extra = draw(st.integers(0, 16))
    if extra == 1:  # a PAX path, sometimes longer than the header holds
        member.pax = {"path": name + b"/" + b"n" * draw(st.sampled_from([1, 120]))}
    elif extra == 2:  # PAX records that do not rename it
        member.pax = {"mtime": draw(st.sampled_from([b"1.5", b"-3", b"x"])), "uid": b"0"}
    elif extra == 3:
        member.gnu_long_name = b"l/" * 60 + name
    elif extra == 4:
        member.pax = {"linkpath": b"a/b"}
    return member


@st.composite
def layers(draw: st.DrawFn) -> bytes:
    """A layer's tar: random members, sometimes cut short or with a byte changed."""
    members = draw(st.lists(_member(), min_size=1, max_size=40))
    for number, member in enumerate(members):
        if member.kind == b"1" and number and not draw(_sometimes):  # to a member before
            member.link = members[draw(st.integers(0, number - 1))].name
    if draw(_sometimes):  # most layers name each path once
        names = set()
        members = [m for m in members if not (m.name.strip(b"/") in names
                                              or names.add(m.name.strip(b"/")))]
    data = bytearray(raw_tar(members, end=not draw(_rarely)))
    if data and draw(_rarely):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    if data and draw(_rarely):
        del data[draw(st.integers(0, len(data) - 1)):]
    return bytes(data)


class Pieces(io.RawIOBase):
    """DATA handed over in pieces of the SIZES given, in turn (a header or a member's data
    across the reader's buffers), passed over by `skip` when SEEKABLE (containers-storage's
    layers read in place)."""

    def __init__(self, data: bytes, sizes: list[int], seekable: bool) -> None:
        super().__init__()
        self._data = data
        self._pos = 0
        self._sizes = sizes or [1 << 20]
        self._turn = 0
        if seekable:
            self.skip = self._skip

    def read(self, size: Optional[int] = -1) -> bytes:
        piece = self._sizes[self._turn % len(self._sizes)]
        self._turn += 1
        want = piece if size is None or size < 0 else min(size, piece)
        out = self._data[self._pos:self._pos + want]
        self._pos += len(out)
        return out

    def _skip(self, size: int) -> int:
        size = min(size, len(self._data) - self._pos)
        self._pos += size
        return size


pieces = st.tuples(st.lists(st.sampled_from([1, 100, 512, 513, 1000, 4096, 1 << 20, 1 << 20]),
                            max_size=3), st.booleans())
