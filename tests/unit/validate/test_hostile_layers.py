"""Issue 16.5-16.7 on synthetic layouts and layers: tampered blobs and a poisoned cache are
refused, hostile configs and indexes are input errors, symlink resolution and temporary
disk are bounded."""

from __future__ import annotations

import gc
import gzip
import json
import tarfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aipcc_build.imagefs import symlinks
from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
from aipcc_build.validate import detect
from aipcc_build.validate.cache import LayerCache
from aipcc_build.validate.layers import scan_layer
from aipcc_build.validate.results import REFUSED_LAYER, LayerScan
from tests.support.layers import member, sha256, tar_bytes
from tests.support.raw_tar import Member, raw_tar

CUDA_129 = tar_bytes([member("usr/local/cuda-12.9/version.json",
                             b'{"cuda": {"version": "12.9.1"}}')])
CUDA_128 = tar_bytes([member("usr/local/cuda-12.8/version.json",
                             b'{"cuda": {"version": "12.8.1"}}')])


class Layout:
    """A one-image OCI layout; each part can be replaced to make it hostile."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.blobs = root / "blobs" / "sha256"
        self.blobs.mkdir(parents=True)

    def put(self, data: bytes, digest: str = "") -> str:
        digest = digest or sha256(data)
        (self.blobs / digest.split(":", 1)[1]).write_bytes(data)
        return digest

    def image(self, layer: bytes, config: dict[str, object]) -> Layout:
        layer_digest = self.put(layer)
        rootfs = config.get("rootfs")
        if rootfs == {"diff_ids": []}:  # unless a test says otherwise, the config is right
            tar = gzip.decompress(layer) if layer[:2] == b"\x1f\x8b" else layer
            config = {**config, "rootfs": {"diff_ids": [sha256(tar)]}}
        manifest = {"schemaVersion": 2,
                    "config": {"digest": self.put(json.dumps(config).encode())},
                    "layers": [{"digest": layer_digest, "size": len(layer)}]}
        self.top({"digest": self.put(json.dumps(manifest).encode())})
        return self

    def top(self, descriptor: dict[str, object]) -> None:
        (self.root / "index.json").write_text(
            json.dumps({"schemaVersion": 2, "manifests": [descriptor]}))


def config(**changes: object) -> dict[str, object]:
    return {"os": "linux", "architecture": "amd64", "rootfs": {"diff_ids": []},
            "config": {"Env": ["CUDA_VERSION=12.9.1"]}, **changes}


@pytest.fixture
def validate(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)

    def run(layout: Layout):  # type: ignore[no-untyped-def]
        result = cli("validate", f"oci:{layout.root}", "--cache-dir", str(tmp_path / "cache"))
        assert "Traceback" not in result.err
        return result

    return run


def test_a_tampered_layer_blob_is_refused(tmp_path: Path, validate) -> None:
    layout = Layout(tmp_path / "oci").image(CUDA_129, config())
    (layout.blobs / sha256(CUDA_129).split(":")[1]).write_bytes(CUDA_128)  # a 12.8 tree
    result = validate(layout)
    assert result.code == 1  # the engine refuses it: a failed check, not a bad input
    assert f"layer {sha256(CUDA_129)} is refused by the container engine: it does not " \
           "match its digest" in result.out
    assert sha256(CUDA_128) in result.out


@pytest.mark.parametrize(("diff_ids", "reason"), [
    ([], "the config lists 0 layers, the image ships 1: refused"),
    ([sha256(CUDA_128)], f"layer 1 is {sha256(CUDA_129)} uncompressed, the config says "
                         f"{sha256(CUDA_128)}: refused"),
])
def test_a_config_that_does_not_list_the_layers_is_refused(
        tmp_path: Path, validate, diff_ids: list[str], reason: str) -> None:
    # The layer is gzip'd: its diffID is the digest of the tar inside, not of the blob.
    layer = gzip.compress(CUDA_129, mtime=0)
    layout = Layout(tmp_path / "oci").image(layer, config(rootfs={"diff_ids": diff_ids,
                                                                  "type": "layers"}))
    result = validate(layout)
    assert result.code == 1
    refused = [line for line in result.out.splitlines() if "rootfs.diff_ids" in line]
    at = "rootfs.diff_ids" + (f" [layer {sha256(layer)[:19]}]" if diff_ids else "")
    assert refused == [f"  oci:{layout.root} linux/amd64: violation: layers (config) at {at}: "
                       f"{reason}"]


def test_a_tampered_manifest_or_config_blob_is_refused(tmp_path: Path, validate) -> None:
    layout = Layout(tmp_path / "oci").image(CUDA_129, config())
    manifest = json.loads((tmp_path / "oci" / "index.json").read_text())["manifests"][0]
    path = layout.blobs / manifest["digest"].split(":")[1]
    path.write_bytes(path.read_bytes().replace(b'"size"', b' "size"'))
    result = validate(layout)
    assert result.code == 2
    assert f"blob {manifest['digest']} does not match its digest" in result.err


def test_an_index_listing_itself_is_an_input_error(tmp_path: Path, validate) -> None:
    layout = Layout(tmp_path / "oci")
    loop = "sha256:" + "0" * 64
    layout.put(json.dumps({"schemaVersion": 2, "manifests": [{"digest": loop}]}).encode(),
               loop)
    layout.top({"digest": loop})
    result = validate(layout)
    assert result.code == 2 and f"blob {loop} does not match its digest" in result.err


@pytest.mark.parametrize(("changes", "field"), [
    ({"architecture": 5}, "architecture: expected a string"),
    ({"config": {"Env": "CUDA_VERSION=12.9.1"}}, "config.Env: expected a list of strings"),
    ({"config": {"Env": [1]}}, "config.Env: expected a list of strings"),
    ({"config": {"Labels": {"a": 1}}}, "config.Labels: expected an object of strings"),
    ({"config": ["Env"]}, "config: expected an object"),
    ({"rootfs": {"diff_ids": "x"}}, "rootfs.diff_ids: expected a list of strings"),
])
def test_a_config_of_wrong_types_is_an_input_error_naming_the_field(
        tmp_path: Path, validate, changes: dict[str, object], field: str) -> None:
    layout = Layout(tmp_path / "oci").image(CUDA_129, config(**changes))
    result = validate(layout)
    assert result.code == 2
    assert "config sha256:" in result.err and field in result.err, result.err


def test_a_cache_entry_of_another_blob_or_scanner_is_ignored(tmp_path: Path) -> None:
    cache = LayerCache(tmp_path)
    mine, other = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    cache.put(LayerScan(other, 1))
    entry = Path(cache.dir) / "sha256" / f"{'b' * 64}.json"
    poisoned = Path(cache.dir) / "sha256" / f"{'a' * 64}.json"
    poisoned.write_bytes(entry.read_bytes())  # other's scan, filed under my digest
    assert cache.get(mine) is None
    data = json.loads(entry.read_text())
    entry.write_text(json.dumps({**data, "format": data["format"] - 1}))
    assert cache.get(other) is None  # written by an older scanner


def test_the_scan_hashes_the_blob_it_reads(tmp_path: Path) -> None:
    blob = tmp_path / "layer"
    blob.write_bytes(CUDA_129)
    good = scan_layer(LayerJob(sha256(CUDA_129), "", BlobLocation(str(blob))))
    assert good.error is None
    bad = scan_layer(LayerJob(sha256(CUDA_128), "", BlobLocation(str(blob))))
    assert not bad.error and [h.detail for h in bad.hazards if h.kind == REFUSED_LAYER] == [
        f"layer {sha256(CUDA_128)} is refused by the container engine: it does not match "
        f"its digest (its bytes hash to {sha256(CUDA_129)})"]



@pytest.mark.parametrize("collecting", [True, False])
def test_a_scan_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path,
                                                           collecting: bool) -> None:
    """The walk pauses the cyclic collector; a layer read to its end and one refused in the
    middle of the walk (a header's checksum) both give it back as it was."""
    blob = tmp_path / "layer"
    for layer in (CUDA_129, CUDA_129[:148] + b"7" + CUDA_129[149:]):
        blob.write_bytes(layer)
        (gc.enable if collecting else gc.disable)()
        try:
            scan = scan_layer(LayerJob(sha256(layer), "", BlobLocation(str(blob))))
            assert gc.isenabled() is collecting
        finally:
            gc.enable()
        assert (layer == CUDA_129) is not any(h.kind == REFUSED_LAYER for h in scan.hazards)

# ---- issue 16.6: symlink resolution is bounded --------------------------------------------

def test_link_targets_longer_than_path_max_never_resolve() -> None:
    # Resolving this took minutes before (each component re-joined the whole path).
    target = "a/" * 80_000
    assert symlinks.resolve_link("/x", {"/x": target}) is None


def test_a_layer_whose_links_exceed_the_budget_is_hostile(tmp_path: Path) -> None:
    links = 200
    # Each link wanders down and up before naming the next: far more steps than a real one.
    wander = "../l/" * 20
    layer = tar_bytes([member(f"l/{n}", kind=tarfile.SYMTYPE, link=f"{wander}{n + 1}")
                       for n in range(links)])
    blob = tmp_path / "layer"
    blob.write_bytes(layer)
    budget = symlinks.Budget(links)
    scanned = scan_layer(LayerJob(sha256(layer), "", BlobLocation(str(blob))))
    (bound,) = [h for h in scanned.hazards if h.kind == "symlink-bound"]
    assert bound.severe and f"more than {budget.total} steps" in bound.detail


def test_real_link_farms_stay_within_the_budget(tmp_path: Path) -> None:
    layer = tar_bytes(
        [member(f"usr/lib64/lib{n}.so", kind=tarfile.SYMTYPE, link=f"lib{n}.so.1")
         for n in range(2000)]
        + [member(f"usr/bin/tool{n}", kind=tarfile.SYMTYPE, link=f"/etc/alternatives/t{n}")
           for n in range(2000)]
        + [member(f"etc/alternatives/t{n}", kind=tarfile.SYMTYPE, link=f"/usr/lib/t/{n}")
           for n in range(2000)])
    blob = tmp_path / "layer"
    blob.write_bytes(layer)
    scanned = scan_layer(LayerJob(sha256(layer), "", BlobLocation(str(blob))))
    assert not [h for h in scanned.hazards if h.kind in ("symlink-bound", "symlink-loop")]


# ---- issue 16.7: temporary disk for RPM databases is bounded ------------------------------

def test_rpm_databases_spool_at_most_the_bound(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "SPOOL_LIMIT", 10_000)
    database = b"\0" * 6_000
    # Two databases: the second is too much. (The engine refuses a layer holding one name
    # twice, so a name is spooled once.)
    layer = tar_bytes([member("var/lib/rpm/rpmdb.sqlite", database),
                       member("usr/lib/sysimage/rpm/rpmdb.sqlite", database)])
    blob = tmp_path / "layer"
    blob.write_bytes(layer)
    peak = 0
    original = detect.LayerDetector.content_file

    def measured(self, path: str, file: Path) -> None:  # type: ignore[no-untyped-def]
        nonlocal peak
        peak = max(peak, sum(f.stat().st_size for f in file.parent.iterdir()))
        original(self, path, file)

    monkeypatch.setattr(detect.LayerDetector, "content_file", measured)
    scanned = scan_layer(LayerJob(sha256(layer), "", BlobLocation(str(blob))))
    assert peak <= 10_000
    (refused,) = [h for h in scanned.hazards if h.kind == "spool-limit"]
    assert refused.severe and refused.path == "/usr/lib/sysimage/rpm/rpmdb.sqlite"


# ---- fuzz: the OCI readers end in exit 0, 1 or 2, never a traceback -----------------------

oci_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(["schemaVersion", "mediaType", "manifests", "config",
                                       "layers", "digest", "size", "platform", "os",
                                       "architecture", "rootfs", "diff_ids", "Env", "Labels",
                                       "annotations"]),
                      children, max_size=5),
    max_leaves=15)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(index=oci_json, manifest=oci_json, image_config=oci_json)
def test_fuzz_oci_readers(tmp_path: Path, validate, index: object, manifest: object,
                          image_config: object) -> None:
    root = tmp_path / f"oci-{uuid.uuid4().hex[:8]}"
    layout = Layout(root)
    layer = layout.put(CUDA_129)
    config_digest = layout.put(json.dumps(image_config).encode())
    if isinstance(manifest, dict):  # point it at real blobs, so the fuzz gets past them
        manifest = {**manifest, "schemaVersion": 2, "config": {"digest": config_digest},
                    "layers": manifest.get("layers", [{"digest": layer}])}
    manifest_digest = layout.put(json.dumps(manifest).encode())
    if isinstance(index, dict) and index.get("manifests") is None:
        index = {**index, "manifests": [{"digest": manifest_digest}]}
    (root / "index.json").write_text(json.dumps(index))
    assert validate(layout).code in (0, 1, 2)


@pytest.mark.parametrize(("members", "why"), [
    ([Member(b"usr/local/cuda-12.8/version.json", data=b"{}"),
      Member(b"./usr/local/cuda-12.8/version.json", data=b"{}")],
     "member './usr/local/cuda-12.8/version.json' is the layer's second of that name"),
    ([Member(b"x", b"7", data=b"x")],
     "member 'x' has tar type '7', which the engine does not create"),
    # Issue 37: the scan places members by the engine's own rules (`overlay.Unpacker`);
    # its walk of its own accepted these three, which the engine refuses
    # (tests/integration/test_engine_refusals.py checks them against it).
    ([Member(b"usr/local/cuda", data=b"x"),
      Member(b"usr/local/cuda/version.json", data=b"{}")],
     "/usr/local/cuda on the way to /usr/local/cuda/version.json is not a directory"),
    ([Member(b"d", b"2", link=b"nowhere"), Member(b"d/version.json", data=b"{}")],
     "/d on the way to /d/version.json is a symlink to nothing"),
    ([Member(b"a", data=b"x"), Member(b"a/b/c/lib.so", data=b"x")],
     "/a on the way to /a/b/c/lib.so is not a directory"),
    ([Member(b"x/y/", b"5"), Member(b"x", data=b"1")],
     "directory /x/y is gone when the engine sets its times: a later member replaced a "
     "directory above it"),
])
def test_a_layer_the_engine_refuses_is_refused_in_one_line(
        tmp_path: Path, validate, members: list[Member], why: str) -> None:
    layer = raw_tar(members)
    layout = Layout(tmp_path / "oci").image(layer, config())
    result = validate(layout)
    assert result.code == 1
    digest = sha256(layer)
    assert [line for line in result.out.splitlines() if "refused" in line] == [
        f"  oci:{layout.root} linux/amd64: violation: refused-layer (layer) at / [layer "
        f"{digest[:19]}]: refused-layer: layer {digest} is refused by the container engine: "
        f"{why}"]


def test_a_config_nested_thousands_deep_is_one_line_of_input_error(tmp_path: Path,
                                                                   validate) -> None:
    layout = Layout(tmp_path / "oci")
    nested = b'{"os": "linux", "architecture": "amd64", "x": ' + b"[" * 200_000 + \
        b"]" * 200_000 + b"}"
    manifest = {"schemaVersion": 2, "config": {"digest": layout.put(nested)},
                "layers": [{"digest": layout.put(CUDA_129), "size": len(CUDA_129)}]}
    layout.top({"digest": layout.put(json.dumps(manifest).encode())})
    result = validate(layout)
    assert result.code == 2
    assert "nested deeper than this reader follows" in result.err
    assert len([line for line in result.err.splitlines() if "error" in line]) == 1


def test_a_version_file_nested_thousands_deep_is_unparsable_not_a_crash(
        tmp_path: Path) -> None:
    layer = tar_bytes([member("usr/local/cuda-12.9/version.json",
                              b"[" * 200_000 + b"]" * 200_000)])
    blob = tmp_path / "layer"
    blob.write_bytes(layer)
    scan = scan_layer(LayerJob(sha256(layer), "", BlobLocation(str(blob))))
    assert scan.error is None
    assert [h.kind for h in scan.hazards] == ["unparsable-file"]


@pytest.mark.parametrize(("layer", "reason"), [
    (CUDA_129[:148] + b"7" + CUDA_129[149:], "its checksum does not match"),
    (raw_tar([Member(b"a", data=b"1")], end=False) + bytes(512) + CUDA_129,
     "the archive ends only at two zero blocks"),
    (gzip.compress(CUDA_129) + bytes(16), "gzip: invalid header"),
])
def test_a_layer_the_engine_refuses_fails_naming_the_layer_and_the_reason(
        tmp_path: Path, validate, layer: bytes, reason: str) -> None:
    layout = Layout(tmp_path / "oci").image(layer, config())
    result = validate(layout)
    assert result.code == 1, result.out + result.err
    [line] = [line for line in result.out.splitlines() if "refused by the container" in line]
    assert f"layer {sha256(layer)} is refused by the container engine" in line
    assert reason in line


def test_evidence_lands_where_the_engine_puts_it(tmp_path: Path) -> None:
    """Issue 37: a whiteout below a file of the layer is ignored (the engine's mknod fails
    with ENOTDIR), a member goes through a chain of the layer's symlinks, and a name
    written again after its whiteout replaces the whiteout: the scan's model is the
    engine's unpacking (`overlay.Unpacker`), not rules of its own."""
    layer = raw_tar([
        Member(b"opt/f", data=b"1"), Member(b"opt/f/.wh.rocm", data=b""),
        Member(b"usr/local/cuda-12.9/", b"5"),
        Member(b"usr/local/b", b"2", link=b"cuda-12.9"),
        Member(b"usr/local/a", b"2", link=b"b"),
        Member(b"usr/local/a/version.json", data=b'{"cuda": {"version": "12.9.1"}}'),
        Member(b"etc/.wh.pip.conf"), Member(b"etc/pip.conf", data=b"[global]\n"),
    ])
    blob = tmp_path / "layer"
    blob.write_bytes(layer)
    scan = scan_layer(LayerJob(sha256(layer), "", BlobLocation(str(blob))))
    assert not [h for h in scan.hazards if h.severe], scan.hazards
    assert scan.whiteouts == ()
    assert ("/etc/pip.conf", "0", "") in scan.members
    assert "/usr/local/cuda-12.9/version.json" in scan.content_paths
    assert {e.path for e in scan.evidence if e.version == "12.9.1"} == {
        "/usr/local/cuda-12.9/version.json"}
