"""Read package names and versions from an RPM sqlite database (RHEL 9 and later).

The database is a temporary copy taken from a layer. Its `Name` index table lists package
names without parsing anything, so only the headers of interesting packages are decoded.
A header blob is an RPM header without its 8-byte magic: a big-endian index count and data
length, 16-byte index entries (tag, type, offset, count), then the data store.

The database comes from an image, so it may be built to hurt: `Packages` and `Name` must be
tables (a recursive view never ends), every value must be what rpm writes (a header stored
as TEXT is refused by name), and sqlite gets a budget of steps linear in the file's size,
past which the read stops with an error the scan reports.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Callable, Optional

TAG_NAME, TAG_VERSION, TAG_RELEASE = 1000, 1001, 1002
# sqlite's budget: virtual-machine steps per byte of database, plus a floor. Reading a real
# rpmdb takes a few steps per row; a hostile query plan (a view, an unindexed join) hits
# the bound in about a second.
STEPS_PER_BYTE = 20
MIN_STEPS = 50_000_000
_STEPS_PER_CALL = 10_000  # how often sqlite calls the progress handler
_TABLES = ("packages", "name")
_SQL_TYPES = {str: "TEXT", int: "INTEGER", float: "REAL", type(None): "NULL"}
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
    budget = (MIN_STEPS + STEPS_PER_BYTE * db.stat().st_size) // _STEPS_PER_CALL
    calls = 0

    def progress() -> int:
        nonlocal calls
        calls += 1
        return 1 if calls > budget else 0  # non-zero interrupts the statement

    conn.set_progress_handler(progress, _STEPS_PER_CALL)
    try:
        kinds = {str(name).lower(): kind for kind, name in
                 conn.execute("SELECT type, name FROM sqlite_master")}
        for table in _TABLES:
            if kinds.get(table, "table") != "table":
                raise RpmdbError(f"{table.capitalize()} is a {kinds[table]}, not a table")
        if "packages" not in kinds:
            raise RpmdbError("no Packages table")
        if "name" in kinds:
            hnums = [h for key, h in conn.execute("SELECT key, hnum FROM Name")
                     if interesting(str(key))]
            rows = [(h, row[0]) for h in hnums
                    for row in conn.execute("SELECT blob FROM Packages WHERE hnum = ?", (h,))]
        else:
            rows = list(conn.execute("SELECT hnum, blob FROM Packages"))
        packages = []
        for hnum, blob in rows:
            if not isinstance(blob, bytes):
                stored = _SQL_TYPES.get(type(blob), type(blob).__name__)
                raise RpmdbError(f"the header of package {hnum} is stored as {stored}, "
                                 "not as a BLOB")
            strings = header_strings(blob)
            name = strings.get(TAG_NAME, "")
            if name and interesting(name):
                packages.append((name, strings.get(TAG_VERSION, ""),
                                 strings.get(TAG_RELEASE, "")))
        return packages
    except sqlite3.OperationalError as exc:
        if calls > budget:
            raise RpmdbError(f"reading it takes more than {budget * _STEPS_PER_CALL} sqlite "
                             "steps: stopped") from exc
        raise RpmdbError(str(exc)) from exc
    except sqlite3.Error as exc:
        raise RpmdbError(str(exc)) from exc
    finally:
        conn.close()
