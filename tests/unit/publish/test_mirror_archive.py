"""A rerun of mirror into an oci-archive: the archive counts as complete once its blobs are
read back (oci_layout.archive_damaged, one pass over the tar as a stream), never by its
index.json alone; damaged, it is unpacked and completed as a layout is. The real skopeo:
tests/integration/test_mirror_layout_hostile.py."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import pytest

from aipcc_build.errors import InputError
from aipcc_build.oci import REF_NAME_ANNOTATION
from aipcc_build.publish import oci_layout
from aipcc_build.publish.mirror import Image, MirrorRequest, mirror
from tests.support.engine import layout as image_layout
from tests.support.fakes import RecordingRunner

REF = "rel/x:1"


def _layout(root: Path) -> tuple[str, str]:
    """A layout mirror could have written, one image at REF: (manifest, layer) digests."""
    image_layout(root, [b"layer " * 100])
    index = json.loads((root / "index.json").read_text())
    index["manifests"][0]["annotations"] = {REF_NAME_ANNOTATION: REF}
    (root / "index.json").write_text(json.dumps(index))
    (root / oci_layout.META).write_text('{"schema": 1, "source_registry": "quay.io/aipcc"}')
    manifest = index["manifests"][0]["digest"]
    blob = root / "blobs" / "sha256" / manifest.partition(":")[2]
    return manifest, json.loads(blob.read_bytes())["layers"][0]["digest"]


Extra = Callable[[tarfile.TarFile], None]


def _archive(tmp_path: Path, damage: Optional[Callable[[Path, str], None]] = None,
             extra: Optional[Extra] = None) -> tuple[Path, str, str]:
    """An archive of _layout (the layout DAMAGEd first, given it and the layer's name;
    EXTRA members added after its own): (the archive, manifest, layer)."""
    root = tmp_path / "layout"
    manifest, layer = _layout(root)
    if damage is not None:
        damage(root, layer.partition(":")[2])
    archive = tmp_path / "release.tar"
    with tarfile.open(archive, "w") as tar:
        for entry in sorted(os.listdir(root)):
            tar.add(root / entry, arcname=entry)
        if extra is not None:
            extra(tar)
    return archive, manifest, layer


def _member(tar: tarfile.TarFile, name: str, data: bytes = b"", **kind: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for attribute, value in kind.items():
        setattr(info, attribute, value)
    tar.addfile(info, io.BytesIO(data) if data else None)


def _blob(root: Path, digest: str) -> Path:
    return root / "blobs" / "sha256" / digest.partition(":")[2]


def test_an_intact_archive_has_no_damaged_blob(tmp_path: Path) -> None:
    archive, manifest, _ = _archive(tmp_path)
    assert oci_layout.archive_damaged(archive, [manifest]) == []


def test_a_blob_with_other_bytes_of_its_size_is_damaged(tmp_path: Path) -> None:
    archive, manifest, layer = _archive(tmp_path, lambda root, name: (
        root / "blobs" / "sha256" / name).write_bytes(b"L" * 600))
    assert oci_layout.archive_damaged(archive, [manifest]) == [layer]


def test_a_missing_blob_is_damaged(tmp_path: Path) -> None:
    archive, manifest, layer = _archive(
        tmp_path, lambda root, name: (root / "blobs" / "sha256" / name).unlink())
    assert oci_layout.archive_damaged(archive, [manifest]) == [layer]


def test_a_layer_the_manifest_names_and_the_archive_lacks_is_damaged(tmp_path: Path) -> None:
    """The walk goes from the index's manifest to every layer it names."""
    root = tmp_path / "layout"
    _, layer = _layout(root)
    absent = "sha256:" + hashlib.sha256(b"never written").hexdigest()
    body = json.loads(_blob(root, _layout(tmp_path / "x")[0]).read_bytes())
    body["layers"].append({"mediaType": body["layers"][0]["mediaType"], "digest": absent,
                           "size": 13})
    data = json.dumps(body).encode()
    manifest = "sha256:" + hashlib.sha256(data).hexdigest()
    _blob(root, manifest).write_bytes(data)
    archive = tmp_path / "release.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(root / "blobs", arcname="blobs")
    assert oci_layout.archive_damaged(archive, [manifest]) == [absent]


def test_a_manifest_past_the_bound_kept_fails_closed(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A manifest is held for the walk up to MAX_MANIFEST: one larger is hashed, not read,
    and counts as damaged, since the layers it names were never looked for."""
    archive, manifest, _ = _archive(tmp_path)
    monkeypatch.setattr(oci_layout, "MAX_MANIFEST", 64)
    assert oci_layout.archive_damaged(archive, [manifest]) == [manifest]


def test_json_past_the_total_kept_fails_closed(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An archive of many JSON blobs is not held whole: past MAX_KEPT all told, a manifest
    not kept counts as damaged, as one past MAX_MANIFEST does."""
    archive, manifest, _ = _archive(tmp_path)
    monkeypatch.setattr(oci_layout, "MAX_KEPT", 16)
    assert oci_layout.archive_damaged(archive, [manifest]) == [manifest]


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo", "device", "directory"])
def test_a_member_that_is_no_regular_file_under_a_blob_s_name_is_no_blob(
        tmp_path: Path, kind: str) -> None:
    """A link, a FIFO, a device or a directory under a blob's name is no blob; unpacked,
    it is never made nor followed, nothing is written outside, and the layout copies the
    blob again."""
    types = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
             "fifo": tarfile.FIFOTYPE, "device": tarfile.CHRTYPE, "directory": tarfile.DIRTYPE}
    name = f"blobs/sha256/{_layout(tmp_path / 'x')[1].partition(':')[2]}"
    archive, manifest, layer = _archive(
        tmp_path, lambda root, hex: (root / "blobs" / "sha256" / hex).unlink(),
        lambda tar: _member(tar, name, type=types[kind],
                            linkname="../../../outside" if "link" in kind else ""))
    assert oci_layout.archive_damaged(archive, [manifest]) == [layer]
    oci_layout.unpack(archive, tmp_path / "partial")
    assert oci_layout.damaged_blobs(tmp_path / "partial", manifest) == [layer]
    assert not os.path.lexists(_blob(tmp_path / "partial", layer))
    assert not os.path.lexists(tmp_path / "outside")


def test_a_link_after_the_blob_of_its_name_is_no_blob_and_never_made(
        tmp_path: Path) -> None:
    """Of two members of one name the last wins, as in skopeo's reader: a link after the
    blob leaves it a link, which that reader follows out of the layout. Unpacked, the link
    is not made and the blob before it is gone: the layout copies it again."""
    name = f"blobs/sha256/{_layout(tmp_path / 'x')[1].partition(':')[2]}"
    archive, manifest, layer = _archive(tmp_path, extra=lambda tar: _member(
        tar, name, type=tarfile.SYMTYPE, linkname="../../../outside"))
    assert oci_layout.archive_damaged(archive, [manifest]) == [layer]
    oci_layout.unpack(archive, tmp_path / "partial")
    assert not os.path.lexists(_blob(tmp_path / "partial", layer))
    assert not os.path.lexists(tmp_path / "outside")


@pytest.mark.parametrize("last", ["good", "bad"])
def test_of_two_members_of_one_name_the_last_wins(tmp_path: Path, last: str) -> None:
    def duplicate(tar: tarfile.TarFile) -> None:
        _member(tar, f"./blobs/sha256/{layer.partition(':')[2]}",
                b"layer " * 100 if last == "good" else b"X" * 600)

    damaged = lambda root, name: (root / "blobs" / "sha256" / name).write_bytes(  # noqa: E731
        b"Y" * 600 if last == "good" else b"layer " * 100)
    archive, manifest, layer = _archive(tmp_path / "a")
    archive, manifest, layer = _archive(tmp_path, damaged, duplicate)
    assert oci_layout.archive_damaged(archive, [manifest]) == ([] if last == "good"
                                                               else [layer])
    oci_layout.unpack(archive, tmp_path / "partial")
    assert oci_layout.damaged_blobs(tmp_path / "partial", manifest) == \
        ([] if last == "good" else [layer])


def test_a_member_leaving_the_layout_is_refused_naming_the_archive(tmp_path: Path) -> None:
    archive, manifest, _ = _archive(tmp_path, extra=lambda tar: _member(
        tar, "blobs/../../escaped", b"x"))
    with pytest.raises(InputError, match="leaves the layout") as refused:
        oci_layout.archive_damaged(archive, [manifest])
    assert refused.value.file == str(archive)
    with pytest.raises(InputError):
        oci_layout.unpack(archive, tmp_path / "partial")
    assert not (tmp_path / "escaped").exists()


def test_a_file_that_is_no_tar_is_refused_naming_it(tmp_path: Path) -> None:
    archive = tmp_path / "release.tar"
    archive.write_bytes(b"not a tar at all\n" * 100)
    with pytest.raises(InputError, match="not an OCI archive") as refused:
        oci_layout.archive_damaged(archive, ["sha256:" + "0" * 64])
    assert refused.value.file == str(archive)


def test_a_truncated_archive_or_a_huge_declared_size_is_refused_naming_it(
        tmp_path: Path) -> None:
    """A copy cut inside a member, or a member declaring a terabyte, is read in chunks up
    to the end of the file (never held) and refused, naming the archive (as reading its
    index.json, and skopeo's reader, refuse it); cut between members, what follows the
    cut is missing."""
    archive, manifest, layer = _archive(tmp_path)
    whole = archive.read_bytes()
    archive.write_bytes(whole[:whole.index(b"layer " * 10) + 100])
    with pytest.raises(InputError, match="not an OCI archive") as refused:
        oci_layout.archive_damaged(archive, [manifest])
    assert refused.value.file == str(archive)
    huge = tarfile.TarInfo(f"blobs/sha256/{layer.partition(':')[2]}")
    huge.size = 1 << 40
    members = io.BytesIO()
    with tarfile.open(fileobj=members, mode="w") as tar:
        tar.add(tmp_path / "layout" / "index.json", arcname="index.json")
        end = tar.offset
    archive.write_bytes(members.getvalue()[:end] + huge.tobuf() + b"x" * 4096)
    with pytest.raises(InputError, match="not an OCI archive"):
        oci_layout.archive_damaged(archive, [manifest])
    with tarfile.open(tmp_path / "cut.tar", "w") as tar:
        tar.add(tmp_path / "layout" / "blobs" / "sha256" / manifest.partition(":")[2],
                arcname=f"blobs/sha256/{manifest.partition(':')[2]}")
    assert oci_layout.archive_damaged(tmp_path / "cut.tar", [manifest]) == [
        json.loads((tmp_path / "layout" / "blobs" / "sha256" / manifest.partition(":")[2])
                   .read_bytes())["config"]["digest"], layer]


def _copy_from(src: Path, copies: list[str]) -> RecordingRunner:
    """skopeo copying the image of the layout SRC into the stage it is given."""

    def copy(argv: list[str]) -> tuple[int, bytes, bytes]:
        copies.append(argv[-1])
        stage = Path(argv[-1][len("oci:"):].rsplit(":", 2)[0])
        for blob in (src / "blobs" / "sha256").iterdir():
            (stage / "blobs" / "sha256" / blob.name).write_bytes(blob.read_bytes())
        (stage / "index.json").write_bytes((src / "index.json").read_bytes())
        return 0, b"", b""

    return RecordingRunner(copy)


@pytest.mark.parametrize("damage", ["intact", "other bytes", "missing", "cut between members"])
def test_a_rerun_into_an_archive_completes_what_is_damaged(tmp_path: Path,
                                                           damage: str) -> None:
    """A rerun over an archive whose index.json lists the image was 'skipped' whatever
    its blobs held: now an intact one is left byte for byte (mtime too) and starts no
    program, a damaged one is copied again and packed, every blob read back."""
    src = tmp_path / "src"
    manifest, layer = _layout(src)
    archive = tmp_path / "release.tar"
    with tarfile.open(archive, "w") as tar:
        for entry in sorted(os.listdir(src)):
            tar.add(src / entry, arcname=entry)
    if damage == "cut between members":  # index.json first, the blobs after it lost
        with tarfile.open(archive, "w") as tar:
            for entry in ("index.json", "oci-layout", oci_layout.META):
                tar.add(src / entry, arcname=entry)
    elif damage != "intact":
        root = tmp_path / "damaged"
        _layout(root)
        if damage == "missing":
            _blob(root, layer).unlink()
        else:
            _blob(root, layer).write_bytes(b"D" * 600)
        with tarfile.open(archive, "w") as tar:
            for entry in sorted(os.listdir(root)):
                tar.add(root / entry, arcname=entry)
    before, stamp = archive.read_bytes(), archive.stat().st_mtime_ns
    copies: list[str] = []
    image = Image("rel/x", "rel/x", "1", manifest, f"oci:{src}:{REF}")
    result = mirror(MirrorRequest(images=(image,), to=f"oci-archive:{archive}",
                                  source_registry="quay.io/aipcc"),
                    _copy_from(src, copies), sleep=lambda _: None)
    statuses = [o.status for o in result.outcomes]
    if damage == "intact":
        assert statuses == ["skipped"] and copies == []
        assert (archive.read_bytes(), archive.stat().st_mtime_ns) == (before, stamp)
    else:
        assert statuses == ["copied"] and copies, result.outcomes
        assert oci_layout.archive_damaged(archive, [manifest]) == []
        assert oci_layout.archive_refs(archive) == {REF: manifest}
    assert not Path(f"{archive}.partial").exists()
