"""Walk a tar stream's headers the way Go's archive/tar reads them, never extracting.

podman, buildah, CRI-O and containerd unpack layers with Go's archive/tar, so a member is
named here by its rules (golang/go `src/archive/tar/reader.go`), not by Python's
`tarfile`, which decides some cases differently:

- a PAX `x` record's `path`/`linkpath`/`size` apply to the next member (an empty value
  keeps the header's); a GNU `L`/`K` record's name replaces them: it is applied after;
- in the PAX sparse formats 0.0, 0.1 and 1.0, `GNU.sparse.name` names the member and
  `GNU.sparse.size` (or `.realsize`) sizes it, applied after both; the data is expanded
  with the holes as zeros;
- the ustar prefix counts only under the POSIX magic ("ustar\\0"), not GNU's;
- a `\\0` type flag with a name ending in "/" is a directory;
- a global `g` header is a member of its own whose records apply to nothing;
- `L`, `K` and `x` records longer than 1 MiB are refused, as Go refuses them.

Speed matters (issue 4): `tarfile` costs ~20 us per member, so this walks 512-byte headers
itself over large decompressed chunks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO, Callable, Optional, Protocol, Union

# isal's adler32 (the inflater's library, loaded by a cold scan anyway): a 512-byte header
# summed in a quarter of zlib's time, the same sums.
from isal.isal_zlib import adler32

from ..patterns import lazy
from .kinds import BLOCKDEV, CHARDEV, DIRECTORY, FIFO, GLOBAL, HARDLINK, REGULAR, SYMLINK

CHUNK = 1 << 20
BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)
# No real layer member comes near this; a header claiming more is hostile or corrupt, and
# trying to skip it would only read to the end of the stream.
MAX_MEMBER_SIZE = 1 << 36  # 64 GiB
# The largest sparse file a reader of prefixes (the ELF reader) gets whole, holes as zeros.
SPARSE_PREFIX_LIMIT = 64 << 20
# Go's maxSpecialFileSize: the longest L, K or x record it reads.
MAX_SPECIAL_SIZE = 1 << 20

# tar type flags: those the model keeps are `kinds`'
CONTIGUOUS = "7"
GNU_SPARSE = "S"
_NO_DATA = frozenset((HARDLINK, SYMLINK, CHARDEV, BLOCKDEV, DIRECTORY, FIFO))
# Header-only types: Go gives them no data, whatever their size field says.
_HEADER_ONLY = _NO_DATA
_POSIX_MAGIC = b"ustar\0"
_GNU_MAGIC = b"ustar  \0"  # magic and version
STAR_TRAILER = b"tar\0"
_OCTAL = lazy(rb"[0-7]+")
_DECIMAL = lazy(rb"[+-]?[0-9]+")
_HIGH_BYTES = bytes(range(0x80, 0x100))
# Mode, uid, gid, size, mtime and checksum as every common writer puts them (zero-padded
# octal, a NUL at the end; the checksum's 6 digits, a NUL and a space): one match instead
# of six parses.
_PLAIN_NUMBERS_SOURCE = rb"(?:[0-7]{7}\0){3}(?:[0-7]{11}\0){2}[0-7]{6}\0 "
_PLAIN_NUMBERS = lazy(_PLAIN_NUMBERS_SOURCE)
_PLAIN_DEVICES = lazy(rb"(?:[0-7]{7}\0|\0{8}){2}")
# From the magic on: a USTAR header with plain device numbers and no prefix, or a GNU one
# with no times, whose other fields Go does not parse.
_PLAIN_FORMAT_SOURCE = \
    rb"ustar\x0000.{64}(?:[0-7]{7}\0|\0{8}){2}\0|ustar  \0.{64}(?:[0-7]{7}\0|\0{8}){2}\0.{11}\0"
_PLAIN_FORMAT = lazy(_PLAIN_FORMAT_SOURCE, re.DOTALL)
# Both at once from the mode on (the type flag and link name between them), for most
# headers one match instead of two (`overlay.Unpacker.walk` reads the common ones with it).
PLAIN_HEADER = lazy(_PLAIN_NUMBERS_SOURCE + rb".{101}(?:" + _PLAIN_FORMAT_SOURCE + b")",
                    re.DOTALL)

# PAX keys of the GNU sparse formats.
_SPARSE_MAJOR, _SPARSE_MINOR = "GNU.sparse.major", "GNU.sparse.minor"
_SPARSE_NAME, _SPARSE_MAP = "GNU.sparse.name", "GNU.sparse.map"
_SPARSE_SIZE, _SPARSE_REALSIZE = "GNU.sparse.size", "GNU.sparse.realsize"
_SPARSE_OFFSET, _SPARSE_NUMBYTES = "GNU.sparse.offset", "GNU.sparse.numbytes"


class TarError(Exception):
    """The layer is not a readable tar stream."""


class Readable(Protocol):
    def read(self, size: int) -> bytes: ...


class TarEntry:
    """A member as Go's reader returns it. `name` and `link` stay bytes: most entries are
    rejected by a bytes check, and decoding every name would cost more than inflating.
    `sparse` holds (offset, length) data regions for a sparse file, whose `size` is its
    logical size."""

    __slots__ = ("name", "kind", "size", "link", "mode", "sparse")

    def __init__(self, name: bytes, kind: str, size: int, link: bytes, mode: int = 0o644,
                 sparse: Optional[list[tuple[int, int]]] = None) -> None:
        self.name = name
        self.kind = kind
        self.size = size
        self.link = link
        self.mode = mode  # permission bits with set-user-ID, set-group-ID and sticky
        self.sparse = sparse


def _octal(field: bytes, what: str) -> int:
    """Go's parseOctal: spaces and NULs trimmed from both ends, the digits up to the first
    NUL, octal only (no sign, no base prefix, no inner space)."""
    text = field.strip(b" \0")
    if not text:
        return 0
    end = text.find(b"\0")
    if end >= 0:
        text = text[:end]
    if not _OCTAL.fullmatch(text):
        raise TarError(f"bad {what} {field!r} in a tar header")
    return int(text, 8)


def _number(field: bytes, what: str) -> int:
    """Go's parseNumeric: a field whose first bit is set is a base-256 two's complement
    number (so it may be negative), anything else octal."""
    if field and field[0] & 0x80:
        raw = field if not field[0] & 0x40 else bytes(b ^ 0xFF for b in field)
        value = int.from_bytes(bytes([raw[0] & 0x7F]) + raw[1:], "big")
        if value >> 63:
            raise TarError(f"{what} overflows in a tar header")
        return ~value if field[0] & 0x40 else value
    return _octal(field, what)


def _go_int(value: bytes, what: str) -> int:
    """Go's strconv.ParseInt(value, 10, 64): an optional sign and decimal digits."""
    if not _DECIMAL.fullmatch(value):
        raise TarError(f"bad {what} {value[:40]!r} in a PAX record")
    number = int(value)
    if not -(1 << 63) <= number < (1 << 63):
        raise TarError(f"{what} {value[:40]!r} overflows in a PAX record")
    return number


def _check_pax_time(value: bytes, what: str) -> None:
    """Go's parsePAXTime: signed seconds, then optionally "." and decimal digits."""
    seconds, dot, fraction = value.partition(b".")
    _go_int(seconds, what)
    if dot and fraction and not fraction.isdigit():
        raise TarError(f"bad {what} {value[:40]!r} in a PAX record")


def _checksum_matches(header: bytes, stored: Optional[int] = None) -> bool:
    """Go's check: the stored checksum (octal; STORED when already parsed) equals the sum
    of the header's bytes, its own field counted as spaces, as unsigned or as signed
    bytes. Each half's sum fits adler32's first 16 bits exactly (at most 256 * 255 <
    65521), which sums in C."""
    if stored is None:
        try:
            stored = _octal(header[148:156], "checksum")
        except TarError:
            return False
    field = sum(header[148:156])
    unsigned = (adler32(header[:256]) & 0xFFFF) + (adler32(header[256:]) & 0xFFFF) - 2 \
        - field + 8 * 32
    if stored == unsigned:
        return True
    high = BLOCK - len(header.translate(None, _HIGH_BYTES))
    high -= 8 - len(header[148:156].translate(None, _HIGH_BYTES))
    return stored == unsigned - 256 * high


def _cstring(raw: bytes) -> bytes:
    end = raw.find(b"\0")
    return raw if end < 0 else raw[:end]


def _decimal(value: bytes, what: str) -> int:
    if not value.isdigit():
        raise TarError(f"bad {what} {value[:40]!r} in a PAX record")
    return int(value)


def pax_records(data: bytes) -> dict[str, bytes]:
    """A PAX header's records; GNU.sparse.offset/numbytes pairs (sparse 0.0) are joined
    into one GNU.sparse.map, as Go does."""
    records: dict[str, bytes] = {}
    sparse_map: list[bytes] = []
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos, pos + 20)
        if space < 0:
            if not data[pos:].strip(b"\0"):
                break  # NUL padding after the last record
            raise TarError("bad PAX record")
        length = _decimal(data[pos:space], "record length")
        end = pos + length
        if length <= space - pos + 1 or end > len(data) or data[end - 1:end] != b"\n":
            raise TarError("bad PAX record length")
        key, equals, value = data[space + 1:end - 1].partition(b"=")
        if not equals or not key or b"\0" in key:
            raise TarError("bad PAX record")
        name = key.decode("utf-8", "replace")
        if name in (_SPARSE_OFFSET, _SPARSE_NUMBYTES):
            expected = _SPARSE_OFFSET if len(sparse_map) % 2 == 0 else _SPARSE_NUMBYTES
            if name != expected or b"," in value:
                raise TarError("GNU sparse 0.0 records out of order")
            sparse_map.append(value)
        else:
            if name in ("path", "linkpath") and b"\0" in value:
                raise TarError(f"NUL byte in the PAX {name}")
            records[name] = value
        pos = end
    if sparse_map:
        records[_SPARSE_MAP] = b",".join(sparse_map)
    return records


def _sparse_pairs(numbers: list[int]) -> list[tuple[int, int]]:
    if len(numbers) % 2:
        raise TarError("odd number of values in a GNU sparse map")
    return [(numbers[i], numbers[i + 1]) for i in range(0, len(numbers), 2)]


def _check_sparse(regions: list[tuple[int, int]], size: int) -> None:
    """Go's validateSparseEntries: in order, no overlap, inside the file."""
    end = 0
    for offset, length in regions:
        if offset < end or length < 0 or offset + length > size:
            raise TarError("invalid GNU sparse map")
        end = offset + length


def _v7_numbers(header: bytes, at: int) -> tuple[int, int]:
    """(mode, size) of a header whose numeric fields are not all plain octal: each of
    mode, uid, gid, size and mtime parsed as Go parses it (base-256 or full-width octal
    with no terminator), any of them malformed refused as Go refuses it."""
    where = f" at byte {at}"
    mode = _number(header[100:108], "mode" + where)
    _number(header[108:116], "uid" + where)
    _number(header[116:124], "gid" + where)
    size = _number(header[124:136], "size" + where)
    _number(header[136:148], "mtime" + where)
    return mode, size


def _format_numbers(header: bytes, at: int) -> bytes:
    """Check the fields Go parses by the header's format (devices of USTAR, GNU and star;
    star's times) and answer the prefix of the name: USTAR's (star's is shorter), or, in a
    GNU header whose times do not parse, the ASCII prefix a pre-1.8 Go writer left there,
    which Go still reads as one."""
    magic = header[257:263]
    if magic != _POSIX_MAGIC and header[257:265] != _GNU_MAGIC:
        return b""  # V7: no more fields
    if not _PLAIN_DEVICES.fullmatch(header, 329, 345):
        _number(header[329:337], f"devmajor at byte {at}")
        _number(header[337:345], f"devminor at byte {at}")
    if magic == _POSIX_MAGIC:
        if header[508:512] == STAR_TRAILER:
            _number(header[476:488], f"atime at byte {at}")
            _number(header[488:500], f"ctime at byte {at}")
            return _cstring(header[345:476])
        return _cstring(header[345:500])
    try:
        for start in (345, 357):
            if header[start]:
                _number(header[start:start + 12], "time")
    except TarError:
        prefix = _cstring(header[345:500])
        return prefix if prefix.isascii() else b""
    return b""


def _check_pax_numbers(pax: dict[str, bytes]) -> None:
    """The PAX records Go parses as numbers on the member they apply to: a malformed one
    refuses the archive (an empty one keeps the header's value)."""
    for key in ("uid", "gid"):
        if pax.get(key):
            _go_int(pax[key], key)
    for key in ("atime", "mtime", "ctime"):
        if pax.get(key):
            _check_pax_time(pax[key], key)


class TarWalker:
    """Iterate tar entries of a stream; unread member data is skipped when moving on.

    A stream with a `skip(size) -> bytes skipped` method (a layer read in place from
    containers/storage) passes over member data without producing it."""

    def __init__(self, stream: Union[BinaryIO, Readable]) -> None:
        self._stream = stream
        self._pass_over: Optional[Callable[[int], int]] = getattr(stream, "skip", None)
        self._buf = b""
        self._pos = 0
        self._offset = 0  # bytes of the tar consumed so far
        self._pending = 0  # data + padding of the current entry not yet consumed
        self._unread = 0  # data of the current entry not yet consumed
        self._sparse: Optional[list[tuple[int, int]]] = None  # of the current entry
        # A sparse entry read by prefix: its whole data, holes as zeros, and how far read.
        self._filled: Optional[tuple[bytes, int]] = None
        # A sparse member's data comes expanded, its map gone (a tar-split's stream)
        self._expanded: bool = getattr(stream, "sparse_expanded", False)
        # What x, L and K records say of the next member, and whether any waits for it.
        self._pax: dict[str, bytes] = {}
        self._long_name = b""
        self._long_link = b""
        self.extended = False
        self.members = 0  # members returned so far (extension headers are none)
        self._stopped = False  # the end, or a member too large to pass over, was read

    def _refill(self) -> bool:
        """The next chunk as the buffer, the one before used up; False at the end."""
        chunk = self._stream.read(CHUNK)
        if not chunk:
            return False
        self._buf, self._pos = chunk, 0
        return True

    def _take(self, size: int) -> bytes:
        """The next SIZE bytes. Bytes that span chunks are joined from the pieces needed,
        never by copying a chunk whole (a chunk passed over whole is the stream's own
        block, uncopied)."""
        buf, pos = self._buf, self._pos
        end = pos + size
        if end <= len(buf):
            self._pos = end
            self._offset += size
            return buf[pos:end]
        parts = [buf[pos:]]
        need = end - len(buf)
        while True:
            chunk = self._stream.read(CHUNK)
            if not chunk:
                raise TarError(f"truncated tar stream at byte {self._offset}")
            if len(chunk) >= need:
                parts.append(chunk[:need])
                self._buf, self._pos = chunk, need
                break
            parts.append(chunk)
            need -= len(chunk)
        self._offset += size
        return b"".join(parts)

    def _skip(self, size: int) -> None:
        available = len(self._buf) - self._pos
        if size <= available:
            self._pos += size
            self._offset += size
            return
        self._offset += available
        size -= available
        self._buf, self._pos = b"", 0
        if self._pass_over is not None:
            skipped = self._pass_over(size)
            self._offset += skipped
            if skipped < size:
                raise TarError(f"truncated tar stream at byte {self._offset}")
            return
        # Whole chunks, the rest of the last one kept as the buffer: the stream hands
        # its blocks over uncopied.
        while size > 0:
            chunk = self._stream.read(CHUNK)
            if not chunk:
                raise TarError(f"truncated tar stream at byte {self._offset}")
            if len(chunk) > size:
                self._buf, self._pos = chunk, size
                self._offset += size
                return
            size -= len(chunk)
            self._offset += len(chunk)

    def read_data(self) -> bytes:
        """The current entry's data, holes of a sparse file filled with zeros (the caller
        has checked its size)."""
        data = self._take(self._unread)
        self._pending -= self._unread
        self._unread = 0
        if self._sparse is None:
            return data
        regions, self._sparse = self._sparse, None
        size = regions[-1][0] if regions else 0  # the closing (size, 0) region
        out = bytearray(size)
        pos = 0
        for offset, length in regions:
            out[offset:offset + length] = data[pos:pos + length]
            pos += length
        return bytes(out)

    def read_more(self, size: int) -> bytes:
        """Up to SIZE more bytes of the current entry's data (none past its end, at least
        one before it): what the buffer holds, so reading a large file copies no chunk
        whole; what is left unread is skipped when moving on. A sparse entry is read whole
        first, holes as zeros (its data is stored without them), when it is no larger than
        SPARSE_PREFIX_LIMIT; a larger one gives nothing."""
        if self._sparse is not None or self._filled is not None:
            return self._from_filled(size)
        size = min(size, self._unread)
        if not size:
            return b""
        if self._pos >= len(self._buf) and not self._refill():
            raise TarError(f"truncated tar stream at byte {self._offset}")
        pos = self._pos
        data = self._buf[pos:pos + size]
        got = len(data)
        self._pos = pos + got
        self._offset += got
        self._unread -= got
        self._pending -= got
        return data

    def skip_more(self, size: int) -> int:
        """Pass over up to SIZE more bytes of the current entry's data (a seek where the
        stream allows); answers how many."""
        if self._sparse is not None or self._filled is not None:
            return len(self._from_filled(size))
        size = min(size, self._unread)
        self._skip(size)
        self._unread -= size
        self._pending -= size
        return size

    def _from_filled(self, size: int) -> bytes:
        if self._filled is None:
            assert self._sparse is not None
            whole = self.read_data() if self._sparse[-1][0] <= SPARSE_PREFIX_LIMIT else b""
            self._filled = (whole, 0)
        whole, pos = self._filled
        self._filled = (whole, pos + min(size, len(whole) - pos))
        return whole[pos:pos + size]

    def copy_data(self, out: BinaryIO) -> None:
        if self._sparse is not None:
            out.write(self.read_data())
            return
        while self._unread:
            piece = self._take(min(self._unread, CHUNK))
            out.write(piece)
            self._unread -= len(piece)
            self._pending -= len(piece)

    def _member_data(self, size: int) -> bytes:
        data = self._take(size)
        self._skip(-size % BLOCK)
        return data

    def _sparse_1_0_map(self, size: int) -> tuple[list[int], int]:
        """The map at the start of a sparse 1.0 member's data (decimal lines, padded to
        whole blocks), and how many bytes of the data it took."""
        text = b""
        while True:
            if len(text) + BLOCK > min(size, MAX_SPECIAL_SIZE):
                raise TarError("GNU sparse 1.0 map too long")
            text += self._take(BLOCK)
            lines = text.split(b"\n")
            if lines[0] and len(lines) > 1:
                count = _decimal(lines[0], "sparse map size")
                if len(lines) - 1 > 2 * count:
                    numbers = [_decimal(v, "sparse map entry") for v in lines[1:1 + 2 * count]]
                    return numbers, len(text)

    def _sparse_regions(self, pax: dict[str, bytes], size: int
                        ) -> tuple[Optional[list[tuple[int, int]]], int]:
        """For a PAX sparse member: its data regions and the bytes of map that precede its
        data (sparse 1.0); (None, 0) for any other member."""
        major, minor = pax.get(_SPARSE_MAJOR, b""), pax.get(_SPARSE_MINOR, b"")
        if major == b"1" and minor == b"0":
            if self._expanded:
                return [], 0  # the map is not in the stream; the data is the whole file
            numbers, used = self._sparse_1_0_map(size)
            return _sparse_pairs(numbers), used
        if (major == b"0" and minor in (b"0", b"1")) or (
                not major and not minor and pax.get(_SPARSE_MAP)):
            raw = pax.get(_SPARSE_MAP, b"")
            values = raw.split(b",") if raw else []
            return _sparse_pairs([_decimal(v, "sparse map entry") for v in values]), 0
        return None, 0  # unknown versions are not sparse to Go either

    def __iter__(self) -> Iterator[TarEntry]:
        while True:
            entry = self.next_entry()
            if entry is None:
                return
            yield entry

    def next_entry(self) -> Optional[TarEntry]:
        """The next member, its extension headers applied; None at the end of the archive
        (and after a member too large to pass over: every later header would be
        misaligned)."""
        if self._stopped:
            return None
        while True:
            # The hot path, once per member: plain slicing, no per-field helper calls.
            buf, pos, pending = self._buf, self._pos, self._pending
            if pending:
                if pos + pending <= len(buf):
                    pos += pending
                    self._offset += pending
                else:
                    self._skip(pending)
                    buf, pos = self._buf, self._pos
                self._pending = self._unread = 0
            self._sparse = self._filled = None
            if pos + BLOCK <= len(buf):
                header = buf[pos:pos + BLOCK]
                self._pos = pos + BLOCK
                self._offset += BLOCK
            else:
                self._pos = pos
                if pos < len(buf) or self._refill():
                    header = self._take(BLOCK)
                else:
                    return None  # no end-of-archive blocks: tolerated, the data is complete
            if header == ZERO_BLOCK:
                if self._end_of_archive():
                    self._stopped = True
                    return None
                raise TarError(f"a zero block, then a header at byte {self._offset - BLOCK}: "
                               "the archive ends only at two zero blocks (Go's reader "
                               "refuses it: invalid tar header)")
            entry = self._member(header)
            if entry is not None:
                self.members += 1
                return entry

    def _member(self, header: bytes) -> Optional[TarEntry]:
        """The member whose header HEADER was just read, or None for an extension header
        (its records kept for the next member)."""
        at = self._offset - BLOCK
        plain = PLAIN_HEADER.match(header, 100)
        if plain or _PLAIN_NUMBERS.fullmatch(header, 100, 156):
            mode, size = int(header[100:107], 8), int(header[124:135], 8)
            stored = int(header[148:154], 8)
            # `_checksum_matches`' unsigned sum, inline: most headers end here. With
            # no byte above 127 (most headers), the sum of all 512 is below adler32's
            # modulus: one sum.
            if header.isascii():
                unsigned = (adler32(header) & 0xFFFF) + 255 - sum(header[148:156])
            else:
                unsigned = (adler32(header[:256]) & 0xFFFF) \
                    + (adler32(header[256:]) & 0xFFFF) + 254 - sum(header[148:156])
            checked = stored == unsigned or _checksum_matches(header, stored)
        else:
            checked = _checksum_matches(header)
            if checked:
                mode, size = _v7_numbers(header, at)
        if not checked:
            raise TarError(f"bad tar header at byte {at}: its checksum does not match "
                           "(Go's reader refuses it: invalid tar header)")
        flag = header[156]
        kind = chr(flag) if flag else REGULAR
        mode &= 0o7777
        if size < 0 and kind not in _HEADER_ONLY:
            raise TarError(f"negative size {size} in the tar header at byte {at}")
        if kind in "xLK":
            if size > MAX_SPECIAL_SIZE:
                raise TarError(f"{kind!r} extension header of {size} bytes at byte "
                               f"{self._offset}: more than Go's reader takes")
            _format_numbers(header, at)
            data = self._member_data(size)
            if kind == "x":
                self._pax = pax_records(data)
            elif kind == "L":
                self._long_name = _cstring(data)
            else:
                self._long_link = _cstring(data)
            self.extended = True
            return None
        name = header[:100]
        end = name.find(0)
        if end >= 0:
            name = name[:end]
        if not ((plain or _PLAIN_FORMAT.match(header, 257))
                and header[508:512] != STAR_TRAILER):
            prefix = _format_numbers(header, at)
            if prefix:
                name = prefix + b"/" + name
        link = _cstring(header[157:257]) if header[157] else b""
        if kind == GLOBAL:
            # Go returns it as a member of its own, its records applied to nothing
            # (not even the next member); containers/storage still removes what its
            # name names before it ignores it.
            if size > MAX_SPECIAL_SIZE:
                raise TarError(f"'g' extension header of {size} bytes at byte "
                               f"{self._offset}: more than Go's reader takes")
            pax_records(self._member_data(size))  # Go parses them: malformed, refused
            self._pax, self._long_name, self._long_link, self.extended = {}, b"", b"", False
            return TarEntry(name, kind, 0, b"", 0)
        sparse: Optional[list[tuple[int, int]]] = None
        map_bytes = 0
        if self.extended:
            pax = self._pax
            if pax:
                name = pax.get("path") or name
                link = pax.get("linkpath") or link
                if pax.get("size"):
                    size = _go_int(pax["size"], "size")
                _check_pax_numbers(pax)
            name = self._long_name or name
            link = self._long_link or link
            if pax:
                if not flag and name.endswith(b"/"):
                    kind = DIRECTORY  # Go decides this before the sparse records
                sparse, map_bytes, size = self._pax_sparse(pax, kind, size, name)
                if sparse is not None:
                    name = pax.get(_SPARSE_NAME) or name
            self._long_name = self._long_link = b""
            self._pax = {}
            self.extended = False
        if not flag and name.endswith(b"/"):
            kind = DIRECTORY  # legacy archives mark directories with a trailing slash
        if kind in _NO_DATA:
            size = 0  # these carry no data blocks, whatever the header says
        elif size < 0:
            raise TarError(f"negative size {size} for {name!r} (a PAX size)")
        if sparse is not None and self._expanded:
            # The file itself in place of its data regions (and map), then the padding
            # of the data the member holds in the tar.
            real = sparse[-1][0]
            self._unread = real
            self._pending = real + (-size % BLOCK)
            return TarEntry(name, kind, real, link, mode)
        if sparse is not None:
            physical = size
            logical = sum(length for _, length in sparse)
            self._unread = logical
            self._pending = physical - map_bytes + (-physical % BLOCK)
            self._sparse = sparse
            return TarEntry(name, kind, sparse[-1][0], link, mode, sparse)
        if size > MAX_MEMBER_SIZE:
            # Skipping is impossible and every later header would be misaligned.
            self._stopped = True
            return TarEntry(name, kind, size, link, mode)
        self._unread = size
        self._pending = size + (-size % BLOCK)
        return TarEntry(name, kind, size, link, mode)

    def _end_of_archive(self) -> bool:
        """After a zero block: whether a second one (or the end of the stream) follows,
        as Go ends an archive; False when a header follows instead."""
        if self._pos >= len(self._buf) and not self._refill():
            return True  # one zero block, then the end: Go's reader stops too
        return self._take(BLOCK) == ZERO_BLOCK

    def _pax_sparse(self, pax: dict[str, bytes], kind: str, size: int, name: bytes
                    ) -> tuple[Optional[list[tuple[int, int]]], int, int]:
        """(regions ending with a (logical size, 0) marker, map bytes already read,
        physical data size) for a PAX sparse member; (None, 0, SIZE) for others."""
        if not any(key.startswith("GNU.sparse.") for key in pax):
            return None, 0, size
        regions, map_bytes = self._sparse_regions(pax, size)
        if regions is None:
            return None, 0, size
        if kind in _NO_DATA:
            raise TarError(f"sparse map on a member that holds no data: {name!r}")
        logical = pax.get(_SPARSE_SIZE) or pax.get(_SPARSE_REALSIZE)
        real = _decimal(logical, "sparse size") if logical else size
        _check_sparse(regions, real)
        if sum(length for _, length in regions) > size - map_bytes:
            raise TarError("GNU sparse map holds more data than the member")
        return [*regions, (real, 0)], map_bytes, size
