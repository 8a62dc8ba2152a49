"""The ClusterImagePolicy mirror --key writes (its CRD check: tests/integration/
test_signing.py), the key it names read before anything is copied, and the signatures and
attestations mirror carries through an OCI layout (with real skopeo and registries:
tests/integration/test_signing.py)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from aipcc_build.errors import InputError
from aipcc_build.oci import OCI_MANIFEST
from aipcc_build.publish.image_policy import policy_text, trust
from aipcc_build.publish.oci_layout import LayoutStore, is_attachment, refs
from aipcc_build.publish.referrers import (
    Subject,
    canonical,
    list_referrers,
    push_artifact,
    read_artifact,
    referrers_tag,
)
from aipcc_build.publish.release_signing import carry, sign, signatures, verified_identities
from aipcc_build.publish.signing import load_signer, signature_tag, write_private_key
from aipcc_build.tools.oci_registry import digest_of


def test_the_policy_names_the_key_for_each_released_repository(tmp_path: Path) -> None:
    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    settings = trust(True, str(tmp_path / "k.pub"))
    assert settings.carry and settings.policy_key is not None
    text = policy_text("aipcc-mirror", settings.policy_key,
                       {"quay.io/aipcc/b": "m.site/b", "quay.io/aipcc/a": "m.site/a"})
    document = yaml.safe_load(text)
    assert document["kind"] == "ClusterImagePolicy"
    assert document["spec"]["scopes"] == ["quay.io/aipcc/a", "quay.io/aipcc/b"]
    key = document["spec"]["policy"]["rootOfTrust"]["publicKey"]["keyData"]
    assert base64.b64decode(key) == (tmp_path / "k.pub").read_bytes()


def test_a_key_that_is_no_public_key_is_refused_first(tmp_path: Path) -> None:
    (tmp_path / "k.pub").write_text("not a key\n")
    with pytest.raises(InputError, match="not a PEM public key"):
        trust(True, str(tmp_path / "k.pub"))
    with pytest.raises(InputError, match="cannot read the public key"):
        trust(True, str(tmp_path / "absent.pub"))


def _layout(root: Path) -> tuple[LayoutStore, str]:
    """A layout of one small image `rel/x:1`; (its store, the image's digest)."""
    root.mkdir()
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    store = LayoutStore(root)
    config = store.put_blob("rel/x", b"{}")
    body = canonical({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": config, "size": 2}, "layers": []})
    store.put_manifest("rel/x", "1", body, OCI_MANIFEST)
    return store, digest_of(body)


def test_signatures_and_referrers_travel_through_layouts(tmp_path: Path) -> None:
    """Signed and attested in one layout, carried to another and back out: the sigstore
    attachment and the referrers tag are refs of the layout that name no image."""
    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    signer = load_signer(str(tmp_path / "k.key"), _pass(tmp_path))
    first, digest = _layout(tmp_path / "first")
    assert sign(first, "rel/x", digest, ["quay.io/rel/x:1"], signer) == 1
    found = first.get_manifest("rel/x", digest)
    assert found is not None
    subject = Subject("rel/x", digest, found[1], len(found[0]))
    push_artifact(first, subject, "application/x-test", "text/plain", b"attested")
    assert refs(tmp_path / "first") == {"rel/x:1": digest}  # attachments are no images
    second, _ = _layout(tmp_path / "second")
    assert carry(first, "rel/x", second, "rel/x", digest) == 2
    assert carry(first, "rel/x", second, "rel/x", digest) == 0  # a rerun writes nothing
    _, pairs = signatures(second, "rel/x", digest)
    assert verified_identities(pairs, digest, signer.public_key) == ["quay.io/rel/x:1"]
    [referrer] = list_referrers(second, "rel/x", digest, "application/x-test")
    artifact = read_artifact(second, "rel/x", referrer["digest"])
    assert artifact is not None and artifact[1] == b"attested"
    assert is_attachment(f"rel/x:{signature_tag(digest)}")
    assert is_attachment(f"rel/x:{referrers_tag(digest)}")
    assert not is_attachment("rel/x:sha256-1.0")


def _pass(tmp_path: Path) -> str:
    (tmp_path / "pass").write_text("p\n")
    return str(tmp_path / "pass")


def test_a_broken_layout_is_named_not_trusted(tmp_path: Path) -> None:
    store, digest = _layout(tmp_path / "l")
    blob = tmp_path / "l" / "blobs" / "sha256" / digest.partition(":")[2]
    blob.write_bytes(blob.read_bytes() + b" ")
    with pytest.raises(InputError, match="holds other bytes") as caught:
        store.get_manifest("rel/x", "1")
    assert caught.value.file == str(blob)
    with pytest.raises(InputError, match="has no blob"):
        store.get_blob("rel/x", "sha256:" + "0" * 64)
    with pytest.raises(InputError, match="not a sha256 digest"):
        store.get_blob("rel/x", "sha256:../../etc/passwd")
    (tmp_path / "l" / "index.json").write_text("[]")
    with pytest.raises(InputError, match="no image index"):
        store.put_manifest("rel/x", "2", b"{}", OCI_MANIFEST)
    (tmp_path / "l" / "index.json").write_text("{")
    with pytest.raises(InputError, match="index.json"):
        refs(tmp_path / "l")


def test_a_hostile_layout_carries_nothing_it_cannot_read_and_no_traceback(
        tmp_path: Path) -> None:
    """A layout whose attachment is no JSON and whose referrers index lists a digest that
    climbs out of blobs/: the attachment counts as none, the digest is refused naming the
    layout (mirror marks that image failed), nothing is written beside."""
    source, digest = _layout(tmp_path / "source")
    source.put_manifest("rel/x", signature_tag(digest), b"not json", OCI_MANIFEST)
    assert signatures(source, "rel/x", digest) == ([], [])
    index = canonical({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                       "manifests": [{"mediaType": OCI_MANIFEST, "size": 2,
                                      "digest": "sha256:../../../etc/passwd"}]})
    source.put_manifest("rel/x", referrers_tag(digest), index,
                        "application/vnd.oci.image.index.v1+json")
    dest, _ = _layout(tmp_path / "dest")
    before = sorted(p.name for p in (tmp_path / "dest" / "blobs" / "sha256").iterdir())
    with pytest.raises(InputError, match="not a sha256 digest"):
        carry(source, "rel/x", dest, "rel/x", digest)
    assert sorted(p.name for p in (tmp_path / "dest" / "blobs" / "sha256").iterdir()) == before


@pytest.mark.parametrize("source", ["report", "directory", "build-id"])
def test_a_policy_for_images_never_signed_is_refused(tmp_path: Path, cli, source: str) -> None:
    """Only promote signs: a build report's images (or a build id's) carry no signature,
    and a ClusterImagePolicy requiring them made the site refuse every pull. Refused before
    anything is read from a registry or written, one line naming --key."""
    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    reports = tmp_path / "reports"
    reports.mkdir()
    report = reports / "build-report.json"
    report.write_text('{"schema": 1, "build_id": "42", "registry": "127.0.0.1:9", "images": '
                      '[{"key": "base/x", "name": "x", "kind": "base", "reference": '
                      '"127.0.0.1:9/rel/x:3.0-42", "status": "ok", "digest": "sha256:'
                      + "a" * 64 + '"}]}')
    given = {"report": ["--report", str(report)], "directory": ["--report", str(reports)],
             "build-id": ["--build-id", "42"]}[source]
    out = tmp_path / "out"
    done = cli("mirror", *given, "--to", "127.0.0.1:9/site", "--key", str(tmp_path / "k.pub"),
               "--out", str(out))
    assert done.code == 2, done
    assert "--key: needs a release manifest" in done.err, done.err
    assert len(done.err.strip().splitlines()) == 1 and "Traceback" not in done.err
    assert not out.exists()


def test_a_layout_image_without_its_signature_is_refused_with_key(tmp_path: Path,
                                                                   cli) -> None:
    """mirror --key --from a layout writes a ClusterImagePolicy requiring the release's
    signatures: an image of the layout without its sigstore signature ref would be refused
    at the site. Refused before anything is copied, one line naming the image and --key;
    the signed images alone pass."""
    from aipcc_build.publish import oci_layout
    from aipcc_build.publish.mirror import images_from_layout

    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    signer = load_signer(str(tmp_path / "k.key"), _pass(tmp_path))
    store, digest = _layout(tmp_path / "layout")
    oci_layout.write_meta(tmp_path / "layout", "quay.io")
    assert sign(store, "rel/x", digest, ["quay.io/rel/x:1"], signer) == 1
    source = f"dir:{tmp_path / 'layout'}"
    images, _, _ = images_from_layout(source, signed=True)
    assert [(i.path, i.tag) for i in images] == [("rel/x", "1")]
    found = store.get_manifest("rel/x", digest)
    assert found is not None
    store.put_manifest("rel/unsigned", "2", found[0], found[1])  # the same image, unsigned
    dest = tmp_path / "dest"
    done = cli("mirror", "--from", source, "--to", f"dir:{dest}", "--key",
               str(tmp_path / "k.pub"), "--out", str(tmp_path / "out"))
    assert done.code == 2, done
    [line] = done.err.strip().splitlines()
    assert "--key: no signature" in line and "rel/unsigned:2" in line, line
    assert "rel/x:1" not in line and str(tmp_path / "layout") in line
    assert not dest.exists() and not (tmp_path / "out").exists()
    assert [i.path for i in images_from_layout(source)[0]] == ["rel/unsigned", "rel/x"]
