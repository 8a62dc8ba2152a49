"""containers-storage images read in place: the tar-split reader on synthetic tar-splits,
the store on a synthetic graphroot, and real buildah images against the skopeo copy."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.imagefs import storage as storage_module
from aipcc_build.imagefs.blobs import BlobLocation, LayerJob, TarSplitLayer
from aipcc_build.imagefs.storage import NotInPlace, Store, find_store, read_image
from aipcc_build.imagefs.tar import CHUNK
from aipcc_build.imagefs.tarsplit import TarSplitStream
from aipcc_build.validate import ImageVerdict, validate_image
from aipcc_build.validate.layers import scan_layer
from aipcc_build.validate.results import VIOLATION
from tests.support.layers import CUDA128_LABELS, export, member, rpmdb, run, tar_bytes

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="storage is read in place as root")
VERSION_129 = b'{"cuda": {"name": "CUDA SDK", "version": "12.9.1"}}'


def write_tar_split(tar: bytes, root: Path, go_json: bool = True,
                    skip_content: tuple[str, ...] = ()) -> TarSplitLayer:
    """Split TAR as containers/storage does: tar bytes without file contents as gzip'd JSON
    lines under ROOT, file contents under ROOT/files. GO_JSON writes the fields in Go's
    order and compact; otherwise sorted with spaces (the reader's json.loads path)."""
    files = root / "files"
    files.mkdir(parents=True)
    entries: list[dict[str, Any]] = []

    def segment(data: bytes) -> None:
        entries.append({"type": 2, "payload": base64.b64encode(data).decode()})

    position = 0
    with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as archive:
        for info in archive:
            segment(tar[position:info.offset_data])
            size = info.size if info.isreg() else 0
            entry: dict[str, Any] = {"type": 1, "name": info.name}
            if size:
                entry["size"] = size
            entry["payload"] = None
            entries.append(entry)
            position = info.offset_data + size
            if info.isreg() and info.name not in skip_content:
                target = files / info.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar[info.offset_data:position])
    segment(tar[position:])
    lines = []
    for number, entry in enumerate(entries):
        entry["position"] = number
        lines.append(json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
                     if go_json else json.dumps(entry, sort_keys=True))
    path = root / "layer.tar-split.gz"
    path.write_bytes(gzip.compress("\n".join(lines).encode() + b"\n"))
    return TarSplitLayer(str(path), str(files), len(tar))


def read_all(layer: TarSplitLayer) -> tuple[bytes, list[tuple[str, str]]]:
    out = []
    with TarSplitStream(layer) as stream:
        while True:
            data = stream.read(CHUNK)
            if not data:
                return b"".join(out), stream.refused
            out.append(data)


def layer_tar(tmp_path: Path) -> bytes:
    long_dir = "usr/lib/python3.9/site-packages/" + "x" * 120
    return tar_bytes([
        member("usr/", kind=tarfile.DIRTYPE),
        member("usr/local/cuda-12.9/version.json", VERSION_129),
        member("usr/local/cuda-12.9/lib64/libcudart.so.12.9.79", b"\x7fELF" + bytes(3000)),
        member("usr/local/cuda", kind=tarfile.SYMTYPE, link="cuda-12.9"),
        member(f"{long_dir}/nvidia_cuda_runtime_cu12-12.9.79.dist-info/METADATA", b"Name: x\n"),
        member("var/lib/rpm/rpmdb.sqlite", rpmdb(tmp_path / "rpmdb.sqlite",
                                                 [("libcublas-12-9", "12.9.1.4", "1")])
               .read_bytes()),
        member("usr/share/doc/empty"),
        member("usr/lib/.wh.removed"),
        member("opt/.wh..wh..opq"),
        member("usr/share/big.bin", b"z" * (3 * CHUNK + 7)),
        member("usr/bin/hard", kind=tarfile.LNKTYPE, link="usr/share/doc/empty"),
    ])


@pytest.mark.parametrize("go_json", [True, False], ids=["go-json", "other-json"])
def test_tar_split_gives_back_the_tar_byte_for_byte(tmp_path: Path, go_json: bool) -> None:
    tar = layer_tar(tmp_path)
    layer = write_tar_split(tar, tmp_path / "split", go_json)
    assert read_all(layer) == (tar, [])


def test_scan_in_place_equals_scan_of_the_tar(tmp_path: Path) -> None:
    tar = layer_tar(tmp_path)
    blob = tmp_path / "layer.tar"
    blob.write_bytes(tar)
    digest = "sha256:" + hashlib.sha256(tar).hexdigest()
    from_tar = scan_layer(LayerJob(digest, "", BlobLocation(str(blob))))
    in_place = scan_layer(LayerJob(digest, "", write_tar_split(tar, tmp_path / "split")))
    assert in_place == from_tar
    assert in_place.error is None and in_place.whiteouts == ("/usr/lib/removed",)
    assert {(e.kind, e.version) for e in in_place.evidence} >= {
        ("version-file", "12.9.1"), ("rpm", "12.9.1.4-1"), ("library", "12.9.79"),
        ("dist-info", "12.9.79")}


def test_skipped_content_is_never_opened(tmp_path: Path) -> None:
    # The big file's content is absent from the layer's directory: passing over it must
    # not notice, while the version file the detector wants is read.
    tar = layer_tar(tmp_path)
    layer = write_tar_split(tar, tmp_path / "split", skip_content=("usr/share/big.bin",))
    scan = scan_layer(LayerJob("sha256:" + "1" * 64, "", layer))
    assert scan.error is None
    assert ("version-file", "12.9.1") in {(e.kind, e.version) for e in scan.evidence}


def test_hostile_names_are_findings_not_opens(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "local" / "cuda-12.9").mkdir(parents=True)
    (outside / "local" / "cuda-12.9" / "version.json").write_bytes(VERSION_129)
    tar = tar_bytes([member("usr/local/cuda-12.9/version.json", VERSION_129),
                     member("../secret", b"x" * 6)])
    layer = write_tar_split(tar, tmp_path / "split", skip_content=(
        "usr/local/cuda-12.9/version.json", "../secret"))
    # The layer's directory holds "usr" as a symlink out of it, and a file waits next to
    # the directory: joining the names to the directory would read either.
    os.symlink(outside, Path(layer.files) / "usr")
    (tmp_path / "split" / "secret").write_bytes(b"s" * 6)
    data, refused = read_all(layer)
    assert VERSION_129 not in data and b"ssssss" not in data
    assert [name for name, _ in refused] == ["/usr/local/cuda-12.9/version.json", "/../secret"]
    scan = scan_layer(LayerJob("sha256:" + "2" * 64, "", layer))
    assert scan.error is None
    assert "version-file" not in {e.kind for e in scan.evidence}
    # A name that is not UTF-8 comes base64-encoded in name_raw; one with a NUL byte cannot
    # be opened at all.
    lines = [{"type": 2, "payload": base64.b64encode(b"H" * 512).decode()},
             {"type": 1, "name_raw": base64.b64encode(b"bad\0name").decode(), "size": 3},
             {"type": 2, "payload": base64.b64encode(b"T").decode()}]
    Path(layer.tar_split).write_bytes(gzip.compress(
        "\n".join(json.dumps(line) for line in lines).encode()))
    data, refused = read_all(layer)
    assert (data, [name for name, _ in refused]) == (b"H" * 512 + bytes(3) + b"T",
                                                     ["/bad\0name"])
    # The refused version file reaches the detector as zeros, which it cannot parse.
    assert {(h.kind, h.path, h.severe) for h in scan.hazards} == {
        ("unsafe-content-path", "/usr/local/cuda-12.9/version.json", True),
        ("unparsable-file", "/usr/local/cuda-12.9/version.json", False),
        ("path-traversal", "../secret", False)}


def test_broken_tar_splits_make_the_layer_unreadable(tmp_path: Path) -> None:
    tar = tar_bytes([member("usr/local/cuda-12.9/version.json", VERSION_129)])
    short = write_tar_split(tar, tmp_path / "short")
    (Path(short.files) / "usr/local/cuda-12.9/version.json").write_bytes(b"{}")
    garbage = write_tar_split(tar, tmp_path / "garbage")
    Path(garbage.tar_split).write_bytes(gzip.compress(b'{"type":2,"payload":"AA=="}\n{oops\n'))
    unknown = write_tar_split(tar, tmp_path / "unknown")
    Path(unknown.tar_split).write_bytes(gzip.compress(b'{"type":7}\n'))
    corrupt = write_tar_split(tar, tmp_path / "corrupt")
    Path(corrupt.tar_split).write_bytes(b"\x1f\x8b\x08\x00" + b"garbage" * 50)
    missing = TarSplitLayer(str(tmp_path / "nothing.tar-split.gz"), short.files, 0)
    errors = {name: scan_layer(LayerJob("sha256:" + "3" * 64, "", layer)).error
              for name, layer in (("short", short), ("garbage", garbage), ("unknown", unknown),
                                  ("corrupt", corrupt), ("missing", missing))}
    assert "shorter than its tar-split says" in str(errors["short"])
    assert "malformed tar-split" in str(errors["garbage"])
    assert "unknown tar-split entry type 7" in str(errors["unknown"])
    assert "corrupt tar-split" in str(errors["corrupt"])
    assert "No such file" in str(errors["missing"])


def write_store(graphroot: Path, name: str, tar: bytes, config: dict[str, Any]) -> str:
    """A one-image overlay store as containers/storage lays it out; returns the image ID."""
    layer_id = "a" * 64
    diff_id = "sha256:" + hashlib.sha256(tar).hexdigest()
    config = {**config, "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
    config_bytes = json.dumps(config).encode()
    image_id = hashlib.sha256(config_bytes).hexdigest()
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"digest": f"sha256:{image_id}", "size": len(config_bytes)},
                "layers": [{"digest": diff_id, "size": len(tar)}]}
    layers = graphroot / "overlay-layers"
    split = write_tar_split(tar, graphroot / "work")
    layers.mkdir(parents=True)
    os.replace(split.tar_split, layers / f"{layer_id}.tar-split.gz")
    (graphroot / "overlay" / layer_id).mkdir(parents=True)
    os.replace(split.files, graphroot / "overlay" / layer_id / "diff")
    (layers / "layers.json").write_text(json.dumps([
        {"id": layer_id, "diff-digest": diff_id, "diff-size": len(tar)}]))
    images = graphroot / "overlay-images"
    (images / image_id).mkdir(parents=True)
    (images / "images.json").write_text(json.dumps([
        {"id": image_id, "names": [name], "layer": layer_id}]))
    (images / image_id / "manifest").write_text(json.dumps(manifest))
    config_key = base64.b64encode(f"sha256:{image_id}".encode()).decode()
    (images / image_id / f"={config_key}").write_bytes(config_bytes)
    return image_id


@needs_root
def test_store_location_follows_containers_storage(tmp_path: Path) -> None:
    conf = tmp_path / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{tmp_path / "g"}"\n')
    env = {"CONTAINERS_STORAGE_CONF": str(conf)}
    assert find_store(env) == Store(str(tmp_path / "g"), "overlay")
    assert find_store({**env, "STORAGE_DRIVER": "vfs"}) == Store(str(tmp_path / "g"), "vfs")
    with pytest.raises(NotInPlace, match="btrfs storage driver"):
        find_store({**env, "STORAGE_DRIVER": "btrfs"})
    conf.write_text(f'[storage]\ngraphroot = "{tmp_path / "g"}"\n')
    (tmp_path / "g" / "vfs").mkdir(parents=True)
    assert find_store(env).driver == "vfs"  # the driver already in use there
    (tmp_path / "g" / "overlay").mkdir()
    with pytest.raises(NotInPlace, match="cannot tell the storage driver"):
        find_store(env)
    for broken in ("[storage\n", "storage = 5\n", "[storage]\ngraphroot = 5\n"):
        conf.write_text(broken)
        with pytest.raises(NotInPlace, match="storage.conf"):
            find_store(env)


@needs_root
def test_synthetic_store_is_validated_in_place(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    graphroot = tmp_path / "graph"
    name = "localhost/synthetic/cuda-12.8:1"
    tar = tar_bytes([member("usr/local/cuda-12.9/version.json", VERSION_129)])
    image_id = write_store(graphroot, name, tar, {
        "os": "linux", "architecture": "amd64", "config": {"Labels": CUDA128_LABELS}})
    conf = tmp_path / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{graphroot}"\n')
    monkeypatch.setenv("CONTAINERS_STORAGE_CONF", str(conf))
    monkeypatch.setenv("PATH", str(tmp_path))  # no skopeo: nothing may be copied
    for ref in (name, image_id):
        [verdict] = validate_image(f"containers-storage:{ref}", cache_dir=tmp_path / ref[:5])
        assert verdict.layers_read == "in place (containers-storage, overlay)"
        assert [(f.evidence, f.version) for f in verdict.findings if f.status == VIOLATION] == [
            ("cuda-tree", "12.9"), ("version-file", "12.9")]
    store = find_store()
    for reference in ("synthetic/cuda-12.8:1", image_id[:12], f"{name}@sha256:{image_id}"):
        with pytest.raises(NotInPlace, match="not an image ID or a stored name"):
            read_image(store, reference)
    composefs = graphroot / "overlay" / ("a" * 64) / "composefs-data"
    composefs.mkdir()
    with pytest.raises(NotInPlace, match="stored for composefs"):
        read_image(store, name)
    composefs.rmdir()
    layer = next((graphroot / "overlay-layers").glob("*.tar-split.gz"))
    layer.rename(layer.with_suffix(".moved"))
    with pytest.raises(NotInPlace, match="has no tar-split"):
        read_image(store, name)
    config = next((graphroot / "overlay-images" / image_id).glob("=*"))
    config.write_text("{}")
    with pytest.raises(NotInPlace, match="does not match its digest"):
        read_image(store, name)


def read_or_refusal(store: Store, reference: str, cache: Any = None) -> Any:
    """What `read_image` gives for REFERENCE (the record), or the message it refuses with."""
    try:
        return read_image(store, reference, cache)
    except NotInPlace as exc:
        return f"refused: {exc}"


@needs_root
def test_store_metadata_is_answered_from_the_cache_only_for_the_bytes_it_was_read_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: what images.json and layers.json say of an image is kept beside their exact
    bytes; a store rewritten in any way (a name moved, the same size and a reused inode
    among them) is read again, and a cache hit gives what a parse gives."""
    graphroot = tmp_path / "graph"
    name = "localhost/synthetic/cached:1"
    tar = tar_bytes([member("usr/local/cuda-12.9/version.json", VERSION_129)])
    image_id = write_store(graphroot, name, tar, {"os": "linux", "architecture": "amd64"})
    store = Store(str(graphroot), "overlay")
    cache = tmp_path / "cache"
    parses: list[str] = []
    real_loads = json.loads

    def counted(data: Any, *args: Any, **kwargs: Any) -> Any:
        if len(data) > 100 and data.lstrip()[:1] == (b"[" if isinstance(data, bytes) else "["):
            parses.append("listing")
        return real_loads(data, *args, **kwargs)

    monkeypatch.setattr(storage_module.json, "loads", counted)
    cold = read_image(store, name, cache)
    assert len(parses) == 2  # images.json and layers.json
    assert read_image(store, name, cache) == cold == read_image(store, name)
    assert read_image(store, image_id, cache) == cold
    parses.clear()
    assert read_image(store, name, cache) == cold
    assert read_image(store, image_id, cache) == cold
    assert parses == []  # warm: neither listing parsed

    # The name renamed in place to one of the same length: the old name is gone.
    listing = graphroot / "overlay-images" / "images.json"
    renamed = "localhost/synthetic/cached:2"
    listing.write_text(listing.read_text().replace(name, renamed))
    assert read_or_refusal(store, name, cache) == read_or_refusal(store, name) == \
        f"refused: {name} is not an image ID or a stored name"
    assert read_image(store, renamed, cache) == cold

    # Duplicate IDs and names, a null name list, a malformed or missing file: with the
    # cache as without it, cold and warm.
    record = json.loads(listing.read_text())[0]
    bogus = {**record, "layer": "b" * 64}
    variants = [
        [record, bogus], [bogus, record], [{**bogus, "names": None}, record],
        [{**record, "names": [renamed, name]}, {**bogus, "names": [name]}],
    ]
    for number, variant in enumerate(variants):
        listing.write_text(json.dumps(variant))
        for reference in (name, renamed, image_id):
            expected = read_or_refusal(store, reference)
            assert read_or_refusal(store, reference, cache) == expected, (number, reference)
            assert read_or_refusal(store, reference, cache) == expected, (number, reference)
    for broken in ("[", "{}", "[5]"):
        listing.write_text(broken)
        assert read_or_refusal(store, name, cache).startswith("refused: ")
    listing.unlink()
    assert read_or_refusal(store, name, cache).startswith("refused: ")


@needs_root
def test_a_damaged_metadata_cache_is_a_miss(tmp_path: Path) -> None:
    graphroot = tmp_path / "graph"
    name = "localhost/synthetic/damaged:1"
    tar = tar_bytes([member("etc/hostname", b"x")])
    write_store(graphroot, name, tar, {"os": "linux", "architecture": "amd64"})
    store = Store(str(graphroot), "overlay")
    cache = tmp_path / "cache"
    expected = read_image(store, name, cache)
    entries = sorted((cache / "v1").iterdir())
    assert len(entries) == 2
    listing = graphroot / "overlay-images" / "images.json"
    entry = Path(storage_module._cache_entry(str(cache), str(listing)))
    assert entry in entries
    kept = entry.read_bytes()
    header, _, copy = kept.partition(b"\n")
    assert copy == listing.read_bytes()
    lying = json.dumps({"format": 1, "path": str(listing),
                        "answers": {f"image {name}": {"id": "0" * 64}}}).encode()
    damaged = [b"", b"garbage", header, lying + b"\n" + copy + b" ",  # other bytes
               header.replace(b'"format":1', b'"format":0') + b"\n" + copy,
               header.replace(str(listing).encode(), b"/elsewhere") + b"\n" + copy]
    for content in damaged:
        entry.write_bytes(content)
        assert read_image(store, name, cache) == expected
    for node in ("fifo", "directory"):
        entry.unlink() if entry.is_file() else None
        os.mkfifo(entry) if node == "fifo" else entry.mkdir()
        assert read_image(store, name, cache) == expected  # neither opened nor replaced
        assert not entry.is_file()
        entry.unlink() if node == "fifo" else entry.rmdir()
    read_image(store, name, cache)
    assert entry.read_bytes().partition(b"\n")[2] == listing.read_bytes()


# Real images built by buildah: in place and copied, the verdict must be the same.

def both_ways(ref: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
              ) -> tuple[ImageVerdict, ImageVerdict]:
    [in_place] = validate_image(ref, cache_dir=tmp_path / "in-place")

    def not_in_place() -> Store:
        raise NotInPlace("compared with a copy")

    with monkeypatch.context() as patch:
        patch.setattr(storage_module, "find_store", not_in_place)
        [copied] = validate_image(ref, cache_dir=tmp_path / "copied")
    return in_place, copied


@pytest.mark.integration
@pytest.mark.parametrize("fixture", ["cuda128", "mixed_wheel", "whiteout"])
def test_in_place_verdict_equals_the_copy(fixture: str, request: pytest.FixtureRequest,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    ref = f"containers-storage:{request.getfixturevalue(fixture)}"
    in_place, copied = both_ways(ref, tmp_path, monkeypatch)
    assert in_place.layers_read == "in place (containers-storage, overlay)"
    assert copied.layers_read == "skopeo copy (not read in place: compared with a copy)"
    assert replace(in_place, layers_read=None) == replace(copied, layers_read=None)
    assert in_place.verdict == {"cuda128": "ok", "mixed_wheel": "failed",
                                "whiteout": "ok"}[fixture]
    assert in_place.cached_layers == 0 and in_place.findings


@pytest.mark.integration
def test_layer_without_tar_split_falls_back_to_a_copy(
        mixed_wheel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The store as this process sees it lacks the tar-splits; skopeo still reads the real one.
    real = Path(find_store().layers)
    copy = tmp_path / "layers"
    copy.mkdir()
    shutil.copy(real / "layers.json", copy / "layers.json")
    monkeypatch.setattr(Store, "layers", property(lambda self: copy))
    [verdict] = validate_image(f"containers-storage:{mixed_wheel}", cache_dir=tmp_path)
    assert verdict.layers_read is not None
    assert verdict.layers_read.startswith("skopeo copy (not read in place: layer ")
    assert verdict.layers_read.endswith(" has no tar-split)")
    assert [f.version for f in verdict.findings if f.status == VIOLATION] == ["12.9"]


@pytest.mark.integration
def test_vfs_store_is_read_in_place(mixed_wheel: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    layout = export(mixed_wheel, f"oci:{tmp_path}/layout:v1",
                    "--dest-oci-accept-uncompressed-layers")
    [in_overlay] = validate_image(f"containers-storage:{mixed_wheel}", cache_dir=tmp_path / "a")
    conf = tmp_path / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "vfs"\ngraphroot = "{tmp_path / "graph"}"\n'
                    f'runroot = "{tmp_path / "run"}"\n')
    monkeypatch.setenv("CONTAINERS_STORAGE_CONF", str(conf))
    run("skopeo", "copy", "--quiet", layout, f"containers-storage:{mixed_wheel}")
    [in_vfs] = validate_image(f"containers-storage:{mixed_wheel}", cache_dir=tmp_path / "b")
    assert in_vfs.layers_read == "in place (containers-storage, vfs)"
    assert replace(in_vfs, layers_read=None) == replace(in_overlay, layers_read=None)


@pytest.mark.integration
def test_a_name_moved_by_buildah_is_followed_by_a_warm_validation(
        cuda128: str, mixed_wheel: str, tmp_path: Path) -> None:
    """Issue 37's metadata cache against the real store: buildah moves a name from one image
    to another (containers/storage rewrites images.json); the next validation with the same
    cache judges the image the name now names, as a validation without the cache does."""
    import uuid

    name = f"localhost/aipcc-test-moved/{uuid.uuid4().hex[:12]}:1"
    cache = tmp_path / "cache"
    run("buildah", "tag", cuda128, name)
    try:
        [first] = validate_image(f"containers-storage:{name}", cache_dir=cache)
        [again] = validate_image(f"containers-storage:{name}", cache_dir=cache)
        assert first.verdict == again.verdict == "ok"
        assert first.layers_read == "in place (containers-storage, overlay)"
        run("buildah", "tag", mixed_wheel, name)
        [moved] = validate_image(f"containers-storage:{name}", cache_dir=cache)
        [fresh] = validate_image(f"containers-storage:{name}",
                                 cache_dir=tmp_path / "fresh")
        assert moved.verdict == "failed"
        assert [f.version for f in moved.findings if f.status == VIOLATION] == ["12.9"]
        assert replace(moved, cached_layers=0) == replace(fresh, cached_layers=0)
    finally:
        run("buildah", "rmi", name)
