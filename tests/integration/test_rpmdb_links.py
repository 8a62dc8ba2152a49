"""Issue 37: the RPM database is read through links as rpm reads it. The database is written
by the real rpm (Debian's rpm writes RHEL's sqlite format): a cuda-cudart-12-9 package
recorded in a CUDA 12.8 image, its database behind a symlink, a hard link or a linked
directory at /var/lib/rpm (RHEL 9's %_dbpath) or /usr/lib/sysimage/rpm (Fedora's and
RHEL 10's). The real rpm lists the package from each unpacked layer; the validator fails
the image naming it. The same with the package only in the write-ahead log rpm leaves
when another process holds the database open (sqlite finds the log beside the name it
opens, symlinks resolved)."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.layers import member, oci_layout, tar_bytes, version_json
from tests.support.project import REPO

# rpm and rpmbuild come with the README's setup (Makefile): a machine without them fails
# here, it does not skip.
pytestmark = pytest.mark.integration

TIMEOUT = 120
PACKAGE = "cuda-cudart-12-9"
BASE = "setup"  # in the database file itself, not judged
SPEC = f"""Name: {PACKAGE}
Version: 12.9.79
Release: 1
Summary: the CUDA 12.9 runtime, recorded only
License: MIT
BuildArch: noarch
%description
recorded only
%files
"""


def rpm(*argv: str) -> str:
    return subprocess.run(["rpm", *argv], capture_output=True, text=True, check=True,
                          timeout=TIMEOUT).stdout


def built(work: Path, name: str) -> Path:
    """An rpm of the package NAME (recorded only), built by the real rpmbuild."""
    (work / f"{name}.spec").write_text(SPEC.replace(PACKAGE, name))
    subprocess.run(["rpmbuild", "-bb", "--define", f"_topdir {work / name}",
                    str(work / f"{name}.spec")], capture_output=True, check=True,
                   timeout=TIMEOUT)
    (package,) = (work / name).rglob("*.rpm")
    return package


def install(dbpath: Path, package: Path) -> None:
    rpm("--dbpath", str(dbpath), "-i", "--justdb", "--nodeps", "--ignorearch", "--ignoreos",
        str(package))


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """An rpm database holding PACKAGE, installed by the real rpm (--justdb)."""
    work = tmp_path_factory.mktemp("rpmdb")
    dbpath = work / "db"
    rpm("--dbpath", str(dbpath), "--initdb")
    install(dbpath, built(work, PACKAGE))
    wal = dbpath / "rpmdb.sqlite-wal"
    assert not wal.exists() or not wal.stat().st_size  # all of it in the database file
    return (dbpath / "rpmdb.sqlite").read_bytes()


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """An rpm database holding BASE and its write-ahead log holding PACKAGE: the real rpm
    installs PACKAGE while another process reads the database, so rpm's closing cannot
    fold the log into the database (as a second rpm or dnf process holding it does)."""
    work = tmp_path_factory.mktemp("rpmwal")
    dbpath = work / "db"
    rpm("--dbpath", str(dbpath), "--initdb")
    install(dbpath, built(work, BASE))
    reader = sqlite3.connect(dbpath / "rpmdb.sqlite")
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM Packages").fetchone()  # holds its snapshot
        install(dbpath, built(work, PACKAGE))
        database = (dbpath / "rpmdb.sqlite").read_bytes()
        log = (dbpath / "rpmdb.sqlite-wal").read_bytes()
    finally:
        reader.close()
    alone = work / "alone"
    alone.mkdir()
    (alone / "rpmdb.sqlite").write_bytes(database)
    assert log and rpm("--dbpath", str(alone), "-qa", "--qf", "%{NAME}\\n").split() == [BASE]
    return database, log


DIR, LINK, HARD = tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE
# name -> (the members after /usr/local/cuda-12.8 holding the database DB, where rpm reads)
CASES = {
    "database-a-symlink": ([
        member("srv/db/", kind=DIR), member("srv/db/packages.sqlite", b"DB"),
        member("var/lib/rpm/", kind=DIR),
        member("var/lib/rpm/rpmdb.sqlite", kind=LINK, link="../../../srv/db/packages.sqlite"),
    ], "var/lib/rpm"),
    "database-a-hard-link": ([
        member("srv/db/", kind=DIR), member("srv/db/packages.sqlite", b"DB"),
        member("var/lib/rpm/", kind=DIR),
        member("var/lib/rpm/rpmdb.sqlite", kind=HARD, link="srv/db/packages.sqlite"),
    ], "var/lib/rpm"),
    "var-lib-rpm-a-linked-directory": ([
        member("srv/rpm/", kind=DIR), member("srv/rpm/rpmdb.sqlite", b"DB"),
        member("var/lib/", kind=DIR), member("var/lib/rpm", kind=LINK, link="../../srv/rpm"),
    ], "var/lib/rpm"),
    "sysimage-rpm-a-linked-directory": ([
        member("srv/rpm/", kind=DIR), member("srv/rpm/rpmdb.sqlite", b"DB"),
        member("usr/lib/sysimage/", kind=DIR),
        member("usr/lib/sysimage/rpm", kind=LINK, link="../../../srv/rpm"),
    ], "usr/lib/sysimage/rpm"),
}


# name -> (the members holding the database DB and its log WAL, where rpm reads)
LOGGED = {
    "log-beside-the-database": ([
        member("var/lib/rpm/", kind=DIR), member("var/lib/rpm/rpmdb.sqlite", b"DB"),
        member("var/lib/rpm/rpmdb.sqlite-wal", b"WAL"),
    ], "var/lib/rpm"),
    "log-beside-a-symlinked-database": ([  # sqlite looks beside the link's target
        member("srv/db/", kind=DIR), member("srv/db/packages.sqlite", b"DB"),
        member("srv/db/packages.sqlite-wal", b"WAL"), member("var/lib/rpm/", kind=DIR),
        member("var/lib/rpm/rpmdb.sqlite", kind=LINK, link="../../../srv/db/packages.sqlite"),
    ], "var/lib/rpm"),
    "log-beside-a-hard-linked-database": ([  # sqlite looks beside the name it opens
        member("srv/db/", kind=DIR), member("srv/db/packages.sqlite", b"DB"),
        member("var/lib/rpm/", kind=DIR),
        member("var/lib/rpm/rpmdb.sqlite", kind=HARD, link="srv/db/packages.sqlite"),
        member("var/lib/rpm/rpmdb.sqlite-wal", b"WAL"),
    ], "var/lib/rpm"),
}


def validated(tmp_path: Path, *layers: bytes) -> subprocess.CompletedProcess[str]:
    """`aipcc-build validate` of a CUDA 12.8 image of LAYERS (bottom first)."""
    return subprocess.run(
        [sys.executable, "-m", "aipcc_build", "validate",
         oci_layout(tmp_path / "image", list(layers)), "--expect", "cuda=12.8",
         "--cache-dir", str(tmp_path / "cache")], capture_output=True, text=True,
        timeout=TIMEOUT, env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
                              "PYTHONPATH": str(REPO)})


def judged_as_rpm_reads(tmp_path: Path, files: dict[bytes, bytes], case: tuple, *,
                        listed: list[str]) -> None:
    """A CUDA 12.8 layer of CASE's members (FILES' contents in place of their markers):
    the real rpm lists LISTED from it unpacked, and the validator fails it naming PACKAGE."""
    members, dbpath = case
    layer = tar_bytes([member("usr/local/cuda-12.8/version.json",
                              version_json("12.8.90").encode())]
                      + [member(info.name, files[data]) if data in files else (info, data)
                         for info, data in members])
    # What rpm lists from the unpacked layer, reading through the same links
    root = tmp_path / "root"
    root.mkdir()
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        tar.extractall(root)  # noqa: S202 - our own layer, relative links only
    assert sorted(rpm("--dbpath", str(root / dbpath), "-qa", "--qf", "%{NAME}\\n").split()) \
        == listed
    done = validated(tmp_path, layer)
    assert done.returncode == 1, done.stdout + done.stderr
    violations = [line for line in done.stdout.splitlines() if ": violation: " in line]
    assert any(PACKAGE in line and "rpm" in line for line in violations), done.stdout


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_rpm_database_is_read_through_links_as_rpm_reads_it(
        tmp_path: Path, database: bytes, case: str) -> None:
    judged_as_rpm_reads(tmp_path, {b"DB": database}, CASES[case], listed=[PACKAGE])


@pytest.mark.parametrize("case", sorted(LOGGED))
def test_the_write_ahead_log_is_read_where_sqlite_finds_it(
        tmp_path: Path, logged: tuple[bytes, bytes], case: str) -> None:
    database, log = logged
    judged_as_rpm_reads(tmp_path, {b"DB": database, b"WAL": log}, LOGGED[case],
                        listed=sorted([BASE, PACKAGE]))


def test_a_database_rpm_cannot_open_behind_a_link_fails_closed(tmp_path: Path) -> None:
    """The link leads to a directory: the real rpm cannot open the database, and the
    validator, which read nothing, fails the image rather than pass it unjudged."""
    layer = tar_bytes([member("usr/local/cuda-12.8/version.json",
                              version_json("12.8.90").encode()),
                       member("srv/db/", kind=DIR), member("var/lib/rpm/", kind=DIR),
                       member("var/lib/rpm/rpmdb.sqlite", kind=LINK, link="../../../srv/db")])
    root = tmp_path / "root"
    root.mkdir()
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        tar.extractall(root)  # noqa: S202 - our own layer, relative links only
    opened = subprocess.run(["rpm", "--dbpath", str(root / "var/lib/rpm"), "-qa"],
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert opened.returncode != 0 and "cannot open Packages" in opened.stderr
    done = validated(tmp_path, layer)
    assert done.returncode == 1, done.stdout + done.stderr
    [violation] = [line for line in done.stdout.splitlines() if ": violation: " in line]
    assert "/var/lib/rpm/rpmdb.sqlite" in violation and violation.endswith(
        "read through a link to /srv/db: a directory: not read: the image's installed "
        "packages were not judged"), violation


def test_a_log_written_in_a_later_layer_than_its_database_fails_closed(
        tmp_path: Path, logged: tuple[bytes, bytes]) -> None:
    """rpm that writes while another process holds the database changes only the log (the
    database file stays as it was): the layer holds the log alone. The real rpm lists the
    package from the two layers unpacked; the validator, which reads a layer's database
    with its own layer's log, fails the image naming the log rather than pass it."""
    database, log = logged
    lower = tar_bytes([member("usr/local/cuda-12.8/version.json",
                              version_json("12.8.90").encode()),
                       member("var/lib/rpm/", kind=DIR),
                       member("var/lib/rpm/rpmdb.sqlite", database)])
    upper = tar_bytes([member("var/lib/rpm/", kind=DIR),
                       member("var/lib/rpm/rpmdb.sqlite-wal", log)])
    root = tmp_path / "root"
    root.mkdir()
    for layer in (lower, upper):
        with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
            tar.extractall(root)  # noqa: S202 - our own layers, relative names only
    assert sorted(rpm("--dbpath", str(root / "var/lib/rpm"), "-qa", "--qf",
                      "%{NAME}\\n").split()) == sorted([BASE, PACKAGE])
    done = validated(tmp_path, lower, upper)
    assert done.returncode == 1, done.stdout + done.stderr
    [violation] = [line for line in done.stdout.splitlines() if ": violation: " in line]
    assert "/var/lib/rpm/rpmdb.sqlite-wal" in violation and violation.endswith(
        "a write-ahead log without its database in this layer: not read: the image's "
        "installed packages were not judged"), violation
