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
from typing import Optional, Union

from isal import igzip, isal_zlib

from .blobs import TarSplitLayer

SEGMENT = 2
FILE = 1
CHUNK = 1 << 20
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


def _regions(entries: list[dict[str, object]]) -> Iterator[Union[bytes, _Member]]:
    """Raw tar bytes, and the members whose content comes from a file; members without
    content (directories, links, empty files) add no bytes and are left out."""
    for entry in entries:
        kind = entry["type"]
        if kind == SEGMENT:
            payload = entry.get("payload")
            if payload:
                yield binascii.a2b_base64(payload)  # type: ignore[arg-type]
        elif kind == FILE:
            size = entry.get("size") or 0
            if not isinstance(size, int) or size < 0:
                raise TarSplitError(f"bad size {size!r} in a tar-split file entry")
            if size:
                raw = entry.get("name_raw")  # set by tar-split when the name is not UTF-8
                name = (binascii.a2b_base64(raw) if raw  # type: ignore[arg-type]
                        else str(entry.get("name") or "").encode("utf-8"))
                yield _Member(name, size)
        else:
            raise TarSplitError(f"unknown tar-split entry type {kind!r}")


def _safe_parts(name: bytes) -> Optional[list[bytes]]:
    """The path components of NAME under the layer's directory; None when it climbs out.
    A leading "/" is dropped: containers/storage applied "/x" at "x" too."""
    parts = [p for p in name.split(b"/") if p not in (b"", b".")]
    return None if not parts or b".." in parts else parts


class TarSplitStream:
    """The layer's tar as a read-only stream: `read` gives tar bytes, stopping short
    where file content begins so the caller can `skip` it instead, unopened.

    Content is opened one component at a time below the layer's directory, never
    following a symlink: a member whose path runs through a symlink, climbs out with
    "..", or is not a regular file is not opened; it reads as zeros and is listed in
    `refused` (name, why) for the scan to report.
    """

    def __init__(self, layer: TarSplitLayer) -> None:
        self._root = os.open(layer.files, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self._tar_split = igzip.open(layer.tar_split, "rb")
        except BaseException:
            os.close(self._root)
            raise
        self._source = self._read_regions()
        self._segment = b""
        self._segment_pos = 0
        self._member: Optional[_Member] = None  # file content at the current position
        self._member_pos = 0
        self._member_fd: Optional[int] = None  # opened on the first read of the member
        self._member_refused = False
        self.refused: list[tuple[str, str]] = []

    def _read_regions(self) -> Iterator[Union[bytes, _Member]]:
        # One json.loads per megabyte of lines, not per line: entries come two per member.
        rest = b""
        while True:
            try:
                chunk = self._tar_split.read(CHUNK)
            except isal_zlib.error as exc:  # type: ignore[misc]  # the stub calls it an instance
                raise TarSplitError(f"corrupt tar-split: {exc}") from exc
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop() if chunk else b""
            batch = b",".join(line for line in lines if line.strip())
            if batch:
                try:
                    yield from _regions(json.loads(b"[" + batch + b"]"))
                except (ValueError, TypeError, KeyError) as exc:
                    raise TarSplitError(f"malformed tar-split: {exc}") from exc
            if not chunk:
                return

    def _advance(self) -> bool:
        """Move to the next region; False at the end of the tar."""
        self._close_member()
        region = next(self._source, None)
        if region is None:
            return False
        if isinstance(region, bytes):
            self._segment, self._segment_pos = region, 0
        else:
            self._member, self._member_pos = region, 0
        return True

    def read(self, size: int) -> bytes:
        parts: list[bytes] = []
        while size > 0:
            if self._member is not None:
                if parts:
                    break  # the caller decides whether to read this content or skip it
                return self._read_member(size)
            if self._segment_pos < len(self._segment):
                piece = self._segment[self._segment_pos:self._segment_pos + size]
                self._segment_pos += len(piece)
                size -= len(piece)
                parts.append(piece)
            elif not self._advance():
                break
        return b"".join(parts)

    def skip(self, size: int) -> int:
        """Pass over SIZE bytes without reading them; returns how many there were."""
        skipped = 0
        while skipped < size:
            if self._member is not None:
                step = min(self._member.size - self._member_pos, size - skipped)
                self._member_pos += step
                if self._member_pos == self._member.size:
                    self._close_member()
            elif self._segment_pos < len(self._segment):
                step = min(len(self._segment) - self._segment_pos, size - skipped)
                self._segment_pos += step
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
            self.refused.append((shown, "'..' in the member name"))
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
