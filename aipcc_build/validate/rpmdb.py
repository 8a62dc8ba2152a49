"""Read package names and versions from an RPM sqlite database (RHEL 9 and later).

The database is a temporary copy taken from a layer. Its `Name` index table lists package
names without parsing anything, so only the headers of interesting packages are decoded.
A header blob is an RPM header without its 8-byte magic: a big-endian index count and data
length, 16-byte index entries (tag, type, offset, count), then the data store.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Callable, Optional

TAG_NAME, TAG_VERSION, TAG_RELEASE = 1000, 1001, 1002
TYPE_STRING = 6
_WANTED = (TAG_NAME, TAG_VERSION, TAG_RELEASE)


class RpmdbError(Exception):
    """The database or one of its headers cannot be decoded."""


def header_strings(blob: bytes) -> dict[int, str]:
    """NAME, VERSION and RELEASE of one header blob."""
    if len(blob) < 8:
        raise RpmdbError("header blob too short")
    count, data_len = struct.unpack_from(">II", blob, 0)
    store = 8 + 16 * count
    if store + data_len > len(blob):
        raise RpmdbError("header blob shorter than its index says")
    found: dict[int, str] = {}
    for i in range(count):
        tag, kind, offset, _ = struct.unpack_from(">iiii", blob, 8 + 16 * i)
        if tag in _WANTED and kind == TYPE_STRING and 0 <= offset < data_len:
            end = blob.find(b"\0", store + offset, store + data_len)
            if end < 0:
                raise RpmdbError(f"unterminated string for tag {tag}")
            found[tag] = blob[store + offset:end].decode("utf-8", "replace")
    return found


def read_packages(db: Path, interesting: Callable[[str], bool],
                  wal: Optional[Path] = None) -> list[tuple[str, str, str]]:
    """(name, version, release) of every installed package whose name is interesting.

    With a write-ahead log next to the database, sqlite must replay it (read-only, in our
    temporary directory); without one the file is opened immutable, touching nothing.
    """
    import sqlite3  # here: only images holding an RPM database need it

    uri = f"file:{db}?mode=ro" if wal is not None else f"file:{db}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise RpmdbError(str(exc)) from exc
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if "Packages" not in tables:
            raise RpmdbError("no Packages table")
        if "Name" in tables:
            hnums = [h for key, h in conn.execute("SELECT key, hnum FROM Name")
                     if interesting(str(key))]
            blobs = [row[0] for h in hnums
                     for row in conn.execute("SELECT blob FROM Packages WHERE hnum = ?", (h,))]
        else:
            blobs = [row[0] for row in conn.execute("SELECT blob FROM Packages")]
        packages = []
        for blob in blobs:
            strings = header_strings(bytes(blob))
            name = strings.get(TAG_NAME, "")
            if name and interesting(name):
                packages.append((name, strings.get(TAG_VERSION, ""),
                                 strings.get(TAG_RELEASE, "")))
        return packages
    except sqlite3.Error as exc:
        raise RpmdbError(str(exc)) from exc
    finally:
        conn.close()

