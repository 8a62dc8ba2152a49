"""mirror's copies of signatures and attestations against a registry that lies, stalls or
answers 429: a signed and attested layout carried into the distro's docker-registry
behind tests.support.publish.FlakyProxy. Real skopeo for the image, the real command
line; no image is built (seconds)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from aipcc_build.oci import REF_NAME_ANNOTATION
from aipcc_build.publish import oci_layout
from aipcc_build.publish.oci_layout import LayoutStore
from aipcc_build.publish.referrers import Subject, list_referrers, push_artifact
from aipcc_build.publish.release_signing import Registries, sign, signatures
from aipcc_build.publish.signing import load_signer, write_private_key
from tests.support.engine import layout as image_layout
from tests.support.publish import FlakyProxy
from tests.support.registry import Registry

pytestmark = pytest.mark.integration

PATH, TAG = "rel/x", "1.0"


def signed_layout(root: Path, tmp_path: Path) -> str:
    """A layout mirror wrote at the release: one image, signed, with one attestation. Its
    digest."""
    image_layout(root, [b"layer"])
    index = json.loads((root / "index.json").read_text())
    index["manifests"][0]["annotations"] = {REF_NAME_ANNOTATION: f"{PATH}:{TAG}"}
    (root / "index.json").write_text(json.dumps(index))
    (root / oci_layout.META).write_text('{"schema": 1, "source_registry": "quay.io/aipcc"}')
    digest = index["manifests"][0]["digest"]
    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    (tmp_path / "pass").write_text("p\n")
    store = LayoutStore(root)
    sign(store, PATH, digest, [f"quay.io/aipcc/{PATH}:{TAG}"],
         load_signer(str(tmp_path / "k.key"), str(tmp_path / "pass")))
    found = store.get_manifest(PATH, digest)
    assert found is not None
    push_artifact(store, Subject(PATH, digest, found[1], len(found[0])),
                  "application/x-test", "text/plain", b"attested")
    return digest


def carried(registry: Registry, digest: str) -> tuple[int, int]:
    """(signatures, referrers) of DIGEST the site's registry serves."""
    client, path = Registries(tls_verify=False).of(f"{registry.host}/site/{PATH}")
    return (len(signatures(client, path, digest)[0]),
            len(list_referrers(client, path, digest)))


def run_mirror(cli, src: Path, host: str, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    out.mkdir(exist_ok=True)
    return cli("mirror", "--from", f"dir:{src}", "--to", f"docker://{host}/site",
               "--no-tls-verify", "--out", str(out), *extra)


def test_a_front_that_loses_the_signature_tags_fails_the_image(
        registry: Registry, tmp_path: Path, cli) -> None:
    """The registry answered 201 to the sigstore attachment and the referrers tag and kept
    neither (the image's own tag it kept): mirror said every image was mirrored, and the
    site's policy then refused every pull. A carry now counts once read back."""
    src = tmp_path / "src"
    digest = signed_layout(src, tmp_path)
    with FlakyProxy(registry.host, failures=0, lose=("/manifests/sha256-",)) as front:
        done = run_mirror(cli, src, front.host, tmp_path / "out")
    assert done.code == 1, done.err
    assert "Traceback" not in done.err
    assert "does not serve the signatures of" in done.err, done.err
    assert "the attestations of" in done.err, done.err
    assert not (tmp_path / "out" / "imagedigestmirrorset.yaml").exists()  # no entry: none
    assert carried(registry, digest) == (0, 0)
    again = run_mirror(cli, src, registry.host, tmp_path / "out")  # the registry itself
    assert again.code == 0, again.err
    assert carried(registry, digest) == (1, 1)


def test_a_429_storm_on_the_signatures_fails_the_image_within_the_retries(
        registry: Registry, tmp_path: Path, cli) -> None:
    src = tmp_path / "src"
    signed_layout(src, tmp_path)
    with FlakyProxy(registry.host, failures=-1, status=429, retry_after=1,
                    path="/manifests/sha256-") as front:
        started = time.monotonic()
        done = run_mirror(cli, src, front.host, tmp_path / "out", "--retries", "2")
    assert done.code == 1, done.err
    assert "Traceback" not in done.err and "429" in done.err, done.err
    assert time.monotonic() - started < 60


def test_a_stalled_answer_about_the_signatures_fails_the_image_in_bounded_time(
        registry: Registry, tmp_path: Path, cli) -> None:
    src = tmp_path / "src"
    signed_layout(src, tmp_path)
    with FlakyProxy(registry.host, failures=0, hang_paths=(".sig",)) as front:
        started = time.monotonic()
        done = run_mirror(cli, src, front.host, tmp_path / "out", "--retries", "1")
    assert done.code == 1, done.err
    assert "Traceback" not in done.err
    assert time.monotonic() - started < 60


def test_a_lie_about_a_signature_digest_is_not_taken(registry: Registry, tmp_path: Path,
                                                     cli) -> None:
    """Every answer about the attachment claims another digest: the bytes are what count
    (hashed), so the carry and its read-back still find the signature."""
    src = tmp_path / "src"
    digest = signed_layout(src, tmp_path)
    with FlakyProxy(registry.host, failures=0, lie=(".sig", "sha256:" + "0" * 64)) as front:
        done = run_mirror(cli, src, front.host, tmp_path / "out")
    assert done.code == 0, done.err
    assert carried(registry, digest) == (1, 1)
