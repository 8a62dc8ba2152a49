"""The one writer of output files: a reader sees the old file or the new one, never half of
one, and what is not a regular file is never replaced. And the opener of input files that
must be regular ones (keys, wheels), which never blocks on a FIFO or a device."""

from __future__ import annotations

import errno
import io
import os
import stat

from .functional import contextmanager, suppress
from .patterns import lazy

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any, BinaryIO, Optional, Union

    # Paths as strings within: pathlib (with the urllib.parse and ipaddress it loads) cost
    # a validation that writes one cache entry as much as the rest of its run (issue 37).
    StrPath = Union[str, os.PathLike[str]]
    Payload = Union[str, bytes, Iterable[bytes]]


def write_atomic(path: StrPath, data: Payload) -> None:
    """Write DATA (text, bytes, or chunks of bytes) to PATH through `output`."""
    with output(path) as handle:
        for chunk in _chunks(data):
            handle.write(chunk)


@contextmanager
def output(path: StrPath) -> Iterator[BinaryIO]:
    """A binary handle whose content becomes PATH's when the block ends without an error.

    A regular file, or a new one, is replaced at once through a temporary file beside it
    (renamed over it; the temporary is removed on every failure); a symbolic link to one
    stays a link and its target is replaced (no directory is made where a link points); an
    existing file keeps its mode (new files get 0644). What exists and is not a regular
    file is never replaced: a character device (a `/dev/null`), a FIFO, a pipe or terminal
    behind `/dev/stdout` is written into as it is; a directory, a block device or a socket
    is refused. A write counts once it is read back: the temporary must hold what was
    written before it is renamed, and PATH must be that file after (else EIO naming PATH).
    The first write of this process into a directory removes the temporaries killed
    writers left there. Every file-system error names PATH
    (not the temporary file), so the one place that maps errors says which path failed."""
    try:
        with _output(os.fspath(path)) as handle:
            yield handle
    except OSError as exc:
        if exc.filename == str(path):
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


@contextmanager
def _output(path: str) -> Iterator[BinaryIO]:
    try:
        found: Optional[os.stat_result] = os.stat(path)
    except FileNotFoundError:
        found = None
    own = _descriptor(path)
    if found is not None and (not stat.S_ISREG(found.st_mode) or own is not None):
        with _into(path, found.st_mode, own) as handle:
            yield handle
        return
    if os.path.islink(path):
        # The link's target is written, in the directory it names: none is made there
        # (a dangling link would otherwise create directories anywhere it points).
        path = os.path.realpath(path)
    elif os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = stat.S_IMODE(found.st_mode) if found is not None else 0o644
    _remove_stale(path)
    fd, tmp = _temporary(path)
    try:
        with suppress(OSError):  # a file system without locks: the pid tells
            import fcntl  # only where a file is written: not on a read-only start

            fcntl.flock(fd, fcntl.LOCK_EX)  # held until closed: the temporary is in use
        written = _Recorded(fd)
        with io.BufferedWriter(written) as handle:
            yield handle  # a BinaryIO
            handle.flush()
            os.fsync(fd)
            _read_back(fd, written, path)
            os.fchmod(fd, mode)
            os.replace(tmp, path)
            _check_renamed(fd, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class _Recorded(io.RawIOBase):
    """The temporary's descriptor written through, keeping the length and the CRC-32 of
    every byte it was given: what the file must hold when it is read back (a checksum made
    for lost and damaged bytes, over twice as fast as SHA-256 on an archive's gigabytes)."""

    def __init__(self, fd: int) -> None:
        import zlib  # only where a file is written: not on a read-only start

        self.fd = fd
        self.size = 0
        self.crc = 0
        self._crc32 = zlib.crc32

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            done += os.write(self.fd, view[done:])
        self.crc = self._crc32(view, self.crc)
        self.size += len(view)
        return len(view)

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


def _read_back(fd: int, written: _Recorded, path: str) -> None:
    """A write counts once it is read back: the temporary, synced and dropped from the page
    cache where the kernel can (its pages are clean), must hold exactly what was written
    (a disk or a file system that loses bytes without an error is caught here, before the
    rename makes it PATH's)."""
    import zlib

    if hasattr(os, "posix_fadvise"):
        with suppress(OSError):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    found = size = 0
    while True:
        block = os.pread(fd, 1 << 20, size)
        if not block:
            break
        found = zlib.crc32(block, found)
        size += len(block)
    if size != written.size or found != written.crc:
        raise OSError(errno.EIO, f"read back {size} bytes that differ from the "
                      f"{written.size} written: not replaced", path)


def _check_renamed(fd: int, path: str) -> None:
    """PATH, after the rename, is the regular file that was written and read back (not
    something another process put there meanwhile)."""
    now, ours = os.stat(path), os.fstat(fd)
    if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (ours.st_dev,
                                                                      ours.st_ino):
        raise OSError(errno.EIO, "replaced by another file while it was written", path)


def _temporary(path: str) -> tuple[int, str]:
    """A new file beside PATH (`.NAME.PID.RANDOM.tmp`), open for writing, made as
    `tempfile.mkstemp` makes one (exclusively, mode 0600, links not followed) without
    loading `tempfile`, which loads shutil, random, bz2 and lzma: as much as the rest of a
    warm validation that writes one cache entry (issue 37)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    where, name = os.path.split(path)
    for _ in range(100):
        tmp = os.path.join(where, f".{name[:64]}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", where or ".")


# The directories this process has cleaned (see _remove_stale): listing a directory of
# thousands of files before each of thousands of writes (an index generation) would cost
# more than the writes.
_CLEANED: set[str] = set()


def _remove_stale(path: str) -> None:
    """Remove the temporaries that writers killed mid-write (SIGKILL, a power cut) left in
    PATH's directory, once per process and directory (before the first write there):
    regular files of our naming whose writer's process is gone here and whose lock (held by
    every live writer, wherever its process runs) is free. Anything else of a similar name
    (a link, a directory, another tool's file) is left alone."""
    where = os.path.abspath(os.path.dirname(path))
    if where in _CLEANED:
        return
    try:
        names = os.listdir(where)
    except OSError:
        return
    _CLEANED.add(where)
    for name in names:
        if not (name.startswith(".") and name.endswith(".tmp")):
            continue
        parts = name[1:-len(".tmp")].rsplit(".", 2)
        if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or \
                len(parts[2]) != 12 or not all(c in "0123456789abcdef" for c in parts[2]):
            continue
        if _alive(int(parts[1])):
            continue
        with suppress(OSError):
            _remove_if_unlocked(os.path.join(where, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def _remove_if_unlocked(tmp: str) -> None:
    fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY |
                 getattr(os, "O_CLOEXEC", 0))
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            return
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a live writer holds it
        now = os.lstat(tmp)
        if (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino):
            os.unlink(tmp)
    finally:
        os.close(fd)


def _into(path: str, mode: int, own: Optional[int]) -> BinaryIO:
    """A device, FIFO, pipe or open descriptor opened to be written into as it is (no
    O_TRUNC, no O_CREAT: nothing about the node changes but what it receives; a regular file
    behind /dev/stdout is appended to, as the process's own output is). A block device or a
    socket is refused: a report written over a disk destroys it; a socket cannot be
    opened."""
    import errno

    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        raise OSError(errno.EINVAL, "neither a regular file, a character device nor a FIFO: "
                      "refused", path)
    if own is not None and own >= 0:
        import sys

        for stream in (sys.stdout, sys.stderr):  # what the process printed comes first
            stream.flush()
        return os.fdopen(os.dup(own), "wb")  # where this process writes it: same offset
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY), "wb")


_DESCRIPTOR = lazy(r"^/(?:dev|proc/(self|thread-self|\d+))/fd/(\d+)$")


def _descriptor(path: str) -> Optional[int]:
    """When PATH names an open descriptor (/dev/stdout -> /proc/self/fd/1): its number if
    it is this process's, else -1; None for any other path. The file behind a descriptor is
    a process's output, which a rename would cut it off from."""
    link = path
    for _ in range(40):
        match = _DESCRIPTOR.match(os.path.normpath(os.path.abspath(link)))
        if match:
            mine = match.group(1) in (None, "self", "thread-self", str(os.getpid()))
            return int(match.group(2)) if mine else -1
        try:
            target = os.readlink(link)
        except OSError:
            return None
        link = os.path.join(os.path.dirname(link), target)
    return None


class NotRegularFile(OSError):
    """An input that must be a regular file is a FIFO, a device, a directory or a socket."""


def open_regular(path: StrPath) -> BinaryIO:
    """PATH opened for reading when it is (or links to) a regular file; NotRegularFile
    (strerror naming the kind) for anything else, without blocking on it: a FIFO without
    a writer would otherwise hang the open, a device would be read forever."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket")
        raise NotRegularFile(0, f"not a regular file ({kind})", str(path))
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path: StrPath) -> bytes:
    """The bytes of PATH, a regular file (`open_regular`: a FIFO or a device where a file
    a user named is expected is NotRegularFile, not a read that waits or never ends)."""
    with open_regular(path) as handle:
        return handle.read()


def _chunks(data: Payload) -> Iterable[bytes]:
    if isinstance(data, str):
        return (data.encode(),)
    if isinstance(data, bytes):
        return (data,)
    return data


def same_content(path: StrPath, text: str) -> bool:
    """Whether the file at PATH holds exactly TEXT (a missing file does not): drift checks."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read() == text
    except FileNotFoundError:
        return False
