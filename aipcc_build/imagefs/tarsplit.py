"""A layer of containers/storage read in place: its tar-split and its files, as one tar stream.

containers/storage keeps an applied layer as a directory of files plus a tar-split
(`<id>.tar-split.gz`): gzip'd JSON lines, in tar order, holding every byte of the original
tar except file contents. Type 2 ("segment") entries carry raw tar bytes (headers,
padding, the end-of-archive blocks) in a base64 `payload`; type 1 ("file") entries name a
member whose `size` bytes of content are the file of that name in the layer's directory.
Joined, they give back the layer's tar byte for byte: it is how `skopeo copy` produces
it. The tar walker scans that stream like any other; member data it passes over is
skipped without opening the file.
"""

from __future__ import annotations

import binascii
import errno
import json
import os
import stat
from collections.abc import Iterator
from typing import Optional

from isal import igzip_threaded, isal_zlib

from .blobs import TarSplitLayer

SEGMENT = 2
FILE = 1
CHUNK = 1 << 20
# How Go's encoding/json writes tar-split entries: {"type":2,"payload":"BASE64",...} and
# {"type":1,"name":"NAME","size":N,...}, "size" left out when 0.
_SEGMENT_START = b'{"type":2,"payload":"'
_FILE_START = b'{"type":1,"name":"'
_SIZE = b'","size":'
_NO_SIZE = b'","payload":'
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted where a file should be must not hang the scan.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class TarSplitError(Exception):
    """The tar-split is malformed, or disagrees with the layer's files."""


class _Member:
    """A file entry with content: SIZE bytes of the file NAME (bytes, relative to the
    layer's directory as the tar has it)."""

    __slots__ = ("name", "size")

    def __init__(self, name: bytes, size: int) -> None:
        self.name = name
        self.size = size


def _safe_parts(name: bytes) -> Optional[list[bytes]]:
    """The path components of NAME under the layer's directory; None when it climbs out
    or cannot be a file name. A leading "/" is dropped: containers/storage applied "/x"
    at "x" too."""
    parts = [p for p in name.split(b"/") if p not in (b"", b".")]
    return None if not parts or b".." in parts or b"\0" in name else parts


class TarSplitStream:
    """The layer's tar as a read-only stream: `read` gives tar bytes, stopping short
    where file content begins so the caller can `skip` it instead, unopened.

    Content is opened one component at a time below the layer's directory, never
    following a symlink: a member whose path runs through a symlink, climbs out with
    "..", or is not a regular file is not opened; it reads as zeros and is listed in
    `refused` (name, why) for the scan to report.
    """

    # tar-split reads the layer with Go's reader, which expands a sparse member: its file
    # entry is the file the engine wrote (the logical size, holes as zeros), and a sparse
    # 1.0 map, read as part of the header, is in no entry.
    sparse_expanded = True

    def __init__(self, layer: TarSplitLayer) -> None:
        self._root = os.open(layer.files, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            # Inflated in a thread without the GIL while this one parses and walks.
            self._tar_split = igzip_threaded.open(layer.tar_split, "rb", threads=1)
        except BaseException:
            os.close(self._root)
            raise
        self._batches = self._read_batches()
        self._pairs: list[tuple[bytes, Optional[_Member]]] = []
        self._next_pair = 0
        # The tar is a run of (tar bytes, then a member's content) pairs; the position is
        # in the current pair's bytes, else in its member.
        self._segment = b""
        self._segment_pos = 0
        self._member: Optional[_Member] = None
        self._member_pos = 0
        self._member_fd: Optional[int] = None  # opened on the first read of the member
        self._member_refused = False
        self._segments_since_member: list[bytes] = []
        self.refused: list[tuple[str, str]] = []

    def _read_batches(self) -> Iterator[list[tuple[bytes, Optional[_Member]]]]:
        rest = b""
        while True:
            try:
                chunk = self._tar_split.read(CHUNK)
            except isal_zlib.error as exc:  # type: ignore[misc]  # the stub calls it an instance
                raise TarSplitError(f"corrupt tar-split: {exc}") from exc
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop() if chunk else b""
            try:
                pairs = self._parse(lines)
            except ValueError as exc:  # base64 that does not decode
                raise TarSplitError(f"malformed tar-split entry: {exc}") from exc
            yield pairs
            if not chunk:
                yield [(b"".join(self._segments_since_member), None)]
                return

    def _parse(self, lines: list[bytes]) -> list[tuple[bytes, Optional[_Member]]]:
        """Pairs of (tar bytes, the member whose content follows them) from LINES.

        Lines are sliced as Go's encoding/json writes tar-split entries (fields in a fixed
        order, base64 never escaped); any other line goes through json.loads. A layer has
        two entries per member, and slicing is several times faster than decoding JSON."""
        pairs: list[tuple[bytes, Optional[_Member]]] = []
        segments = self._segments_since_member
        a2b_base64 = binascii.a2b_base64
        for line in lines:
            if line.startswith(_SEGMENT_START):
                end = line.find(b'"', len(_SEGMENT_START))
                if end > 0 and line.find(b"\\", len(_SEGMENT_START), end) < 0:
                    if end > len(_SEGMENT_START):
                        segments.append(a2b_base64(memoryview(line)[len(_SEGMENT_START):end]))
                    continue
            elif line.startswith(_FILE_START):
                end = line.find(b'"', len(_FILE_START))
                name = line[len(_FILE_START):end]
                if end > 0 and b"\\" not in name:
                    if line.startswith(_NO_SIZE, end):
                        continue  # no content: a directory, a link, an empty file
                    digits_end = line.find(b",", end + len(_SIZE))
                    digits = line[end + len(_SIZE):digits_end]
                    if line.startswith(_SIZE, end) and digits.isdigit() and int(digits):
                        pairs.append((b"".join(segments), _Member(name, int(digits))))
                        segments.clear()
                        continue
            elif not line.strip():
                continue
            member = self._decode_entry(line, segments)
            if member is not None:
                pairs.append((b"".join(segments), member))
                segments.clear()
        return pairs

    @staticmethod
    def _decode_entry(line: bytes, segments: list[bytes]) -> Optional[_Member]:
        """One entry through json.loads: its tar bytes go to SEGMENTS; a file entry with
        content is returned."""
        try:
            entry = json.loads(line)
            kind = entry["type"]
            if kind == SEGMENT:
                if entry.get("payload"):
                    segments.append(binascii.a2b_base64(entry["payload"]))
                return None
            if kind != FILE:
                raise TarSplitError(f"unknown tar-split entry type {kind!r}")
            size = entry.get("size") or 0
            if not isinstance(size, int) or size < 0:
                raise TarSplitError(f"bad size {size!r} in a tar-split file entry")
            if not size:
                return None
            raw = entry.get("name_raw")  # set by tar-split when the name is not UTF-8
            name = binascii.a2b_base64(raw) if raw else str(entry["name"]).encode("utf-8")
            return _Member(name, size)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            raise TarSplitError(f"malformed tar-split entry: {exc}") from exc

    def _advance(self) -> bool:
        """Move to the next pair; False at the end of the tar."""
        while self._next_pair >= len(self._pairs):
            batch = next(self._batches, None)
            if batch is None:
                return False
            self._pairs, self._next_pair = batch, 0
        self._segment, self._member = self._pairs[self._next_pair]
        self._next_pair += 1
        self._segment_pos = self._member_pos = 0
        return True

    def read(self, size: int) -> bytes:
        parts: list[bytes] = []
        while size > 0:
            if self._segment_pos < len(self._segment):
                piece = self._segment[self._segment_pos:self._segment_pos + size]
                self._segment_pos += len(piece)
                size -= len(piece)
                parts.append(piece)
            elif self._member is not None:
                if parts:
                    break  # the caller decides whether to read this content or skip it
                return self._read_member(size)
            elif not self._advance():
                break
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def skip(self, size: int) -> int:
        """Pass over SIZE bytes without reading them; returns how many there were."""
        skipped = 0
        while skipped < size:
            left = len(self._segment) - self._segment_pos
            if left > 0:
                step = min(left, size - skipped)
                self._segment_pos += step
            elif self._member is not None:
                step = min(self._member.size - self._member_pos, size - skipped)
                self._member_pos += step
                if self._member_pos == self._member.size:
                    self._close_member()
            elif self._advance():
                continue
            else:
                break
            skipped += step
        return skipped

    def _read_member(self, size: int) -> bytes:
        member = self._member
        assert member is not None
        want = min(size, member.size - self._member_pos, CHUNK)
        if self._member_fd is None and not self._member_refused:
            self._member_fd = self._open_member(member.name)
            self._member_refused = self._member_fd is None
        if self._member_fd is None:
            data = bytes(want)
        else:
            data = os.pread(self._member_fd, want, self._member_pos)
            if len(data) < want:
                raise TarSplitError(f"{member.name.decode('utf-8', 'replace')}: the layer's "
                                    "file is shorter than its tar-split says")
        self._member_pos += want
        if self._member_pos == member.size:
            self._close_member()
        return data

    def _open_member(self, name: bytes) -> Optional[int]:
        shown = "/" + "/".join(p.decode("utf-8", "surrogateescape")
                               for p in name.split(b"/") if p not in (b"", b"."))
        parts = _safe_parts(name)
        if parts is None:
            self.refused.append((shown, "the member name climbs out of the layer with '..' "
                                        "or holds a NUL byte"))
            return None
        directory = self._root
        try:
            for part in parts[:-1]:
                parent = directory
                directory = os.open(part, _DIRECTORY_FLAGS, dir_fd=parent)
                if parent != self._root:
                    os.close(parent)
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=directory)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                self.refused.append((shown, "a symlink or a file stands on its path in the "
                                            "layer"))
                return None
            raise
        finally:
            if directory != self._root:
                os.close(directory)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            self.refused.append((shown, "not a regular file in the layer"))
            return None
        return fd

    def _close_member(self) -> None:
        if self._member_fd is not None:
            os.close(self._member_fd)
        self._member, self._member_fd, self._member_refused = None, None, False

    def close(self) -> None:
        self._close_member()
        self._tar_split.close()
        if self._root >= 0:
            os.close(self._root)
            self._root = -1

    def __enter__(self) -> TarSplitStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
