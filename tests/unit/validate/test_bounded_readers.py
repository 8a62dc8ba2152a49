"""Issue 29.2: every reader of what an image holds does linear work and stops at a stated
bound with a warning naming the file; nothing an image holds makes `validate` hang, grow
without bound or print a traceback. Bounds in time are asserted loosely."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from aipcc_build.validate.detect import DPKG_STATUS_LIMIT
from aipcc_build.validate.rpmdb import RpmdbError, read_packages
from tests.support.layers import member, oci_layout, rpmdb, tar_bytes

RPMDB = "var/lib/rpm/rpmdb.sqlite"


def recursive_view(path: Path) -> Path:
    """A Packages that never ends: a recursive view (a sqlite reader grew past 1.6 GB)."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIEW Packages AS WITH RECURSIVE c(hnum, blob) AS "
                 "(SELECT 1, x'00' UNION ALL SELECT hnum + 1, blob || blob FROM c) "
                 "SELECT hnum, blob FROM c")
    conn.commit()
    conn.close()
    return path


def text_header(path: Path) -> Path:
    """A header stored as TEXT, where rpm writes a BLOB."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY, blob BLOB)")
    conn.execute("INSERT INTO Packages VALUES (7, 'cuda-cudart-12-9')")
    conn.commit()
    conn.close()
    return path


def unindexed_join(path: Path) -> Path:
    """Every Name row looked up in a Packages without an index: quadratic in the rows."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE Packages (hnum INTEGER, blob BLOB)")
    conn.execute("CREATE TABLE Name (key TEXT, hnum INTEGER, idx INTEGER)")
    rows = 20_000
    conn.executemany("INSERT INTO Packages VALUES (?, x'00')", ((n,) for n in range(rows)))
    conn.executemany("INSERT INTO Name VALUES ('cuda-x', ?, 0)", ((-n,) for n in range(rows)))
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(("make", "reason"), [
    (recursive_view, "Packages is a view, not a table"),
    (text_header, "the header of package 7 is stored as TEXT, not as a BLOB"),
])
def test_a_hostile_rpmdb_fails_naming_the_file(
        tmp_path: Path, cli, make, reason: str) -> None:  # type: ignore[no-untyped-def]
    db = make(tmp_path / "rpmdb.sqlite")
    ref = oci_layout(tmp_path / "image", [tar_bytes([member(RPMDB, db.read_bytes())])])
    started = time.monotonic()
    result = cli("validate", ref, "--expect", "cpu", "--cache-dir", str(tmp_path / "cache"))
    assert time.monotonic() - started < 30  # it used to never end
    assert "Traceback" not in result.err
    assert result.code == 1  # a gate fails closed: its packages were not judged
    assert [line for line in result.out.splitlines() if "unreadable-rpmdb" in line] == [
        f"  {ref} linux/amd64: violation: unreadable-rpmdb (layer) at /{RPMDB} [layer "
        f"{ref_layer(tmp_path)[:19]}]: unreadable-rpmdb: {reason}: the image's installed "
        "packages were not judged"]


def ref_layer(tmp_path: Path) -> str:
    import json

    root = tmp_path / "image"
    index = json.loads((root / "index.json").read_text())
    blob = root / "blobs" / "sha256"
    manifest = json.loads((blob / index["manifests"][0]["digest"][7:]).read_text())
    return str(manifest["layers"][0]["digest"])


def test_an_rpmdb_whose_plan_is_quadratic_stops_at_its_budget(tmp_path: Path) -> None:
    db = unindexed_join(tmp_path / "rpmdb.sqlite")
    started = time.monotonic()
    with pytest.raises(RpmdbError, match=r"^reading it takes more than \d+ sqlite steps: "
                                         r"stopped$"):
        read_packages(db, lambda name: True)
    assert time.monotonic() - started < 30


def test_a_real_shaped_rpmdb_is_read_within_its_budget(tmp_path: Path) -> None:
    packages = [(f"cuda-pkg-{n}", "12.9.79", "1") for n in range(2000)]
    db = rpmdb(tmp_path / "rpmdb.sqlite", packages)
    assert len(read_packages(db, lambda name: True)) == 2000


def test_dpkg_status_lines_of_blanks_are_read_in_linear_time(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    # A value followed by blanks and one more character made the field pattern backtrack
    # quadratically: 8,000 blanks took 0.7 s, the 64 MiB limit would take days.
    status = (b"Package: libcudart11.0\nStatus: install ok installed\n"
              b"Version: 11.8.89~11.8.0-5~deb12u1\nSource: x" + b" " * (4 << 20) + b"y\n")
    assert len(status) < DPKG_STATUS_LIMIT
    ref = oci_layout(tmp_path / "image", [tar_bytes([member("var/lib/dpkg/status", status)])])
    started = time.monotonic()
    result = cli("validate", ref, "--expect", "cpu", "--cache-dir", str(tmp_path / "cache"))
    assert time.monotonic() - started < 30
    assert "Traceback" not in result.err
    assert result.code == 1 and "libcudart11.0" in result.out
