"""One layer's tar as a stream: from its blob (decompressed by its magic, the blob hashed
beside the read and the tar as it passes) or in place from containers/storage (through its
tar-split).

The blob's hash is checked against the digest it is stored under; the tar's hash is the
layer's diffID, which the image config's `rootfs.diff_ids` must list. gzip is inflated
with python-isal (about twice as fast as zlib) in a thread of its own.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from typing import BinaryIO, Callable, Optional, Union

import zstandard
from isal import igzip_threaded

from .blobs import BlobLocation, LayerJob, TarSplitLayer
from .tar import CHUNK, TarError
from .tarsplit import TarSplitError, TarSplitStream

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class _WindowHash:
    """The digest of a window of a file, computed in a thread of its own with positional
    reads on the caller's descriptor (no second open, no shared offset): the thread that
    inflates the blob then only inflates, and the hash runs on another core."""

    def __init__(self, fd: int, start: int, end: int, algorithm: str) -> None:
        self.algorithm = algorithm
        self._hash = hashlib.new(algorithm)
        self._error: Optional[OSError] = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(fd, start, end),
                                        name="blob-digest", daemon=True)
        self._thread.start()

    def _run(self, fd: int, pos: int, end: int) -> None:
        view = memoryview(bytearray(CHUNK))
        try:
            while pos < end and not self._stopped.is_set():
                got = os.preadv(fd, [view[:min(CHUNK, end - pos)]], pos)
                if not got:
                    return  # the file shrank under us: the digest will not match
                self._hash.update(view[:got])
                pos += got
        except OSError as exc:
            self._error = exc

    def digest(self) -> str:
        """The window's digest, once the thread has read all of it."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return f"{self.algorithm}:{self._hash.hexdigest()}"

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


class _RangeFile(io.RawIOBase):
    """A read-only window on a file, so archives are read in place; its digest is computed
    beside the read (`_WindowHash`), so the scan that reads the blob anyway also checks
    it."""

    def __init__(self, location: BlobLocation, digest: str) -> None:
        algorithm, _, self._expected = digest.partition(":")
        if algorithm not in hashlib.algorithms_available:
            raise ValueError(f"unknown digest algorithm in {digest!r}")
        self.algorithm = algorithm
        self._file = open(location.path, "rb")  # noqa: SIM115 - closed in release()
        size = os.fstat(self._file.fileno()).st_size
        self._start = location.offset
        self._end = size if location.length is None else location.offset + location.length
        self._file.seek(self._start)
        self._pos = self._start
        self._hashing = _WindowHash(self._file.fileno(), self._start, self._end, algorithm)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._end - self._pos)
        if want <= 0:
            return 0
        got = self._file.readinto(view[:want])
        self._pos += got
        return got

    def rewind(self) -> None:
        self._file.seek(self._start)
        self._pos = self._start

    def digest(self) -> str:
        """After the scan: the blob's digest (of all of it, read or not by the
        decompressor)."""
        return self._hashing.digest()

    def close(self) -> None:
        # Decompressors close their source when done; the file stays open for `digest`
        # until `release`.
        super().close()

    def release(self) -> None:
        self._hashing.stop()
        self._file.close()


class _HashedTar:
    """The decompressed tar, hashed as it is read: its digest is the layer's diffID."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._hash = hashlib.sha256()

    def read(self, size: int) -> bytes:
        data = self._stream.read(size)
        self._hash.update(data)
        return data

    def diff_id(self) -> str:
        """After the walk: the tar's digest, to its last byte (what follows the end of
        the archive counts too)."""
        while self.read(CHUNK):
            pass
        return f"sha256:{self._hash.hexdigest()}"


LayerStream = Union[BinaryIO, TarSplitStream, _HashedTar]


def open_layer(raw: _RangeFile) -> tuple[BinaryIO, bool]:
    """The decompressed stream of a blob, by its magic bytes (media types can lie), and
    whether it was compressed."""
    magic = raw.read(4) or b""
    raw.rewind()
    if magic[:2] == GZIP_MAGIC:
        # isal reads every member (eStargz layers are multi-member gzip) and, threaded,
        # inflates in a thread without the GIL while this one walks the headers.
        return igzip_threaded.open(raw, "rb", threads=1), True
    if magic == ZSTD_MAGIC:
        # zstd:chunked is many frames plus skippable ones: keep reading across frames.
        reader = zstandard.ZstdDecompressor().stream_reader(
            raw, read_size=CHUNK, read_across_frames=True)  # type: ignore[arg-type]
        return reader, True
    return io.BufferedReader(raw, CHUNK), False


class LayerRead:
    """What reading a layer found besides its members: its diffID, and the members whose
    content local storage refused to read (member, why)."""

    def __init__(self, diff_id: str, refused: list[tuple[str, str]]) -> None:
        self.diff_id = diff_id
        self.refused = refused


def read_layer(job: LayerJob, walk: Callable[[LayerStream], None]) -> LayerRead:
    """Stream JOB's layer through WALK: in place from local storage (through its
    tar-split), else from its blob, hashed as it streams. Raises TarError naming the layer
    when it cannot be read or does not match its digest."""
    location = job.location
    if isinstance(location, TarSplitLayer):
        try:
            with TarSplitStream(location) as stream:
                walk(stream)
                # containers/storage checked the diffID when it applied the layer, and
                # the layer's digest here is that diffID.
                return LayerRead(job.digest, list(stream.refused))
        except (TarError, TarSplitError, OSError, EOFError) as exc:
            raise TarError(f"layer {job.digest} is unreadable in local storage: {exc}") \
                from exc
    try:
        raw = _RangeFile(location, job.digest)
    except (OSError, ValueError) as exc:
        raise TarError(f"cannot open layer blob: {exc}") from exc
    try:
        decompressed, compressed = open_layer(raw)
        with decompressed:
            # An uncompressed blob stored under its sha256 is its own diffID.
            tar = _HashedTar(decompressed) if compressed or raw.algorithm != "sha256" \
                else None
            walk(tar or decompressed)
            diff_id = tar.diff_id() if tar else None
        actual = raw.digest()
    except (TarError, OSError, EOFError, zstandard.ZstdError) as exc:
        raise TarError(f"layer {job.digest} is unreadable: {exc}") from exc
    finally:
        raw.release()
    if actual != job.digest:
        raise TarError(f"layer {job.digest} does not match its digest (its bytes hash to "
                       f"{actual}): refused")
    return LayerRead(diff_id or actual, [])
