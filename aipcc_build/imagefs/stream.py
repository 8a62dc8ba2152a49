"""One layer's tar as a stream: from its blob (decompressed by its magic, the blob hashed
beside the read and the tar as it passes) or in place from containers/storage (through its
tar-split).

The blob's hash is checked against the digest it is stored under; the tar's hash is the
layer's diffID, which the image config's `rootfs.diff_ids` must list. gzip is inflated
with python-isal (about twice as fast as zlib) in a thread of its own.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import lzma
import os
import queue
import threading
from typing import Any, BinaryIO, Callable, Optional, Union

import zstandard
from isal import igzip_lib

from .blobs import BlobLocation, LayerJob, TarSplitLayer
from .tar import CHUNK, TarError
from .tarsplit import TarSplitError, TarSplitStream


class _WindowHash:
    """The digest of a window of a file, computed in a thread of its own with positional
    reads on the caller's descriptor (no second open, no shared offset): the thread that
    inflates the blob then only inflates, and the hash runs on another core. Reading the
    blob once instead, hashing what the inflating thread reads in that thread, spared
    0.15-0.2 s of system time on bench/layer_reader.py's 0.9 GB of layers and cost 0.2-0.4 s
    more user time (paired runs); hashing the tar there too, each block as it is inflated,
    cost more still."""

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

    @property
    def size(self) -> int:
        return self._end - self._start

    def pread(self, offset: int, size: int) -> bytes:
        """SIZE bytes of the window from OFFSET (fewer at its end), the read position
        untouched."""
        size = max(0, min(size, self.size - offset))
        return os.pread(self._file.fileno(), size, self._start + offset) if size else b""

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


class _Codec:
    """One compression as containers/image knows it: the magic it is detected by, and a
    decompressor of one stream (`decompress(data, max_length)`, `eof`, `unused_data`,
    `needs_input`)."""

    def __init__(self, name: str, magic: bytes, new: Callable[[], Any],
                 errors: tuple[type[BaseException], ...]) -> None:
        self.name = name
        self.magic = magic
        self.new = new
        self.errors = errors


def _gzip() -> Any:
    return igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_GZIP)


def _xz() -> Any:
    return lzma.LZMADecompressor(format=lzma.FORMAT_XZ)


# containers/image's magics (pkg/compression): gzip's includes deflate's method byte.
# isal's stubs type IsalError as an instance, not a class.
_ISAL_ERROR: type[Exception] = igzip_lib.IsalError  # type: ignore[assignment]
GZIP = _Codec("gzip", b"\x1f\x8b\x08", _gzip, (_ISAL_ERROR, OSError, ValueError))
BZIP2 = _Codec("bzip2", b"BZh", bz2.BZ2Decompressor, (OSError, ValueError))
XZ = _Codec("xz", b"\xfd7zXZ\x00", _xz, (lzma.LZMAError,))
_CODECS = (GZIP, BZIP2, XZ)
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# klauspost/compress's default (the engine's decoder): frames with a larger window are
# refused; the zstd library's own default (128 MiB) would refuse some the engine reads.
ZSTD_MAX_WINDOW = 1 << 29


# Compressed bytes handed to a decompressor at once: a quarter of the output block keeps
# both in the cache (measured: 10% less CPU for isal than 1 MiB).
_INPUT = CHUNK // 4


class RefusedLayer(TarError):
    """The engine refuses the layer's bytes: its compression, its tar or its digest."""


_ZSTD_SKIPPABLE = b"\x2a\x4d\x18"  # after a first byte 0x50 to 0x5f


def _zstd_frames(raw: _RangeFile) -> None:
    """Walk the frames of a zstd blob by their headers and block sizes (no decompressing)
    and refuse one whose last frame is cut short or that ends in bytes that are no frame:
    Go's decoder refuses both, the zstd library's stream reader stops quietly."""
    pos = 0
    end = raw.size
    while pos < end:
        head = raw.pread(pos, 14)
        if head[1:4] == _ZSTD_SKIPPABLE and 0x50 <= head[0] <= 0x5F and len(head) >= 8:
            pos += 8 + int.from_bytes(head[4:8], "little")
            continue
        if head[:4] != ZSTD_MAGIC or len(head) < 6:
            raise RefusedLayer(f"{end - pos} bytes at byte {pos} of the zstd blob are no "
                               "zstd frame (the engine refuses them: magic number mismatch)")
        descriptor = head[4]
        single = descriptor & 0x20
        size_flag = descriptor >> 6
        pos += 5 + (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3] + (
            (1 if single else 0), 2, 4, 8)[size_flag]
        while True:
            block = raw.pread(pos, 3)
            if len(block) < 3:
                raise RefusedLayer("the zstd blob ends inside a frame (unexpected EOF)")
            header = int.from_bytes(block, "little")
            kind, size = (header >> 1) & 3, header >> 3
            pos += 3 + (1 if kind == 1 else size)
            if header & 1:
                break
        pos += 4 if descriptor & 4 else 0
    if pos > end:
        raise RefusedLayer("the zstd blob ends inside a frame (unexpected EOF)")


# glibc's mallopt parameters, and what an inflating process sets them to: the blocks
# decompressed are each a fresh bytes of up to CHUNK, made in the inflating thread and
# freed in the reader's. glibc's own thresholds move with what is freed, and with them it
# returned the pages of freed blocks to the kernel and faulted fresh ones in, block after
# block (150,000 to 200,000 page faults a GiB, measured: as much system time as the
# verification floor spends in all). Fixed thresholds above the block size keep freed
# blocks for the next ones.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_KEPT_FREE = 64 << 20
_ALLOCATED_BY_HEAP = 32 << 20  # glibc's largest mmap threshold on 64-bit
_allocator_tuned = False


def _keep_freed_blocks() -> None:
    """Once per process: glibc's allocator keeps freed memory for reuse (no-op where the
    C library has no mallopt)."""
    global _allocator_tuned
    if _allocator_tuned:
        return
    _allocator_tuned = True
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, _ALLOCATED_BY_HEAP)
    mallopt(_M_TRIM_THRESHOLD, _KEPT_FREE)


class _Inflating(io.RawIOBase):
    """A blob of one or more concatenated streams of CODEC, decompressed in a thread of its
    own (the C decompressors release the GIL), as Go's readers read it: every stream to
    its end, and after the last one nothing but the end of the blob. What follows a stream
    must be another stream: trailing bytes, zeros among them, are refused ("gzip: invalid
    header"), where Python's readers skip them."""

    def __init__(self, raw: _RangeFile, codec: _Codec) -> None:
        self._raw = raw
        self._codec = codec
        self._queue: queue.Queue[Union[bytes, BaseException]] = queue.Queue(4)
        self._stopped = threading.Event()
        self._block = b""  # the last block taken, read up to _at
        self._at = 0
        self._done = False
        self._thread = threading.Thread(target=self._run, name=f"{codec.name}-inflate",
                                        daemon=True)
        self._thread.start()

    def readable(self) -> bool:
        return True

    def _put(self, item: Union[bytes, BaseException]) -> bool:
        while not self._stopped.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            self._inflate()
            self._put(b"")
        except BaseException as exc:  # handed to the reader, raised in its thread
            self._put(exc)

    def _inflate(self) -> None:
        codec = self._codec
        stream = codec.new()
        # Compressed bytes are read into one buffer, reused (the decompressors copy what
        # they leave unconsumed): no block allocated and copied per read.
        held = memoryview(bytearray(_INPUT))
        data: Union[bytes, memoryview] = b""
        while not self._stopped.is_set():
            if stream.eof:
                rest = stream.unused_data
                while len(rest) < len(codec.magic):
                    more = self._raw.read(CHUNK)
                    if not more:
                        break
                    rest += more
                if not rest:
                    return  # the last stream ended at the end of the blob
                if not rest.startswith(codec.magic):
                    raise RefusedLayer(
                        f"{len(rest)}{'+' if len(rest) >= CHUNK else ''} bytes after the "
                        f"{codec.name} stream that are not another {codec.name} stream "
                        f"(the engine refuses them: {codec.name}: invalid header)")
                stream, data = codec.new(), rest
            if not data and stream.needs_input:
                got = self._raw.readinto(held)
                data = held[:got]
                if not got:
                    raise RefusedLayer(f"the {codec.name} stream ends before its end "
                                       "(unexpected EOF)")
            try:
                out = stream.decompress(data, CHUNK)
            except codec.errors as exc:
                raise RefusedLayer(f"{codec.name}: {exc}") from exc
            data = b""
            if out and not self._put(out):
                return

    def read(self, size: int = -1) -> bytes:
        """Up to SIZE decompressed bytes (a block as the thread made it, uncopied, when SIZE
        covers it); b"" at the end."""
        while self._at == len(self._block) and not self._done:
            item = self._queue.get()
            if isinstance(item, BaseException):
                self._done = True
                raise item
            if not item:
                self._done = True
            self._block, self._at = item, 0
        start, left = self._at, len(self._block) - self._at
        if start == 0 and (size < 0 or size >= left):
            self._at = left
            return self._block
        end = start + (left if size < 0 else min(size, left))
        self._at = end
        return self._block[start:end]

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._stopped.set()
        self._thread.join()
        super().close()


def open_layer(raw: _RangeFile) -> tuple[BinaryIO, bool]:
    """The decompressed stream of a blob, by its magic bytes as containers/image detects
    them (media types can lie: an xz layer under a +gzip type is read as xz), and whether
    it was compressed."""
    magic = raw.read(6) or b""
    raw.rewind()
    for codec in _CODECS:
        if magic.startswith(codec.magic):
            _keep_freed_blocks()
            return _Inflating(raw, codec), True  # type: ignore[return-value]
    if magic[:4] == ZSTD_MAGIC:
        _zstd_frames(raw)
        _keep_freed_blocks()
        # zstd:chunked is many frames plus skippable ones: keep reading across frames.
        reader = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW).stream_reader(
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
    tar-split), else from its blob, hashed as it streams. Raises RefusedLayer naming the
    layer and the reason when the engine would refuse it (its compression, its tar, its
    digest), TarError when it cannot be read."""
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
    except (TarError, EOFError, zstandard.ZstdError) as exc:
        # What the walker or a decompressor refuses, Go's readers refuse too.
        raise RefusedLayer(f"layer {job.digest} is refused by the container engine: "
                           f"{exc}") from exc
    except OSError as exc:
        raise TarError(f"layer {job.digest} is unreadable: {exc}") from exc
    finally:
        raw.release()
    if actual != job.digest:
        raise RefusedLayer(f"layer {job.digest} is refused by the container engine: it "
                           f"does not match its digest (its bytes hash to {actual})")
    return LayerRead(diff_id or actual, [])
