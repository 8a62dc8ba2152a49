"""The one writer of output files: a reader sees the old file or the new one, never half of
one, and what is not a regular file is never replaced."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Union

Payload = Union[str, bytes, Iterable[bytes]]


def write_atomic(path: Union[str, Path], data: Payload) -> None:
    """Write DATA (text, bytes, or chunks of bytes) to PATH.

    A regular file, or a new one, is replaced at once through a temporary file beside it
    (renamed over it, the temporary removed on every failure); a symbolic link to one stays a
    link and its target is replaced; an existing file keeps its mode (new files get 0644).
    What exists and is not a regular file is never replaced: a character device (a
    `/dev/null`), a FIFO, a pipe or terminal behind `/dev/stdout` is written into as it is;
    a directory, a block device or a socket is refused. Every file-system error names PATH
    (not the temporary file), so the one place that maps errors can say which path failed."""
    try:
        _write(Path(path), data)
    except OSError as exc:
        if exc.filename == str(path):
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


def _write(path: Path, data: Payload) -> None:
    try:
        found = path.stat()
    except FileNotFoundError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):
        _write_into(path, found.st_mode, data)
        return
    import tempfile  # here: commands that write nothing do not pay for it

    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(found.st_mode) if found is not None else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:64]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in _chunks(data):
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _write_into(path: Path, mode: int, data: Payload) -> None:
    """A device, FIFO or pipe written into as it is (a block device or a socket refused:
    writing a report over a disk destroys it; a socket cannot be opened)."""
    import errno

    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        raise OSError(errno.EINVAL, "not a regular file, a character device or a FIFO: "
                      "refused", str(path))
    # No O_TRUNC, no O_CREAT: nothing about the node changes but what it receives.
    fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
    with os.fdopen(fd, "wb") as handle:
        for chunk in _chunks(data):
            handle.write(chunk)


def _chunks(data: Payload) -> Iterable[bytes]:
    if isinstance(data, str):
        return (data.encode(),)
    if isinstance(data, bytes):
        return (data,)
    return data


def same_content(path: Union[str, Path], text: str) -> bool:
    """Whether the file at PATH holds exactly TEXT (a missing file does not): drift checks."""
    try:
        return Path(path).read_text(encoding="utf-8") == text
    except FileNotFoundError:
        return False
