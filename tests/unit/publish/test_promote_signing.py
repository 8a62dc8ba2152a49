"""promote's signing hooks (release_signing.PromoteSigning) against an in-memory registry
that records every request: what goes up while an image copies is unsigned and named by
no manifest, and what the signing reads first is read then; after the read-back, only the
attachments, the signed verdicts and the referrer manifests are written, nothing read.
The real registry: tests/integration/test_signing.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from aipcc_build.errors import CheckFailed
from aipcc_build.publish import attestations, release_signing
from aipcc_build.publish import verify as verify_module
from aipcc_build.publish.referrers import EMPTY, confirm_digest, referrers_tag
from aipcc_build.publish.release_signing import PromoteSigning, Released, sign_release
from aipcc_build.publish.signing import load_signer, signature_tag, write_private_key
from aipcc_build.publish.transfer import Copy
from aipcc_build.publish.verify import VerifyRequest, verify
from aipcc_build.tools.oci_registry import RegistryRefused, Reply
from aipcc_build.tools.retry import Retry, TransientAnswer
from aipcc_build.validate.results import Expectation, ImageVerdict
from tests.unit.publish.test_verify import (
    HOST,
    OCI_INDEX,
    OCI_MANIFEST,
    MemoryRegistry,
    Registries,
    digest,
)


class RecordingRegistry(MemoryRegistry):
    """MemoryRegistry, each request recorded as (method, reference or blob digest)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str]] = []

    def get_manifest(self, repository: str, reference: str) -> Optional[tuple[bytes, str]]:
        self.requests.append(("GET", reference))
        return super().get_manifest(repository, reference)

    def put_manifest(self, repository: str, reference: str, body: bytes,
                     media_type: str) -> Reply:
        self.requests.append(("PUT", reference))
        return super().put_manifest(repository, reference, body, media_type)

    def put_blob(self, repository: str, data: bytes) -> str:
        if digest(data) not in self.blobs:  # the real client sends a blob once a run
            self.requests.append(("PUT blob", digest(data)))
        return super().put_blob(repository, data)

    def open_uploads(self, repository: str, count: int) -> None:
        self.requests += [("POST upload", repository)] * count


@pytest.fixture
def signer(tmp_path: Path) -> Any:
    (tmp_path / "pass").write_text("p\n")
    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    return load_signer(str(tmp_path / "k.key"), str(tmp_path / "pass"))


def test_an_image_released_anew_has_only_its_signed_parts_written_after_its_read_back(
        signer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = RecordingRegistry()
    platforms = [json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                             "layers": [], "arch": arch}).encode()
                 for arch in ("amd64", "arm64")]
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": digest(body), "size": len(body),
         "platform": {"os": "linux", "architecture": arch}}
        for body, arch in zip(platforms, ("amd64", "arm64"))]}).encode()
    for body in platforms:
        memory.put_manifest("rel/img", digest(body), body, OCI_MANIFEST)
    tags = ("3.0-42", "latest")
    for tag in tags:
        memory.put_manifest("rel/img", tag, index, OCI_INDEX)
    memory.requests.clear()

    class Registries:
        def __init__(self, *args: Any) -> None: ...

        def of(self, repository: str) -> tuple[Any, str]:
            return memory, repository.partition("/")[2]

    monkeypatch.setattr(release_signing, "Registries", Registries)
    monkeypatch.setattr(verify_module, "Registries", Registries)

    def verdicts(ref: str) -> list[ImageVerdict]:
        return [ImageVerdict(ref, f"linux/{arch}", expected=Expectation("cpu"),
                             digest=digest(body))
                for body, arch in zip(platforms, ("amd64", "arm64"))]

    copies = [Copy("base/img", f"src.io/b/img@{digest(index)}", f"{HOST}/rel/img:{tag}",
                   digest(index)) for tag in tags]
    hooks = PromoteSigning(copies, signer, "42", verdicts, tls_verify=False, authfile=None,
                           retry=Retry())
    hooks.prepare("base/img")
    # While it copies: blobs alone, none of them signed (a signature is in its
    # attachment's manifest), and no manifest written; what the signing reads first
    # (each manifest's attachment, each platform's referrers) is read now, once, and the
    # uploads of the two signed verdicts begun.
    assert {method for method, _ in memory.requests} == {"PUT blob", "GET", "POST upload"}
    assert memory.requests.count(("POST upload", "rel/img")) == 2
    prepared = {blob for method, blob in memory.requests if method == "PUT blob"}
    # Each manifest's payload of each tag, each platform's SBOM, and the one empty config
    # that the attachments and attestations all name: no config of an attachment's own.
    assert len(prepared) == 3 * len(tags) + 2 + 1
    assert digest(EMPTY) in prepared
    assert all(b"payloadType" not in memory.blobs[blob] for blob in prepared)  # no DSSE
    read = [reference for method, reference in memory.requests if method == "GET"]
    assert sorted(read) == sorted([*(referrers_tag(digest(body)) for body in platforms),
                                   *(signature_tag(digest(subject))
                                     for subject in (index, *platforms))])
    memory.requests.clear()

    result = hooks.sign(copies, {digest(index): index})
    # Three manifests signed as two tags each; each platform's SBOM and verdict.
    assert (result.signatures, result.attestations) == (6, 4)
    uploaded = [blob for method, blob in memory.requests if method == "PUT blob"]
    assert sorted(json.loads(memory.blobs[blob])["payloadType"] for blob in uploaded) \
        == [attestations.IN_TOTO_PAYLOAD] * 2  # the two signed verdicts alone
    # After the read-back, writes, and each manifest written read back once after its
    # write (each tag, and each attestation's manifest by its digest): nothing else read
    # again (the manifest promote read back, the attachments and referrers prepare read),
    # each fallback index extended.
    written_tags = [*(signature_tag(digest(subject)) for subject in (index, *platforms)),
                    *(referrers_tag(digest(body)) for body in platforms)]
    by_digest = [reference for method, reference in memory.requests
                 if method == "PUT" and reference.startswith("sha256:")]
    assert len(by_digest) == 4  # each platform's SBOM and verdict
    assert sorted(reference for method, reference in memory.requests if method == "GET") \
        == sorted(written_tags + by_digest)
    for written in written_tags + by_digest:
        assert memory.requests.index(("PUT", written)) \
            < memory.requests.index(("GET", written))
    for subject in (index, *platforms):
        attachment = memory.get_manifest("rel/img", signature_tag(digest(subject)))
        assert attachment is not None
        assert json.loads(attachment[0])["config"]["digest"] == digest(EMPTY)
    verified = verify(VerifyRequest((f"{HOST}/rel/img:{tags[1]}",), str(tmp_path / "k.pub")))
    assert verified.images[0].problems == ()


def test_what_prepare_read_is_taken_once_so_a_retried_signing_reads_again() -> None:
    memory = RecordingRegistry()
    drafts = release_signing.Drafts()
    reads: list[str] = []

    def read(registry: Any, path: str, digest: str) -> tuple[str, str]:
        reads.append(digest)
        return path, digest

    drafts.keep("signatures", memory, "rel/img", "sha256:a", read)
    assert drafts.take("signatures", memory, "rel/img", "sha256:a", read) \
        == ("rel/img", "sha256:a")
    assert reads == ["sha256:a"]  # read while it copied, not again
    # Taken: a retry of the signing (after a 429 half-way) reads what is there now.
    drafts.take("signatures", memory, "rel/img", "sha256:a", read)
    assert reads == ["sha256:a", "sha256:a"]
    # Kept by what it is of: another digest, or the referrers of the same, are read.
    drafts.keep("signatures", memory, "rel/img", "sha256:b", read)
    drafts.take("referrers", memory, "rel/img", "sha256:b", read)
    assert reads[-1] == "sha256:b" and len(reads) == 4


def test_the_signed_verdicts_uploads_are_begun_after_the_blobs_that_would_take_them(
        ) -> None:
    calls: list[tuple[str, int]] = []

    class Client:
        def put_blobs(self, path: str, blobs: list[bytes]) -> None:
            calls.append(("put_blobs", len(blobs)))

        def open_uploads(self, path: str, count: int) -> None:
            calls.append(("open_uploads", count))

    release_signing._upload_ahead(Client(), "rel/img", [b"a", b"b"], 2)  # type: ignore[arg-type]
    assert calls == [("put_blobs", 2), ("open_uploads", 2)]


# One platform's manifest, released as {HOST}/rel/img:1 (one_image_signing).
SINGLE = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": []}).encode()


def one_image_signing(memory: MemoryRegistry, signer: Any, monkeypatch: pytest.MonkeyPatch
                      ) -> Callable[[], release_signing.SigningResult]:
    """SINGLE tagged 1 in MEMORY (verify reads it there too), and the signing of it as
    promote runs it once the tag is read back (sign_release), to call."""
    memory.put_manifest("rel/img", "1", SINGLE, OCI_MANIFEST)
    registries = Registries(memory)
    monkeypatch.setattr(verify_module, "Registries", lambda *args: registries)

    def ok(ref: str) -> list[ImageVerdict]:
        return [ImageVerdict(ref, "linux/amd64", expected=Expectation("cpu"))]

    def promote() -> release_signing.SigningResult:
        return sign_release([Released("base/img", f"{HOST}/rel/img@{digest(SINGLE)}",
                                      digest(SINGLE), (f"{HOST}/rel/img:1",))],
                            signer, "42", ok, registries)  # type: ignore[arg-type]

    return promote


class LosingRegistry(MemoryRegistry):
    """MemoryRegistry that answers 201 to a write of TAG but keeps nothing there (KEEP
    None) or another manifest (KEEP, bytes): a registry that lies, or another writer that
    replaced the tag after our write."""

    def __init__(self, tag: str, keep: Optional[bytes]) -> None:
        super().__init__()
        self.tag, self.keep, self.losing = tag, keep, True

    def put_manifest(self, repository: str, reference: str, body: bytes,
                     media_type: str) -> Reply:
        if not (self.losing and reference == self.tag):
            return super().put_manifest(repository, reference, body, media_type)
        if self.keep is not None:
            self.manifests[reference] = (self.keep, media_type)
        return Reply(201, {}, b"")


@pytest.mark.parametrize(("tag_of", "keep"), [
    (signature_tag, None), (signature_tag, b'{"schemaVersion": 2, "layers": []}'),
    (referrers_tag, None), (referrers_tag, b'{"schemaVersion": 2, "manifests": []}')],
    ids=["signature-lost", "signature-replaced", "referrers-lost", "referrers-replaced"])
def test_a_tag_written_but_not_read_back_leaves_the_release_incomplete_until_a_rerun(
        signer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        tag_of: Any, keep: Optional[bytes]) -> None:
    tag = tag_of(digest(SINGLE))
    memory = LosingRegistry(tag, keep)
    promote = one_image_signing(memory, signer, monkeypatch)
    with pytest.raises(CheckFailed) as failed:
        promote()
    # promote's exit 1 (CheckFailed) names the image and the tag, and says incomplete.
    message = str(failed.value)
    assert message.startswith("base/img: ")
    assert f"{HOST}/rel/img:{tag}" in message
    assert ("serves no manifest" if keep is None else "serves another manifest") in message
    assert "not completely signed and attested" in message
    memory.losing = False  # the registry keeps its tags again: a rerun completes it
    promote()
    assert verify(VerifyRequest((f"{HOST}/rel/img:1",), str(tmp_path / "k.pub"))
                  ).images[0].problems == ()


class DroppingRegistry(MemoryRegistry):
    """MemoryRegistry that answers a write by digest of an artifact of ARTIFACT_TYPE as
    distribution does (201, its Docker-Content-Digest the digest of the bytes sent) but
    keeps nothing: a registry that loses what it acknowledged."""

    def __init__(self, artifact_type: str) -> None:
        super().__init__()
        self.artifact_type, self.dropping = artifact_type, True

    def put_manifest(self, repository: str, reference: str, body: bytes,
                     media_type: str) -> Reply:
        if self.dropping and reference.startswith("sha256:") \
                and json.loads(body).get("artifactType") == self.artifact_type:
            return Reply(201, {"docker-content-digest": digest(body)}, b"")
        return super().put_manifest(repository, reference, body, media_type)


@pytest.mark.parametrize("artifact_type", [attestations.SBOM_MEDIA_TYPE,
                                           attestations.VERDICT_ARTIFACT_TYPE],
                         ids=["sbom", "verdict"])
def test_an_attestation_acknowledged_but_not_kept_leaves_the_release_incomplete(
        signer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        artifact_type: str) -> None:
    """An attestation's manifest, written by its digest, counts once it is read back: the
    registry's 201 and its Docker-Content-Digest say what it hashed, not that it keeps
    it. Exit 1 (CheckFailed) naming the image and the digest; a rerun completes it."""
    memory = DroppingRegistry(artifact_type)
    promote = one_image_signing(memory, signer, monkeypatch)
    with pytest.raises(CheckFailed) as failed:
        promote()
    message = str(failed.value)
    assert message.startswith("base/img: ") and f"{HOST}/rel/img@sha256:" in message
    assert "stored the write as nothing" in message
    assert "not completely signed and attested" in message
    memory.dropping = False  # the registry keeps what it is sent again: a rerun completes
    promote()
    assert verify(VerifyRequest((f"{HOST}/rel/img:1",), str(tmp_path / "k.pub"))
                  ).images[0].problems == ()


def test_a_write_by_digest_stored_as_another_digest_is_refused() -> None:
    body = b'{"schemaVersion": 2}'
    with pytest.raises(RegistryRefused, match="stored the write as sha256:0"):
        confirm_digest(MemoryRegistry(), "rel/img",
                       Reply(201, {"docker-content-digest": "sha256:" + "0" * 64}, b""),
                       digest(body))
    confirm_digest(MemoryRegistry(), "rel/img",
                   Reply(201, {"docker-content-digest": digest(body)}, b""), digest(body))


def test_a_write_by_digest_answered_without_its_digest_is_read_back() -> None:
    """A registry that names no Docker-Content-Digest is asked what it stores there."""
    body = b'{"schemaVersion": 2}'
    registry = MemoryRegistry()
    with pytest.raises(RegistryRefused, match="stored the write as nothing"):
        confirm_digest(registry, "rel/img", Reply(201, {}, b""), digest(body))
    registry.manifests[digest(body)] = (body, "application/vnd.oci.image.manifest.v1+json")
    confirm_digest(registry, "rel/img", Reply(201, {}, b""), digest(body))


class FailingRegistry(MemoryRegistry):
    """A registry answering 503 to every write of one tag, whatever the retries."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag

    def put_manifest(self, repository: str, reference: str, body: bytes,
                     media_type: str) -> Reply:
        if reference == self.tag:
            raise TransientAnswer(f"http://{HOST}/v2/{repository}/manifests/{reference}",
                                  503, "Service Unavailable", None)
        return super().put_manifest(repository, reference, body, media_type)


def test_a_signature_write_failing_past_its_retries_leaves_the_release_incomplete(
        signer: Any) -> None:
    """A registry that answers 5xx to the signature's write on every attempt: exit 1 (the
    retries' StillFailing) names the image and says the release is not complete, as a
    refusal does."""
    image = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                        "layers": []}).encode()
    memory = FailingRegistry(signature_tag(digest(image)))
    memory.put_manifest("rel/img", "1", image, OCI_MANIFEST)

    def ok(ref: str) -> list[ImageVerdict]:
        return [ImageVerdict(ref, "linux/amd64", expected=Expectation("cpu"))]

    with pytest.raises(CheckFailed) as failed:
        sign_release([Released("base/img", f"{HOST}/rel/img@{digest(image)}",
                               digest(image), (f"{HOST}/rel/img:1",))],
                     signer, "42", ok, Registries(memory),  # type: ignore[arg-type]
                     retry=Retry(attempts=2, first=0.0))
    message = str(failed.value)
    assert message.startswith("base/img: ")
    assert "status 503" in message
    assert "not completely signed and attested" in message
