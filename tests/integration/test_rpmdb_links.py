"""Issue 37: the RPM database is read through links as rpm reads it. The database is written
by the real rpm (Debian's rpm writes RHEL's sqlite format): a cuda-cudart-12-9 package
recorded in a CUDA 12.8 image, its database behind a symlink, a hard link or a linked
directory at /var/lib/rpm (RHEL 9's %_dbpath) or /usr/lib/sysimage/rpm (Fedora's and
RHEL 10's). The real rpm lists the package from each unpacked layer; the validator fails
the image naming it."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.layers import member, oci_layout, tar_bytes, version_json
from tests.support.project import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not shutil.which("rpm") or not shutil.which("rpmbuild"),
                       reason="writes the database with the real rpm"),
]

TIMEOUT = 120
PACKAGE = "cuda-cudart-12-9"
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


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """An rpm database holding PACKAGE, installed by the real rpm (--justdb)."""
    work = tmp_path_factory.mktemp("rpmdb")
    (work / "p.spec").write_text(SPEC)
    subprocess.run(["rpmbuild", "-bb", "--define", f"_topdir {work / 'top'}",
                    str(work / "p.spec")], capture_output=True, check=True, timeout=TIMEOUT)
    (package,) = (work / "top").rglob("*.rpm")
    dbpath = work / "db"
    rpm("--dbpath", str(dbpath), "--initdb")
    rpm("--dbpath", str(dbpath), "-i", "--justdb", "--nodeps", "--ignorearch", "--ignoreos",
        str(package))
    wal = dbpath / "rpmdb.sqlite-wal"
    assert not wal.exists() or not wal.stat().st_size  # all of it in the database file
    return (dbpath / "rpmdb.sqlite").read_bytes()


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


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_rpm_database_is_read_through_links_as_rpm_reads_it(
        tmp_path: Path, database: bytes, case: str) -> None:
    members, dbpath = CASES[case]
    layer = tar_bytes([member("usr/local/cuda-12.8/version.json",
                              version_json("12.8.90").encode())]
                      + [member(info.name, database) if data == b"DB" else (info, data)
                         for info, data in members])
    # What rpm lists from the unpacked layer, reading through the same links
    root = tmp_path / "root"
    root.mkdir()
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        tar.extractall(root)  # noqa: S202 - our own layer, relative links only
    listed = rpm("--dbpath", str(root / dbpath), "-qa", "--qf", "%{NAME}\\n").split()
    assert listed == [PACKAGE]
    done = subprocess.run(
        [sys.executable, "-m", "aipcc_build", "validate",
         oci_layout(tmp_path / "image", [layer]), "--expect", "cuda=12.8",
         "--cache-dir", str(tmp_path / "cache")], capture_output=True, text=True,
        timeout=TIMEOUT, env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
                              "PYTHONPATH": str(REPO)})
    assert done.returncode == 1, done.stdout + done.stderr
    violations = [line for line in done.stdout.splitlines() if ": violation: " in line]
    assert any(PACKAGE in line and "rpm" in line for line in violations), done.stdout
