"""A gate fails closed: a package database the validator could not read (larger than
its limit, not a regular file, a database sqlite cannot open), under its own name or
through a link, fails the image, naming the path, the layer and why; so does a pip or uv
config file too large to read that the tool loads."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from aipcc_build.imagefs.lookup import FileRead
from aipcc_build.validate import detect
from aipcc_build.validate.pipeline import _unread, validate_image
from aipcc_build.validate.results import Expectation, Finding, LayerScan
from aipcc_build.validate.scan_stack import stack_of
from tests.support.layers import member, oci_layout, sha256, tar_bytes

CUDA_12_8 = Expectation("cuda", "12.8")
STATUS = b"Package: base-files\nStatus: install ok installed\nVersion: 12.4\n\n" * 40
DIRS = [member("var", kind=tarfile.DIRTYPE), member("var/lib", kind=tarfile.DIRTYPE),
        member("var/lib/dpkg", kind=tarfile.DIRTYPE)]


def violations(tmp_path: Path, layers: list[bytes], env: dict[str, str] | None = None
               ) -> list[Finding]:
    ref = oci_layout(tmp_path / "oci", layers, env)
    [verdict] = validate_image(ref, expect=CUDA_12_8, cache_dir=tmp_path / "cache")
    assert not verdict.ok
    return [f for f in verdict.findings if f.status == "violation"]


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "DPKG_STATUS_LIMIT", 1000)
    monkeypatch.setattr(detect, "SMALL_FILE_LIMIT", 1000)


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("link", [
    member("var/lib/dpkg/status", kind=tarfile.SYMTYPE, link="/opt/state/db"),
    member("var/lib/dpkg/status", kind=tarfile.LNKTYPE, link="opt/state/db"),
], ids=["symlink", "hard-link"])
def test_a_status_too_large_behind_a_link_fails(tmp_path: Path, link: tuple) -> None:
    layer = tar_bytes([member("opt", kind=tarfile.DIRTYPE),
                       member("opt/state", kind=tarfile.DIRTYPE),
                       member("opt/state/db", STATUS), *DIRS, link])
    [found] = violations(tmp_path, [layer])
    assert found.path == "/var/lib/dpkg/status" and found.layer_digest == sha256(layer)
    assert found.reason == (f"oversized-file: {len(STATUS)} bytes, more than 1000: not read: "
                            "the image's installed packages were not judged")


@pytest.mark.usefixtures("small_limits")
def test_a_status_too_large_under_its_own_name_fails(tmp_path: Path) -> None:
    layer = tar_bytes([*DIRS, member("var/lib/dpkg/status", STATUS)])
    [found] = violations(tmp_path, [layer])
    assert found.path == "/var/lib/dpkg/status" and found.layer_digest == sha256(layer)
    assert found.reason.startswith("oversized-file: ")
    assert found.reason.endswith("not read: the image's installed packages were not judged")


def test_a_status_replaced_by_a_later_layer_stays_a_warning(
        tmp_path: Path, small_limits: None) -> None:
    lower = tar_bytes([*DIRS, member("var/lib/dpkg/status", STATUS)])
    upper = tar_bytes([*DIRS, member("var/lib/dpkg/status", STATUS[:200])])
    ref = oci_layout(tmp_path / "oci", [lower, upper])
    [verdict] = validate_image(ref, expect=CUDA_12_8, cache_dir=tmp_path / "cache")
    assert verdict.ok, [f.line() for f in verdict.findings if f.status == "violation"]


def test_a_status_link_to_a_directory_fails(tmp_path: Path) -> None:
    layer = tar_bytes([member("opt", kind=tarfile.DIRTYPE),
                       member("opt/state", kind=tarfile.DIRTYPE), *DIRS,
                       member("var/lib/dpkg/status", kind=tarfile.SYMTYPE, link="/opt/state")])
    [found] = violations(tmp_path, [layer])
    assert found.path == "/var/lib/dpkg/status" and found.layer_digest == sha256(layer)
    assert found.reason == ("unread-file: read through a link to /opt/state: a directory: "
                            "not read: the image's installed packages were not judged")


@pytest.mark.parametrize("kind", [tarfile.FIFOTYPE, tarfile.CHRTYPE])
def test_a_status_that_is_a_fifo_or_a_device_fails(tmp_path: Path, kind: bytes) -> None:
    layer = tar_bytes([*DIRS, member("var/lib/dpkg/status", kind=kind)])
    [found] = violations(tmp_path, [layer])
    assert found.path == "/var/lib/dpkg/status" and found.layer_digest == sha256(layer)
    assert found.reason == ("unread-file: not a regular file: not read: the image's "
                            "installed packages were not judged")


def test_an_rpm_database_sqlite_cannot_open_behind_a_link_fails(tmp_path: Path) -> None:
    layer = tar_bytes([member("opt", kind=tarfile.DIRTYPE), member("opt/db", kind=tarfile.DIRTYPE),
                       member("opt/db/packages", b"not a database" * 100),
                       member("var", kind=tarfile.DIRTYPE), member("var/lib", kind=tarfile.DIRTYPE),
                       member("var/lib/rpm", kind=tarfile.DIRTYPE),
                       member("var/lib/rpm/rpmdb.sqlite", kind=tarfile.SYMTYPE,
                              link="/opt/db/packages")])
    [found] = violations(tmp_path, [layer])
    assert found.path == "/var/lib/rpm/rpmdb.sqlite" and found.layer_digest == sha256(layer)
    assert found.component == "unreadable-rpmdb"
    assert found.reason.endswith("the image's installed packages were not judged")


def test_a_layer_the_second_read_cannot_read_fails_naming_it() -> None:
    scan = LayerScan("sha256:a", 1)
    read = FileRead("/var/lib/dpkg/status",
                    error="layer sha256:a is refused by the container engine: truncated")
    unread = _unread("/var/lib/dpkg/status", read, [scan], stack_of([scan]))
    [hazard] = unread.hazards
    assert hazard.severe and hazard.kind == "unread-file"
    assert hazard.detail == ("read through a link: layer sha256:a is refused by the "
                             "container engine: truncated")


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("variable", ["PIP_CONFIG_FILE", "UV_CONFIG_FILE"])
def test_a_named_config_file_too_large_to_read_fails(tmp_path: Path, variable: str) -> None:
    text = b"# a comment to pad the file\n" * 100
    layer = tar_bytes([member("opt", kind=tarfile.DIRTYPE),
                       member("opt/conf", kind=tarfile.DIRTYPE),
                       member("opt/conf/site.ini", text)])
    [found] = violations(tmp_path, [layer], {variable: "/opt/conf/site.ini"})
    tool = "uv" if variable == "UV_CONFIG_FILE" else "pip"
    assert found.path == "/opt/conf/site.ini" and found.layer_digest == sha256(layer)
    assert found.reason == (f"{len(text)} bytes, more than 1000: not read; {variable} names "
                            f"this file: {tool} loads it, so the indexes it sets were not "
                            "judged")


@pytest.mark.usefixtures("small_limits")
def test_a_loaded_config_file_too_large_to_read_fails(tmp_path: Path) -> None:
    text = b"# a comment to pad the file\n" * 100
    layer = tar_bytes([member("etc", kind=tarfile.DIRTYPE), member("etc/pip.conf", text)])
    [found] = violations(tmp_path, [layer])
    assert found.path == "/etc/pip.conf" and found.reason.endswith(
        "not read: pip loads it, so the indexes it sets were not judged")
