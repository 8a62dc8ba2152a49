"""The tar walker names members as Go's archive/tar does (what the engines unpack with)."""

from __future__ import annotations

import io
import tarfile

from aipcc_build.imagefs.paths import clean, climbs, duplicate_key, whiteout_of
from aipcc_build.imagefs.tar import TarWalker
from tests.support.layers import member, tar_bytes


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
