"""The tar walker names members as Go's archive/tar does (what the engines unpack with)."""

from __future__ import annotations

import io
import tarfile

import pytest

from aipcc_build.imagefs.paths import clean, climbs, duplicate_key, whiteout_of
from aipcc_build.imagefs.tar import CHUNK, MAX_SPECIAL_SIZE, TarError, TarWalker
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
    data = raw_tar([Member(b"dir/", b"\0"), Member(b"f", b"g", data=b"6 a=b\n"),
                    Member(b"after-global", data=b"1")])
    assert walk(data) == [("dir/", "5", "", b""), ("f", "g", "", b""),
                          ("after-global", "0", "", b"1")]
    # The ustar prefix counts under the POSIX magic; GNU keeps times there, and Go reads
    # them as a prefix only when they do not parse (what Go writers before 1.8 wrote).
    posix = bytearray(header(b"name", size=0))
    posix[345:351] = b"prefix"
    gnu = bytearray(header(b"name", size=0, gnu=True))
    gnu[345:351] = b"prefix"
    gnu_times = bytearray(header(b"name", size=0, gnu=True))
    gnu_times[345:369] = b"%011o\0" % 1700000000 * 2
    blocks = b"".join(resum(block) for block in (posix, gnu, gnu_times))
    names = [e.name for e in TarWalker(io.BytesIO(blocks + bytes(1024)))]
    assert names == [b"prefix/name", b"prefix/name", b"name"]


def resum(block: bytearray, signed: bool = False) -> bytes:
    """BLOCK with its checksum recomputed (over signed bytes when SIGNED)."""
    block[148:156] = b" " * 8
    total = sum(b - 256 if signed and b >= 128 else b for b in block)
    block[148:156] = b"%06o\0 " % total
    return bytes(block)


def with_field(start: int, value: bytes, **kwargs: object) -> bytes:
    """A member "f" holding b"hello", one header field replaced by VALUE."""
    block = bytearray(header(b"f", size=5, **kwargs))  # type: ignore[arg-type]
    block[start:start + len(value)] = value
    return resum(block) + b"hello".ljust(512, b"\0")


AFTER = raw_tar([Member(b"after", data=b"next")])


@pytest.mark.parametrize(("start", "value"), [
    (124, b"000000000005"),  # full width, no terminator: Go reads all 12 digits
    (124, b"          5 "),
    (124, b"\0\0\0 5\0junk\0\0\0"),  # trimmed, then cut at the first NUL
    (124, b"\x80" + bytes(10) + b"\x05"),  # base-256
    (100, b"\xff" * 7 + b"\x00"),  # a negative mode in base-256 is still a mode
    (108, b"77777777"),  # uid, full width
])
def test_numeric_fields_are_read_as_go_reads_them(start: int, value: bytes) -> None:
    assert walk(with_field(start, value) + AFTER) == [
        ("f", "0", "", b"hello"), ("after", "0", "", b"next")]


@pytest.mark.parametrize(("start", "value"), [
    (124, b"0o0000000005"),  # Python's int() takes a base prefix, Go does not
    (124, b"0000_0000005"),  # ... and underscores
    (124, b"+0000000005\0"),  # ... and a sign
    (124, b"00000\t00005\0"),  # ... and inner whitespace
    (124, b"00000000009\0"),
    (124, b"\xff" * 11 + b"\xfb"),  # base-256 -5: a negative size
    (124, b"\x80" + b"\xff" * 11),  # base-256 past int64
    (100, b"0644 644"),  # mode
    (136, b"1234 5678901"),  # mtime
    (329, b"12 4\0\0\0\0"),  # devmajor (ustar)
])
def test_malformed_numeric_fields_are_refused_as_go_refuses_them(start: int,
                                                                   value: bytes) -> None:
    with pytest.raises(TarError):
        walk(with_field(start, value) + AFTER)


def test_a_negative_size_is_harmless_on_a_header_only_type() -> None:
    block = bytearray(header(b"l", b"2", link=b"target"))
    block[124:136] = b"\xff" * 12
    assert walk(resum(block) + AFTER) == [("l", "2", "target", b""),
                                          ("after", "0", "", b"next")]


def test_every_header_checksum_is_verified_signed_or_unsigned() -> None:
    bad = bytearray(header(b"f", size=0))
    bad[148:150] = b"77"
    with pytest.raises(TarError, match="checksum"):
        walk(bytes(bad) + AFTER)
    # A name with bytes past 0x7f: old writers summed them as signed chars; Go takes both.
    for signed in (False, True):
        block = bytearray(header(b"caf\xc3\xa9", size=0))
        assert [name for name, *_ in walk(resum(block, signed) + AFTER)] == [
            "caf\u00e9", "after"]


def test_a_checksum_off_by_adler32s_modulus_is_refused() -> None:
    # The walker sums a header with adler32, whose 16-bit sums wrap at 65521: a checksum
    # that differs from the true sum by exactly that must still be refused, in a header of
    # ASCII bytes (summed at once) and in one whose bytes sum past the modulus.
    for name, link in ((b"plain", b""), (b"\xff" * 99, b"\xfe" * 99)):
        block = bytearray(header(name, size=0, link=link))
        if link:
            block[257:] = b"\xff" * 255  # a V7 header: Go reads nothing past the link
        block = bytearray(resum(block))
        total = int(block[148:154], 8)
        assert [e.name for e in TarWalker(io.BytesIO(bytes(block) + AFTER))] == [
            name, b"after"]
        for wrong in (total + 65521, total - 65521):
            if wrong >= 0:
                block[148:156] = b"%06o\0 " % wrong
                with pytest.raises(TarError, match="checksum"):
                    list(TarWalker(io.BytesIO(bytes(block) + AFTER)))


def test_the_archive_ends_only_at_two_zero_blocks() -> None:
    member = raw_tar([Member(b"a", data=b"1")], end=False)
    with pytest.raises(TarError, match="two zero blocks"):
        walk(member + bytes(512) + AFTER)
    # One zero block then the end, or two then anything: the end, as in Go.
    assert [n for n, *_ in walk(member + bytes(512))] == ["a"]
    assert [n for n, *_ in walk(member + bytes(1024) + b"junk" * 300)] == ["a"]
    with pytest.raises(TarError, match="truncated"):
        walk(member + bytes(512) + bytes(100))


@pytest.mark.parametrize(("records", "size"), [
    ({"size": b"+3"}, 3), ({"size": b"003"}, 3), ({"uid": b"-1"}, 3),
    ({"mtime": b"-12.5"}, 3), ({"mtime": b"12."}, 3), ({"gid": b""}, 3)])
def test_pax_numbers_are_read_as_go_parses_them(records: dict[str, bytes], size: int
                                               ) -> None:
    data = raw_tar([Member(b"f", data=b"abc", pax=records), Member(b"after", data=b"n")])
    assert walk(data) == [("f", "0", "", b"abc"[:size]), ("after", "0", "", b"n")]


@pytest.mark.parametrize("records", [
    {"size": b"-3"}, {"size": b" 3"}, {"size": b"3_0"}, {"uid": b"1e3"},
    {"mtime": b".5"}, {"atime": b"1.x"}, {"size": b"9" * 20}])
def test_malformed_pax_numbers_are_refused(records: dict[str, bytes]) -> None:
    with pytest.raises(TarError):
        walk(raw_tar([Member(b"f", data=b"abc", pax=records)]))


def test_records_longer_than_go_takes_are_refused() -> None:
    data = raw_tar([Member(b"x", gnu_long_name=b"n" * (MAX_SPECIAL_SIZE + 1))])
    with pytest.raises(TarError, match="more than Go's reader takes"):
        walk(data)


def test_a_global_header_is_parsed_as_go_parses_it() -> None:
    good = raw_tar([Member(b"g", b"g", data=b"6 a=b\n"), Member(b"f", data=b"1")])
    assert [n for n, *_ in walk(good)] == ["g", "f"]
    with pytest.raises(TarError, match="PAX record"):
        walk(raw_tar([Member(b"g", b"g", data=b"99 a=b\n"), Member(b"f", data=b"1")]))


class _Expanded(io.BytesIO):
    """A stream like a tar-split's: a sparse member's data is the whole file."""

    sparse_expanded = True


def test_a_sparse_member_read_from_a_tar_split_is_the_file_itself() -> None:
    # tar-split gives the headers, then the file the engine wrote in place of the map and
    # the data regions, then the padding of the data the tar held (map block + 5 bytes).
    sparse = raw_tar([Member(b"GNUSparseFile.0/x", pax={"GNU.sparse.name": b"sparse/one"},
                             sparse=[(3, b"abc"), (1000, b"zz")], sparse_size=1500)],
                     end=False)
    logical = bytes(3) + b"abc" + bytes(994) + b"zz" + bytes(498)
    stream = _Expanded(sparse[:1536] + logical + bytes(-517 % 512)
                       + raw_tar([Member(b"after", data=b"next")]))
    walker = TarWalker(stream)
    read = [(entry.name, entry.size, walker.read_data()) for entry in walker]
    assert read == [(b"sparse/one", 1500, logical), (b"after", 4, b"next")]


class _Pieces:
    """A stream that answers each read with at most SIZE bytes, as a decompressor hands
    out its blocks or a tar-split its members."""

    def __init__(self, data: bytes, size: int) -> None:
        self._data, self._size, self._at = data, size, 0

    def read(self, size: int) -> bytes:
        out = self._data[self._at:self._at + min(size, self._size)]
        self._at += len(out)
        return out


def _read_all(walker: TarWalker, by: int) -> list[tuple[bytes, bytes]]:
    """Each member's name and data, its data read BY bytes at most at a time (0: whole)."""
    read = []
    for entry in walker:
        if not by:
            read.append((entry.name, walker.read_data()))
            continue
        pieces = []
        while piece := walker.read_more(by):
            assert len(piece) <= by
            pieces.append(piece)
        read.append((entry.name, b"".join(pieces)))
    return read


def _outcome(stream: object, by: int) -> object:
    try:
        return _read_all(TarWalker(stream), by)  # type: ignore[arg-type]
    except TarError as exc:
        return str(exc)


@pytest.mark.parametrize("by", [0, 1000, CHUNK])
def test_a_walk_does_not_depend_on_how_the_stream_cuts_its_bytes(by: int) -> None:
    # Reading spans the stream's pieces without copying them whole: the members, their
    # data and the refusals of a cut archive are the same however the bytes come.
    small = raw_tar([Member(b"a", data=b"1" * 700), Member(b"x", data=b"abc",
                                                             pax={"path": b"pax/name"}),
                     Member(b"empty"), Member(b"b", data=bytes(range(256)) * 9)])
    big = raw_tar([Member(b"head", data=b"h" * 600),
                   Member(b"big", data=bytes(range(256)) * 5000),
                   Member(b"tail", data=b"t" * 3)])
    for data, sizes in ((small, (1, 7, 511, 512, 513, 4097)),
                        (big, (4097, CHUNK // 3 + 1, CHUNK))):
        for cut in (len(data), 600, 1024 + 300, len(data) - 1024 - 700):
            whole = _outcome(io.BytesIO(data[:cut]), by)
            assert whole != [] and (cut < len(data) or isinstance(whole, list))
            for size in sizes:
                assert _outcome(_Pieces(data[:cut], size), by) == whole, (cut, size)
