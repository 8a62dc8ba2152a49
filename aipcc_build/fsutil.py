"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Union


def write_atomic(path: Union[str, Path], data: Union[str, bytes]) -> None:
    """Replace PATH's content at once. A symbolic link stays a link: its target is replaced
    (renamed into the target's directory); an existing file keeps its mode (new files get
    0644); the temporary file is removed on every failure."""
    import tempfile  # here: commands that write nothing do not pay for it

    path = Path(os.path.realpath(path)) if Path(path).is_symlink() else Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def same_content(path: Union[str, Path], text: str) -> bool:
    """Whether the file at PATH holds exactly TEXT (a missing file does not): drift checks."""
    try:
        return Path(path).read_text(encoding="utf-8") == text
    except FileNotFoundError:
        return False
