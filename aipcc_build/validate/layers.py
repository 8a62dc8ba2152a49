"""Stream one layer blob: sniff its compression, walk its tar headers, never extract.

Speed matters (issue 4): `tarfile` costs ~20 us per member, so this walks 512-byte headers
itself over large decompressed chunks, and inflates gzip with python-isal (about twice as
fast as zlib). The caller runs one layer per process to use every core.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Optional, Union

import zstandard
from isal import igzip_threaded

from .blobs import BlobLocation, LayerJob, TarSplitLayer
from .detect import (
    CANDIDATE_BYTES,
    CANDIDATE_SUFFIXES,
    WANT_FILE,
    WANT_MEMORY,
    WANT_PREFIX,
    LayerDetector,
)
from .results import SETUID, Hazard, LayerScan
from .symlinks import TOOLKIT_PREFIXES, Budget, BudgetExceeded, resolve_link
from .tarsplit import TarSplitError, TarSplitStream

CHUNK = 1 << 20
BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# No real layer member comes near this; a header claiming more is hostile or corrupt, and
# trying to skip it would only read to the end of the stream.
MAX_MEMBER_SIZE = 1 << 36  # 64 GiB

# tar type flags
REGULAR = "0"
HARDLINK = "1"
SYMLINK = "2"
CHARDEV = "3"
BLOCKDEV = "4"
DIRECTORY = "5"
FIFO = "6"
_NO_DATA = (HARDLINK, SYMLINK, CHARDEV, BLOCKDEV, DIRECTORY, FIFO)
_PLAIN_KINDS = (REGULAR, DIRECTORY, FIFO)


class TarError(Exception):
    """The layer is not a readable tar stream."""


class _RangeFile(io.RawIOBase):
    """A read-only window on a file, so archives are read in place; every byte read is
    hashed on the way, so the scan that reads the blob anyway also checks its digest."""

    def __init__(self, location: BlobLocation, digest: str) -> None:
        algorithm, _, self._expected = digest.partition(":")
        if algorithm not in hashlib.algorithms_available:
            raise ValueError(f"unknown digest algorithm in {digest!r}")
        self._algorithm = algorithm
        self._hash = hashlib.new(algorithm)
        self._file = open(location.path, "rb")  # noqa: SIM115 - closed in release()
        size = os.fstat(self._file.fileno()).st_size
        self._start = location.offset
        self._end = size if location.length is None else location.offset + location.length
        self._file.seek(self._start)
        self._pos = self._start

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._end - self._pos)
        if want <= 0:
            return 0
        got = self._file.readinto(view[:want])
        self._hash.update(view[:got])
        self._pos += got
        return got

    def rewind(self) -> None:
        self._file.seek(self._start)
        self._pos = self._start
        self._hash = hashlib.new(self._algorithm)

    def actual_digest(self) -> Optional[str]:
        """After the scan: the blob's digest, when it is not the one it is stored under
        (what the decompressor left unread is read and hashed first)."""
        buffer = bytearray(CHUNK)
        while self.readinto(buffer):
            pass
        actual = self._hash.hexdigest()
        return None if actual == self._expected else f"{self._algorithm}:{actual}"

    def close(self) -> None:
        # Decompressors close their source when done; the file stays open for
        # `actual_digest` until `release`.
        super().close()

    def release(self) -> None:
        self._file.close()


def open_layer(raw: _RangeFile) -> BinaryIO:
    """The decompressed stream of a blob, by its magic bytes (media types can lie)."""
    magic = raw.read(4) or b""
    raw.rewind()
    if magic[:2] == GZIP_MAGIC:
        # isal reads every member (eStargz layers are multi-member gzip) and, threaded,
        # inflates in a thread without the GIL while this one walks the headers.
        return igzip_threaded.open(raw, "rb", threads=1)
    if magic == ZSTD_MAGIC:
        # zstd:chunked is many frames plus skippable ones: keep reading across frames.
        reader = zstandard.ZstdDecompressor().stream_reader(
            raw, read_size=CHUNK, read_across_frames=True)  # type: ignore[arg-type]
        return reader
    return io.BufferedReader(raw, CHUNK)


class TarEntry:
    """A member as the header says. `name` and `link` stay bytes: most entries are
    rejected by a bytes check, and decoding every name would cost more than inflating."""

    __slots__ = ("name", "kind", "size", "link", "mode")

    def __init__(self, name: bytes, kind: str, size: int, link: bytes, mode: int = 0o644
                 ) -> None:
        self.name = name
        self.kind = kind
        self.size = size
        self.link = link
        self.mode = mode  # permission bits with set-user-ID, set-group-ID and sticky


def _number(field: bytes) -> int:
    if field[:1] and field[0] & 0x80:  # GNU base-256 for values octal cannot hold
        if field[0] == 0xFF:
            raise TarError("negative number in a tar header")
        return int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
    text = field.strip(b" \0")
    try:
        return int(text, 8) if text else 0
    except ValueError as exc:
        raise TarError(f"bad number {text!r} in a tar header") from exc


def _cstring(raw: bytes) -> bytes:
    end = raw.find(b"\0")
    return raw if end < 0 else raw[:end]


def _pax_records(data: bytes) -> dict[str, bytes]:
    records: dict[str, bytes] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0:
            break
        try:
            length = int(data[pos:space])
        except ValueError as exc:
            raise TarError("bad PAX record length") from exc
        if length <= 0:
            raise TarError("bad PAX record length")
        key, _, value = data[space + 1:pos + length - 1].partition(b"=")
        records[key.decode("utf-8", "replace")] = value
        pos += length
    return records


class TarWalker:
    """Iterate tar entries of a stream; unread member data is skipped when moving on.

    A stream with a `skip(size) -> bytes skipped` method (a layer read in place from
    containers/storage) passes over member data without producing it."""

    def __init__(self, stream: Union[BinaryIO, TarSplitStream]) -> None:
        self._stream = stream
        self._pass_over: Optional[Callable[[int], int]] = getattr(stream, "skip", None)
        self._buf = b""
        self._pos = 0
        self._offset = 0  # bytes of the tar consumed so far
        self._pending = 0  # data + padding of the current entry not yet consumed
        self._unread = 0  # data of the current entry not yet consumed

    def _fill(self) -> bool:
        chunk = self._stream.read(CHUNK)
        if not chunk:
            return False
        self._buf = chunk if self._pos >= len(self._buf) else self._buf[self._pos:] + chunk
        self._pos = 0
        return True

    def _take(self, size: int) -> bytes:
        while len(self._buf) - self._pos < size:
            if not self._fill():
                raise TarError(f"truncated tar stream at byte {self._offset}")
        out = self._buf[self._pos:self._pos + size]
        self._pos += size
        self._offset += size
        return out

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
        while size > 0:
            chunk = self._stream.read(min(size, CHUNK))
            if not chunk:
                raise TarError(f"truncated tar stream at byte {self._offset}")
            size -= len(chunk)
            self._offset += len(chunk)

    def read_data(self) -> bytes:
        """The current entry's data (the caller has checked its size)."""
        data = self._take(self._unread)
        self._pending -= self._unread
        self._unread = 0
        return data

    def read_more(self, size: int) -> bytes:
        """Up to SIZE more bytes of the current entry's data (none past its end); what is
        left unread is skipped when moving on."""
        data = self._take(min(size, self._unread))
        self._unread -= len(data)
        self._pending -= len(data)
        return data

    def skip_more(self, size: int) -> int:
        """Pass over up to SIZE more bytes of the current entry's data (a seek where the
        stream allows); answers how many."""
        size = min(size, self._unread)
        self._skip(size)
        self._unread -= size
        self._pending -= size
        return size

    def copy_data(self, out: BinaryIO) -> None:
        while self._unread:
            piece = self._take(min(self._unread, CHUNK))
            out.write(piece)
            self._unread -= len(piece)
            self._pending -= len(piece)

    def _member_data(self, size: int) -> bytes:
        data = self._take(size)
        self._skip(-size % BLOCK)
        return data

    def __iter__(self) -> Iterator[TarEntry]:
        long_name: Optional[bytes] = None
        long_link: Optional[bytes] = None
        pax: dict[str, bytes] = {}
        while True:
            if self._pending:
                self._skip(self._pending)
                self._pending = self._unread = 0
            # The hot path, once per member: plain slicing, no per-field helper calls.
            if len(self._buf) - self._pos >= BLOCK:
                header = self._buf[self._pos:self._pos + BLOCK]
                self._pos += BLOCK
                self._offset += BLOCK
            elif self._fill() or len(self._buf) - self._pos:
                header = self._take(BLOCK)
            else:
                return  # no end-of-archive blocks: tolerated, the data is complete
            if header == ZERO_BLOCK:
                return
            ustar = header[257:262] == b"ustar"
            if not ustar and _number(header[148:156]) != (
                    sum(header) - sum(header[148:156]) + 256):
                # Without a ustar magic, only the checksum tells a header from garbage.
                raise TarError(f"bad tar header at byte {self._offset - BLOCK}")
            flag = header[156]
            kind = chr(flag) if flag else REGULAR
            try:
                size = int(header[124:135], 8)
            except ValueError:
                size = _number(header[124:136])
            if kind in "xgLK":
                if size > MAX_MEMBER_SIZE // 1024:
                    raise TarError(f"oversized {kind!r} extension header at byte {self._offset}")
                data = self._member_data(size)
                if kind == "x":
                    pax = _pax_records(data)
                elif kind == "L":
                    long_name = _cstring(data)
                elif kind == "K":
                    long_link = _cstring(data)
                continue  # global PAX headers ("g") carry nothing a path check needs
            name = _cstring(header[0:100])
            if ustar and header[345] and kind != "S":
                name = _cstring(header[345:500]) + b"/" + name
            link = _cstring(header[157:257]) if header[157] else b""
            if long_name is not None or long_link is not None or pax:
                name = pax.get("path", long_name or name)
                link = pax.get("linkpath", long_link or link)
                if "size" in pax:
                    try:
                        size = int(pax["size"])
                    except ValueError as exc:
                        raise TarError(f"bad PAX size at byte {self._offset}") from exc
                long_name = long_link = None
                pax = {}
            if kind in _NO_DATA:
                size = 0  # these carry no data blocks, whatever the header says
            elif kind == "7":
                kind = REGULAR  # contiguous files are regular files to every reader
            try:
                mode = int(header[100:107], 8) & 0o7777
            except ValueError:
                mode = _number(header[100:108]) & 0o7777
            if size > MAX_MEMBER_SIZE:
                # Skipping is impossible and every later header would be misaligned.
                yield TarEntry(name, kind, size, link, mode)
                return
            self._unread = size
            self._pending = size + (-size % BLOCK)
            yield TarEntry(name, kind, size, link, mode)


def normalize(name: str) -> tuple[Optional[str], Optional[str]]:
    """("/clean/path", hazard kind or None); path None when the name must not be used."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None, "path-traversal"
    if not parts:
        return None, None  # the layer's root directory itself
    return "/" + "/".join(parts), ("absolute-path" if name.startswith("/") else None)


def escapes_root(path: str, target: str) -> bool:
    """Whether a relative symlink target climbs above the image root (absolute ones cannot)."""
    if target.startswith("/"):
        return False
    depth = path.count("/") - 1  # directories above the link: "/a/b/link" -> 2
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


# Mode bits that make a member worth a look: set-user-ID, set-group-ID, writable by others.
ODD_MODE = 0o6002
# Directories where files writable by everyone are the point (all sticky on real systems).
SHARED_DIRS = ("/tmp/", "/var/tmp/", "/dev/shm/", "/run/lock/", "/var/lock/")


def mode_hazard(path: str, kind: str, mode: int) -> Optional[Hazard]:
    """Layer hygiene from a member's mode: a set-user-ID or set-group-ID file, a file
    writable by everyone outside the shared temporary directories, a directory writable
    by everyone without the sticky bit (anyone may delete anyone's files in it). Never
    severe: real base images ship /usr/bin/su and passwd set-user-ID."""
    if kind == REGULAR and mode & 0o6000:
        bits = " and ".join(name for bit, name in ((0o4000, "set-user-ID"),
                                                   (0o2000, "set-group-ID")) if mode & bit)
        return Hazard(SETUID, path, f"{bits} file (mode {mode:04o})", severe=False)
    if kind == REGULAR and mode & 0o002 and not path.startswith(SHARED_DIRS):
        return Hazard("world-writable", path, f"file writable by everyone (mode {mode:04o})",
                      severe=False)
    if kind == DIRECTORY and mode & 0o002 and not mode & 0o1000:
        return Hazard("world-writable", path, "directory writable by everyone without the "
                      f"sticky bit (mode {mode:04o})", severe=False)
    return None


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _whiteout(parent: str, base: str, whiteouts: list[str], opaque: list[str]) -> bool:
    """Whether the member BASE in directory PARENT is a whiteout; what it removes from lower
    layers goes to WHITEOUTS (a path) or OPAQUE (a directory's whole lower content)."""
    if not base.startswith(".wh."):
        return False
    if base == ".wh..wh..opq":
        opaque.append(parent or "/")
    elif not base.startswith(".wh..wh."):  # other ".wh..wh." names are aufs metadata
        whiteouts.append(f"{parent}/{base[4:]}")
    return True


def _walk(stream: Union[BinaryIO, TarSplitStream], detector: LayerDetector, workdir: Path,
          hazards: list[Hazard], whiteouts: list[str], opaque: list[str],
          symlinks: dict[str, str]) -> int:
    entries = 0
    walker = TarWalker(stream)
    looks_interesting = CANDIDATE_BYTES.search
    # A hard link names a member earlier in the same layer: the names seen so far (hashed,
    # a few bytes each), to tell a hard link whose target is missing.
    names: set[int] = set()
    remember = names.add
    hardlinks: list[tuple[str, bytes]] = []
    for entry in walker:
        entries += 1
        kind = entry.kind
        raw = entry.name
        remember(hash(raw))
        # Most members are ordinary files no detector cares about: a few bytes checks and
        # one regex decide that before any decoding.
        if (kind in _PLAIN_KINDS and raw[:1] != b"/" and b".." not in raw
                and b".wh." not in raw and entry.size <= MAX_MEMBER_SIZE
                and not entry.mode & ODD_MODE and not looks_interesting(raw)
                and not raw.endswith(CANDIDATE_SUFFIXES)):
            continue
        name = _decode(raw)
        path, hazard = normalize(name)
        if hazard:
            hazards.append(Hazard(hazard, name, f"tar member name {name!r}",
                                  severe=hazard == "path-traversal"))
        if entry.size > MAX_MEMBER_SIZE:
            hazards.append(Hazard("absurd-size", path or name,
                                  f"header claims {entry.size} bytes; rest of layer unread",
                                  severe=True))
            break
        if path is None:
            continue
        parent, _, base = path.rpartition("/")
        if _whiteout(parent, base, whiteouts, opaque):
            continue
        if kind in (CHARDEV, BLOCKDEV):
            # debootstrap and mmdebstrap write /dev/console, /dev/null, /dev/ptmx... into
            # real base images: layer hygiene, reported, never a failure by itself (the
            # walker creates nothing, so a device node cannot reach the host).
            where = "in a layer" if path.startswith("/dev/") else "outside /dev"
            hazards.append(Hazard("device-file", path, f"device node {where}",
                                  severe=False))
            continue
        if entry.mode & ODD_MODE:
            odd = mode_hazard(path, kind, entry.mode)
            if odd is not None:
                hazards.append(odd)
        link = _decode(entry.link)
        if kind == SYMLINK:
            symlinks[path] = link
            if escapes_root(path, link):
                hazards.append(Hazard("symlink-escape", path,
                                      f"points outside the image: {link}", severe=False))
        elif kind == HARDLINK:
            if normalize(link)[1] == "path-traversal":
                hazards.append(Hazard("path-traversal", path, f"hard link to {link!r}",
                                      severe=True))
                continue
            hardlinks.append((path, entry.link))
        want = detector.visit(path, kind, entry.size, link)
        if want == WANT_MEMORY:
            detector.content(path, walker.read_data())
        elif want == WANT_PREFIX:
            detector.content_prefix(path, walker.read_more, walker.skip_more)
        elif want == WANT_FILE:
            target = workdir / f"{entries}-{base}"
            with open(target, "wb") as out:
                walker.copy_data(out)
            detector.content_file(path, target)
    for path, linked in hardlinks:
        bare = linked[2:] if linked.startswith(b"./") else linked.lstrip(b"/")
        if not {hash(bare), hash(b"./" + bare), hash(b"/" + bare)} & names:
            hazards.append(Hazard(
                "hardlink-target-missing", path, f"hard link to {_decode(linked)!r}, which "
                "this layer does not hold: the file is empty or missing when unpacked",
                severe=False))
    return entries


def _read_layer(job: LayerJob, walk: Callable[[Union[BinaryIO, TarSplitStream]], None]
                ) -> list[tuple[str, str]]:
    """Stream JOB's layer through WALK: in place from local storage (through its
    tar-split), else from its blob, hashed as it streams. Returns (member, why) for the
    members whose content local storage refused to read; raises TarError naming the layer
    when it cannot be read or does not match its digest."""
    location = job.location
    if isinstance(location, TarSplitLayer):
        try:
            with TarSplitStream(location) as stream:
                walk(stream)
                return list(stream.refused)
        except (TarError, TarSplitError, OSError, EOFError) as exc:
            raise TarError(f"layer {job.digest} is unreadable in local storage: {exc}") \
                from exc
    try:
        raw = _RangeFile(location, job.digest)
    except (OSError, ValueError) as exc:
        raise TarError(f"cannot open layer blob: {exc}") from exc
    try:
        with open_layer(raw) as stream:
            walk(stream)
        actual = raw.actual_digest()
    except (TarError, OSError, EOFError, zstandard.ZstdError) as exc:
        raise TarError(f"layer {job.digest} is unreadable: {exc}") from exc
    finally:
        raw.release()
    if actual is not None:
        raise TarError(f"layer {job.digest} does not match its digest (its bytes hash to "
                       f"{actual}): refused")
    return []


def scan_layer(job: LayerJob) -> LayerScan:
    """Scan one layer; errors reading it end up in `LayerScan.error`, not raised."""
    hazards: list[Hazard] = []
    whiteouts: list[str] = []
    opaque: list[str] = []
    symlinks: dict[str, str] = {}
    error: Optional[str] = None
    entries = 0
    with tempfile.TemporaryDirectory(prefix="aipcc-validate-") as tmp:
        detector = LayerDetector()

        def walk(stream: Union[BinaryIO, TarSplitStream]) -> None:
            nonlocal entries
            entries = _walk(stream, detector, Path(tmp), hazards, whiteouts, opaque, symlinks)

        try:
            hazards.extend(Hazard("unsafe-content-path", name, f"content not read: {why}",
                                  severe=True) for name, why in _read_layer(job, walk))
        except TarError as exc:
            error = str(exc)
        evidence, content_paths, found = detector.finish()
    budget = Budget(len(symlinks))
    try:
        for path in symlinks:
            if resolve_link(path, symlinks, budget) is None:
                hazards.append(Hazard("symlink-loop", path,
                                      f"-> {symlinks[path]} never resolves", severe=False))
    except BudgetExceeded:
        hazards.append(Hazard("symlink-bound", path, f"resolving the layer's {len(symlinks)} "
                              f"symlinks takes more than {budget.total} steps: a hostile "
                              "layer", severe=True))
    return LayerScan(
        digest=job.digest,
        entries=entries,
        evidence=tuple(evidence),
        whiteouts=tuple(whiteouts),
        opaque_dirs=tuple(opaque),
        content_paths=tuple(content_paths),
        symlinks=tuple((p, t) for p, t in symlinks.items() if p.startswith(TOOLKIT_PREFIXES)),
        hazards=tuple(hazards + found),
        error=error,
        index_settings=tuple(detector.index_settings),
    )


@dataclass
class LayerView:
    """What one layer says about any path: each member's kind (the last member of a name
    counts), the targets of its symlinks and hard links, its whiteouts and opaque
    directories; and the bytes of the one regular file WANTED, if it holds it (`size`
    bytes, read when within the reader's limit)."""

    wanted: str
    kinds: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    whiteouts: list[str] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    size: int = 0
    content: Optional[bytes] = None


def _view(stream: Union[BinaryIO, TarSplitStream], view: LayerView, limit: int) -> None:
    walker = TarWalker(stream)
    for entry in walker:
        path, _ = normalize(_decode(entry.name))
        if path is None:
            continue
        parent, _, base = path.rpartition("/")
        if _whiteout(parent, base, view.whiteouts, view.opaque):
            continue
        view.kinds[path] = entry.kind
        if entry.kind == SYMLINK:
            view.links[path] = _decode(entry.link)
        elif entry.kind == HARDLINK:
            view.links[path] = normalize(_decode(entry.link))[0] or ""
        if path == view.wanted:
            view.size = entry.size
            view.content = walker.read_data() \
                if entry.kind == REGULAR and entry.size <= limit else None


def view_layer(job: LayerJob, wanted: str, limit: int) -> LayerView:
    """Walk one layer for a lookup of paths (a second read, after the scans). Raises
    TarError when the layer cannot be read, does not match its digest, or local storage
    refuses WANTED's content."""
    view = LayerView(wanted)
    refused = dict(_read_layer(job, lambda stream: _view(stream, view, limit)))
    if wanted in refused:
        raise TarError(f"layer {job.digest}: {wanted} not read: {refused[wanted]}")
    return view
