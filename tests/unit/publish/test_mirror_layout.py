"""mirror into an OCI layout: what skopeo does to a layout it writes (index.json in place,
a blob's name trusted) kept out of the layout a reader trusts. The real skopeo and the
real hostile nodes: tests/integration/test_mirror_layout_hostile.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aipcc_build.errors import InputError
from aipcc_build.oci import OCI_MANIFEST, REF_NAME_ANNOTATION
from aipcc_build.publish import oci_layout
from aipcc_build.publish.mirror import Image, MirrorRequest, mirror
from aipcc_build.publish.oci_layout import LayoutStore
from aipcc_build.tools.oci_registry import digest_of
from tests.support.engine import layout as image_layout
from tests.support.fakes import RecordingRunner


def _layout(root: Path, ref: str = "rel/x:1") -> str:
    image_layout(root, [b"layer"])
    index = json.loads((root / "index.json").read_text())
    index["manifests"][0]["annotations"] = {REF_NAME_ANNOTATION: ref}
    (root / "index.json").write_text(json.dumps(index))
    return index["manifests"][0]["digest"]


def test_a_copy_killed_while_skopeo_writes_index_json_leaves_the_old_index(
        tmp_path: Path) -> None:
    """skopeo 1.9 opens index.json with O_TRUNC and writes it (strace shows it): killed
    between the two, it left the layout's index empty or half, and every later run refused
    the layout. Its copy now goes into a stage, whose ref is moved over atomically."""
    dest = tmp_path / "dest"
    old = _layout(dest)
    before = (dest / "index.json").read_bytes()

    def killed_mid_write(argv: list[str]) -> tuple[int, bytes, bytes]:
        where = argv[-1][len("oci:"):].rsplit(":", 2)[0]
        Path(where, "index.json").write_text('{"schemaVersion": 2, "manif')
        return 137, b"", b"signal: killed"

    image = Image("rel/x", "rel/x", "1", "sha256:" + "e" * 64, "oci:/nowhere:rel/x:1")
    result = mirror(MirrorRequest(images=(image,), to=f"dir:{dest}",
                                  source_registry="quay.io/aipcc"),
                    RecordingRunner(killed_mid_write), sleep=lambda _: None)
    assert [o.status for o in result.outcomes] == ["failed"]
    assert (dest / "index.json").read_bytes() == before
    assert oci_layout.refs(dest) == {"rel/x:1": old}
    assert not [p for p in dest.iterdir() if p.name.startswith(".aipcc-stage-")]


def test_a_blob_with_other_bytes_is_replaced_and_read_back(tmp_path: Path) -> None:
    """A signature's blob found under its name with other bytes was kept as it was: the
    layout then carried a signature no one could read."""
    root = tmp_path / "l"
    _layout(root)
    store = LayoutStore(root)
    data = b'{"signature": 1}'
    path = root / "blobs" / "sha256" / digest_of(data).partition(":")[2]
    path.write_bytes(b"other bytes")
    assert store.put_blob("rel/x", data) == digest_of(data)
    assert path.read_bytes() == data


@pytest.mark.parametrize("node", ["index.json", "blob"])
def test_the_store_writes_through_no_link(tmp_path: Path, node: str) -> None:
    root = tmp_path / "l"
    _layout(root)
    outside = tmp_path / "outside"
    outside.write_text("precious")
    body = b'{"mediaType": "%s"}' % OCI_MANIFEST.encode()
    target = root / "index.json" if node == "index.json" else \
        root / "blobs" / "sha256" / digest_of(body).partition(":")[2]
    if target.exists():
        target.unlink()
    os.symlink(outside, target)
    with pytest.raises(InputError, match="not a regular file"):
        LayoutStore(root).put_manifest("rel/x", "sig", body, OCI_MANIFEST)
    assert outside.read_text() == "precious" and target.is_symlink()


@pytest.mark.parametrize("node", ["fifo", "link"])
def test_a_source_layout_blob_that_is_no_regular_file_is_refused_not_waited_on(
        tmp_path: Path, node: str) -> None:
    """mirror --from dir:SRC reads the signatures and attestations SRC carries: a FIFO
    under a blob's name hung the run on its open; a link was read wherever it pointed."""
    root = tmp_path / "l"
    _layout(root)
    store = LayoutStore(root)
    digest = store.put_blob("rel/x", b'{"signature": 1}')
    path = root / "blobs" / "sha256" / digest.partition(":")[2]
    path.unlink()
    if node == "fifo":
        os.mkfifo(path)
    else:
        (tmp_path / "outside").write_bytes(b'{"signature": 1}')
        path.symlink_to(tmp_path / "outside")
    with pytest.raises(InputError, match="not a regular file") as caught:
        store.get_blob("rel/x", digest)
    assert caught.value.file == str(path)


def test_a_source_layout_blob_past_the_bound_asked_is_refused(tmp_path: Path) -> None:
    """A signature's payload is read up to its own bound (64 KiB) from a layout as from a
    registry: a larger blob is an input error naming the file, not bytes held."""
    root = tmp_path / "l"
    _layout(root)
    store = LayoutStore(root)
    digest = store.put_blob("rel/x", b"x" * 2048)
    assert store.get_blob("rel/x", digest, 2048) == b"x" * 2048
    with pytest.raises(InputError, match="larger than 1024 bytes") as refused:
        store.get_blob("rel/x", digest, 1024)
    assert refused.value.file == str(root / "blobs" / "sha256" / digest.partition(":")[2])


def _blob(root: Path, digest: str) -> Path:
    return root / "blobs" / "sha256" / digest.partition(":")[2]


def _layer_of(root: Path, manifest: str) -> str:
    return str(json.loads(_blob(root, manifest).read_bytes())["layers"][0]["digest"])


def test_a_blob_of_the_right_size_with_other_bytes_is_damaged(tmp_path: Path) -> None:
    """A rerun took a blob by its size alone: a damaged or tampered file of the same size
    was kept and the layout published with it."""
    dest = tmp_path / "dest"
    manifest = _layout(dest)
    layer = _blob(dest, _layer_of(dest, manifest))
    assert oci_layout.damaged_blobs(dest, manifest) == []
    layer.write_bytes(b"L" * layer.stat().st_size)
    assert oci_layout.damaged_blobs(dest, manifest) == [_layer_of(dest, manifest)]


def test_a_rerun_over_a_blob_of_the_right_size_replaces_it_in_one_rename(
        tmp_path: Path) -> None:
    """The copy goes into a stage of its own blobs, and the damaged file is replaced by a
    rename: the ref stays, and a reader sees the damaged file or the blob, never none."""
    src, dest = tmp_path / "src", tmp_path / "dest"
    manifest = _layout(src)
    _layout(dest)
    layer = _blob(dest, _layer_of(dest, manifest))
    layer.write_bytes(b"L" * layer.stat().st_size)
    damaged = layer.stat().st_ino

    def copy_from_src(argv: list[str]) -> tuple[int, bytes, bytes]:
        stage = Path(argv[-1][len("oci:"):].rsplit(":", 2)[0])
        assert not (stage / "blobs").is_symlink()  # its own blobs: none taken by name
        for blob in (src / "blobs" / "sha256").iterdir():
            (stage / "blobs" / "sha256" / blob.name).write_bytes(blob.read_bytes())
        (stage / "index.json").write_bytes((src / "index.json").read_bytes())
        return 0, b"", b""

    image = Image("rel/x", "rel/x", "1", manifest, f"oci:{src}:rel/x:1")
    result = mirror(MirrorRequest(images=(image,), to=f"dir:{dest}",
                                  source_registry="quay.io/aipcc"),
                    RecordingRunner(copy_from_src), sleep=lambda _: None)
    assert [o.status for o in result.outcomes] == ["copied"], result.outcomes
    assert layer.read_bytes() == b"layer" and layer.stat().st_ino != damaged
    assert oci_layout.damaged_blobs(dest, manifest) == []
    assert oci_layout.refs(dest) == {"rel/x:1": manifest}


@pytest.mark.parametrize("node", ["link", "directory", "fifo"])
def test_a_blob_name_that_is_no_regular_file_is_refused_never_replaced(
        tmp_path: Path, node: str) -> None:
    """A rerun hashes the blobs already there: one that is no regular file is refused,
    never followed, waited on (a FIFO's open) or replaced."""
    dest, stage = tmp_path / "dest", tmp_path / "dest" / ".aipcc-stage-x"
    manifest = _layout(dest)
    layer = _blob(dest, _layer_of(dest, manifest))
    (stage / "blobs" / "sha256").mkdir(parents=True)
    _blob(stage, _layer_of(dest, manifest)).write_bytes(b"layer")
    layer.unlink()
    if node == "link":
        (tmp_path / "outside").write_bytes(b"layer")
        layer.symlink_to(tmp_path / "outside")
    elif node == "fifo":
        os.mkfifo(layer)
    else:
        layer.mkdir()
    for check in (lambda: oci_layout.damaged_blobs(dest, manifest),
                  lambda: oci_layout.replace_blobs(stage, dest)):
        with pytest.raises(InputError, match="not a regular file") as refused:
            check()
        assert refused.value.file == str(layer)
    assert {"link": layer.is_symlink, "directory": layer.is_dir,
            "fifo": layer.is_fifo}[node]()
