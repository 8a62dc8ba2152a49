"""The tar walker names members as Go's archive/tar does (what the engines unpack with)."""

from __future__ import annotations

import io
import tarfile

import pytest

from aipcc_build.imagefs.paths import clean, climbs, duplicate_key, whiteout_of
from aipcc_build.imagefs.tar import MAX_SPECIAL_SIZE, TarError, TarWalker
from tests.support.layers import member, tar_bytes
from tests.support.raw_tar import Member, header, raw_tar


def test_walker_reads_pax_and_gnu_long_names_and_links() -> None:
    long = "usr/lib/python3.9/site-packages/" + "x" * 150 + "/nvidia_cublas_cu12-12.8.4.1.dist-info"
    for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        data = tar_bytes([member(f"{long}/METADATA", b"Name: x\n"),
                          member("a/link", kind=tarfile.SYMTYPE, link="../" + "y" * 120),
                          member("a/hard", kind=tarfile.LNKTYPE, link="a/file")], fmt)
        entries = [(e.name.decode(), e.kind, e.link.decode()) for e in TarWalker(io.BytesIO(data))]
        assert entries == [(f"{long}/METADATA", "0", ""), ("a/link", "2", "../" + "y" * 120),
                           ("a/hard", "1", "a/file")]


def test_names_land_where_the_engine_puts_them() -> None:
    assert clean("./usr/lib/x") == "/usr/lib/x"
    assert clean("/etc/passwd") == "/etc/passwd"
    assert clean("usr/lib/../../etc/x/") == "/etc/x"
    # The engine unpacks chrooted: `..` stops at the root, for relative names too.
    assert clean("/../../etc") == clean("a/../../etc") == clean("../etc") == "/etc"
    assert clean(".") == clean("./") == clean("..") == "/"
    assert climbs("a/../../etc") and climbs("..") and not climbs("/../etc")
    assert not climbs("a/../b")
    # What containers/storage counts as one name (a second refuses the layer).
    assert duplicate_key("./f") == duplicate_key("a/../f") == duplicate_key("f/") == "f"
    assert duplicate_key("/f") == "/f" and duplicate_key("../f") == "../f"
    assert duplicate_key("/../f") == "/f" and duplicate_key("./") == "."
    assert whiteout_of("/a/.wh.b") == ("remove", "/a/b")
    assert whiteout_of("/.wh.b") == ("remove", "/b")
    assert whiteout_of("/a/.wh..wh..opq") == ("opaque", "/a")
    assert whiteout_of("/.wh..wh..opq") == ("opaque", "/")
    assert whiteout_of("/.wh..wh.plnk") == ("meta", "/.wh..wh.plnk")
    assert whiteout_of("/a/b") is None


def walk(data: bytes) -> list[tuple[str, str, str, bytes]]:
    walker = TarWalker(io.BytesIO(data))
    return [(e.name.decode(), e.kind, e.link.decode(), walker.read_data()) for e in walker]


def test_a_gnu_long_name_wins_over_a_pax_path_as_in_go() -> None:
    data = raw_tar([Member(b"hdr", data=b"x", gnu_long_name=b"gnu/name",
                           pax={"path": b"pax/name"}),
                    Member(b"l", b"2", gnu_long_link=b"gnu/target",
                           pax={"linkpath": b"pax/target"}),
                    Member(b"kept", data=b"k", pax={"path": b""})])
    assert walk(data) == [("gnu/name", "0", "", b"x"), ("l", "2", "gnu/target", b""),
                          ("kept", "0", "", b"k")]


@pytest.mark.parametrize("zero_one", [False, True])
def test_pax_sparse_files_are_named_by_gnu_sparse_name_and_read_with_holes(
        zero_one: bool) -> None:
    data = raw_tar([Member(b"GNUSparseFile.0/decoy", gnu_long_name=b"gnu/name",
                           pax={"GNU.sparse.name": b"sparse/real", "path": b"pax"},
                           sparse=[(3, b"abc"), (1000, b"zz")], sparse_size=1500,
                           sparse_0_1=zero_one),
                    Member(b"after", data=b"next")])
    [(name, kind, _, content), after] = walk(data)
    assert (name, kind, len(content)) == ("sparse/real", "0", 1500)
    assert content[:6] == b"\0\0\0abc" and content[1000:1002] == b"zz"
    assert content.count(b"\0") == 1500 - 5
    assert after == ("after", "0", "", b"next")


def test_go_header_rules() -> None:
    data = raw_tar([Member(b"dir/", b"\0"), Member(b"f", b"g", data=b"9 a=b\n"),
                    Member(b"after-global", data=b"1")])
    assert walk(data) == [("dir/", "5", "", b""), ("f", "g", "", b""),
                          ("after-global", "0", "", b"1")]
    # The ustar prefix counts under the POSIX magic only: GNU keeps times there.
    posix = bytearray(header(b"name", size=0))
    posix[345:351] = b"prefix"
    gnu = bytearray(header(b"name", size=0, gnu=True))
    gnu[345:351] = b"prefix"
    for block in (posix, gnu):
        block[148:156] = b" " * 8
        block[148:156] = b"%06o\0 " % sum(block)
    names = [e.name for e in TarWalker(io.BytesIO(bytes(posix + gnu) + bytes(1024)))]
    assert names == [b"prefix/name", b"name"]


def test_records_longer_than_go_takes_are_refused() -> None:
    data = raw_tar([Member(b"x", gnu_long_name=b"n" * (MAX_SPECIAL_SIZE + 1))])
    with pytest.raises(TarError, match="more than Go's reader takes"):
        walk(data)
