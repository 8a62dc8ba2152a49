"""verify against an in-memory registry that lies: malformed indexes, signature
attachments and attestations give a problem naming the image (exit 1), never a traceback.
The real registry and each negative case of a release: tests/integration/test_signing.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional

import pytest

from aipcc_build.publish import attestations
from aipcc_build.publish import verify as verify_module
from aipcc_build.publish.referrers import referrers_tag
from aipcc_build.publish.release_signing import Released, sign_release
from aipcc_build.publish.signing import load_signer, signature_tag, write_private_key
from aipcc_build.publish.verify import VerifyRequest, verify
from aipcc_build.tools.oci_registry import MAX_BLOB, RegistryRefused, Reply
from aipcc_build.validate.results import Expectation, ImageVerdict

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
HOST = "registry.test"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class MemoryRegistry:
    """The distribution API's answers, from dicts: no referrers API (distribution 2.8)."""

    host = HOST

    def __init__(self) -> None:
        self.manifests: dict[str, tuple[bytes, str]] = {}
        self.blobs: dict[str, bytes] = {}

    def get_manifest(self, repository: str, reference: str) -> Optional[tuple[bytes, str]]:
        return self.manifests.get(reference)

    def put_manifest(self, repository: str, reference: str, body: bytes,
                     media_type: str) -> Reply:
        self.manifests[reference] = self.manifests[digest(body)] = (body, media_type)
        return Reply(201, {"docker-content-digest": digest(body)}, b"")

    def get_blob(self, repository: str, blob: str, max_size: int = MAX_BLOB) -> bytes:
        if blob not in self.blobs:
            raise RegistryRefused(f"{blob}: no such blob")
        if len(self.blobs[blob]) > max_size:  # as the registry client reads no further
            raise RegistryRefused(f"{blob}: answer larger than {max_size} bytes")
        return self.blobs[blob]

    def put_blob(self, repository: str, data: bytes) -> str:
        self.blobs[digest(data)] = data
        return digest(data)

    def put_blobs(self, repository: str, blobs: list[bytes]) -> None:
        for data in blobs:
            self.put_blob(repository, data)

    def referrers(self, repository: str, subject: str) -> None:
        return None


class Registries:
    def __init__(self, memory: MemoryRegistry) -> None:
        self.memory = memory

    def of(self, repository: str) -> tuple[Any, str]:
        return self.memory, repository.partition("/")[2]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A signed and attested image at registry.test/rel/img:1 in memory."""
    (tmp_path / "pass").write_text("p\n")
    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    signer = load_signer(str(tmp_path / "k.key"), str(tmp_path / "pass"))
    memory = MemoryRegistry()
    image = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": []}).encode()
    memory.put_manifest("rel/img", "1", image, OCI_MANIFEST)
    registries = Registries(memory)
    monkeypatch.setattr(verify_module, "Registries", lambda *args: registries)

    def ok(ref: str) -> list[ImageVerdict]:
        return [ImageVerdict(ref, "linux/amd64", expected=Expectation("cpu"))]

    sign_release([Released("base/img", f"{HOST}/rel/img@{digest(image)}", digest(image),
                           (f"{HOST}/rel/img:1",))], signer, "42", ok,
                 registries)  # type: ignore[arg-type]
    return {"memory": memory, "digest": digest(image), "key": str(tmp_path / "k.pub")}


def problems(world: dict[str, Any]) -> tuple[str, ...]:
    result = verify(VerifyRequest((f"{HOST}/rel/img:1",), world["key"]))
    return result.images[0].problems


def test_the_memory_release_verifies(world: dict[str, Any]) -> None:
    assert problems(world) == ()


def test_a_lying_index_is_a_problem_not_a_traceback(world: dict[str, Any]) -> None:
    memory = world["memory"]
    for body in (b"[1, 2]", b'{"manifests": 3}', b'{"manifests": []}', b"not json"):
        memory.manifests["1"] = (body, OCI_INDEX)
        memory.manifests[digest(body)] = (body, OCI_INDEX)
        found = problems(world)
        assert found and "index" in found[0], (body, found)


@pytest.mark.parametrize("attachment", [
    b"not json", b"[]", b'{"layers": 7}', b'{"layers": [{"digest": 7}]}',
    json.dumps({"layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                            "digest": "sha256:../../x",
                            "annotations": {"dev.cosignproject.cosign/signature": "AA=="}}]}
               ).encode(),
    json.dumps({"layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                            "digest": "sha256:" + "0" * 64,
                            "annotations": ["x"]}]}).encode(),
])
def test_a_garbled_signature_attachment_is_unsigned(world: dict[str, Any],
                                                   attachment: bytes) -> None:
    world["memory"].manifests[signature_tag(world["digest"])] = (attachment, OCI_MANIFEST)
    found = problems(world)
    assert any("not signed" in p for p in found), found


@pytest.mark.parametrize("at", ["@DIGEST", ":1"])
def test_a_copy_at_a_mirror_says_where_it_was_checked_and_the_name_signed(
        world: dict[str, Any], capsys: pytest.CaptureFixture[str], at: str) -> None:
    """`mirror` copied the release to another registry, signatures and all: verify of the
    mirror's own name finds the signature by the key and the attestations, and its one
    problem says the image at the mirror was signed as the released name. It said "the image
    was signed as RELEASED, not as MIRROR/repo", as if the reference were the released one
    signed for another name, and "not as MIRROR/repo" for a reference by digest, which any
    tag of that repository would pass."""
    from aipcc_build.report.verification import verified

    mirrored = "mirror.test/site/rel/img"
    ref = mirrored + at.replace("DIGEST", world["digest"])
    result = verify(VerifyRequest((ref,), world["key"]))
    wanted = f"{mirrored}:1" if at == ":1" else f"a tag of {mirrored}"
    assert result.images[0].problems == (
        f"the image at {mirrored} was signed as {HOST}/rel/img:1, not as {wanted}: a copy "
        "keeps the name it was signed as, which a pull through the mirror's registries.conf "
        "checks",)
    verified(result, as_json=False)
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith(f"FAILED {ref} ({world['digest']}): the image at {mirrored} was "
                           f"signed as {HOST}/rel/img:1")


@pytest.mark.parametrize("statement_change", [
    {"predicate": ["ok"]}, {"subject": "x"}, {"subject": [{"digest": "sha256:1"}]},
])
def test_a_garbled_verdict_is_named(world: dict[str, Any], tmp_path: Path,
                                    statement_change: dict[str, Any]) -> None:
    memory = world["memory"]
    index = json.loads(memory.manifests[referrers_tag(world["digest"])][0])
    verdict = next(m for m in index["manifests"]
                   if m["artifactType"] == attestations.VERDICT_ARTIFACT_TYPE)
    manifest = json.loads(memory.manifests[verdict["digest"]][0])
    envelope = json.loads(memory.blobs[manifest["layers"][0]["digest"]])
    import base64

    document = json.loads(base64.b64decode(envelope["payload"]))
    document.update(statement_change)
    signer = load_signer(str(tmp_path / "k.key"), str(tmp_path / "pass"))
    sealed = attestations.envelope(document, signer)
    memory.blobs[manifest["layers"][0]["digest"]] = sealed  # the blob lies about its digest
    found = problems(world)
    assert found and all("verdict" in p or "attestation" in p for p in found), found


class ApiUnknown(MemoryRegistry):
    """A registry not asked yet whether it has the referrers API; API: its answer (None:
    none, as distribution 2.8). ASKED records what was asked, in order of answer."""

    def __init__(self, api: Optional[list[dict[str, Any]]]) -> None:
        super().__init__()
        self.api = api
        self.referrers_api: Optional[bool] = None
        self.asked: list[str] = []

    def referrers(self, repository: str, subject: str) -> Optional[list[dict[str, Any]]]:
        self.asked.append("api")
        return self.api

    def get_manifest(self, repository: str, reference: str) -> Optional[tuple[bytes, str]]:
        self.asked.append(reference)
        return super().get_manifest(repository, reference)


@pytest.mark.parametrize("api", [None, [{"digest": "sha256:" + "a" * 64}]])
def test_a_registry_not_known_to_have_the_referrers_api_is_asked_both_at_once(
        api: Optional[list[dict[str, Any]]]) -> None:
    """verify's listing asks the referrers API and the fallback tag side by side while it
    does not know which the registry has (a request in a row fewer on distribution 2.8);
    the API's answer wins where there is one."""
    from aipcc_build.publish.referrers import listing

    subject = "sha256:" + "1" * 64
    memory = ApiUnknown(api)
    index = json.dumps({"manifests": [{"digest": "sha256:" + "f" * 64}]}).encode()
    memory.manifests[referrers_tag(subject)] = (index, OCI_INDEX)
    found, fallback = listing(memory, "rel/img", subject)
    assert sorted(memory.asked) == sorted(["api", referrers_tag(subject)])
    if api is None:
        assert found == fallback == [{"digest": "sha256:" + "f" * 64}]
    else:
        assert (found, fallback) == (api, None)
    memory.referrers_api, memory.asked = api is not None, []
    listing(memory, "rel/img", subject)  # known: asked in turn, the tag only without API
    assert memory.asked == (["api"] if api else ["api", referrers_tag(subject)])


def signed_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   tags: tuple[str, ...]) -> tuple[MemoryRegistry, bytes]:
    """(the memory registry verify reads, the image's manifest): an image of rel/img
    released under TAGS, signed with the key tmp_path/k.key (public: k.pub)."""
    (tmp_path / "pass").write_text("p\n")
    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    memory = MemoryRegistry()
    image = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": []}).encode()
    memory.put_manifest("rel/img", "1", image, OCI_MANIFEST)
    registries = Registries(memory)
    monkeypatch.setattr(verify_module, "Registries", lambda *args: registries)
    sign_release([Released("base/img", f"{HOST}/rel/img@{digest(image)}", digest(image), tags)],
                 load_signer(str(tmp_path / "k.key"), str(tmp_path / "pass")), "42",
                 lambda ref: [ImageVerdict(ref, "linux/amd64", expected=Expectation("cpu"))],
                 registries)  # type: ignore[arg-type]
    return memory, image


def test_only_the_signature_of_the_identity_asked_for_is_verified(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An image released under three tags carries three signatures: a check of one tag
    verifies that tag's alone (each verification is most of the check's own work); one of
    another tag signed by no signature still names every identity signed."""
    from aipcc_build.publish.signing import PublicKey

    tags = (f"{HOST}/rel/img:1", f"{HOST}/rel/img:1.0", f"{HOST}/rel/img:latest")
    memory, _ = signed_release(tmp_path, monkeypatch, tags)
    verified: list[bytes] = []
    real = PublicKey.verifies

    def counted(self: PublicKey, data: bytes, signature: bytes) -> bool:
        verified.append(data)
        return real(self, data, signature)

    monkeypatch.setattr(PublicKey, "verifies", counted)
    key = str(tmp_path / "k.pub")
    memory.manifests["latest"] = memory.manifests["1"]
    assert verify(VerifyRequest((f"{HOST}/rel/img:latest",), key)).ok
    # The tag's signature, and the verdict's DSSE envelope (checked side by side: in
    # either order).
    assert len(verified) == 2
    assert sorted(data.startswith(b"DSSEv1 ") for data in verified) == [False, True]
    assert any(b"img:latest" in data for data in verified if not data.startswith(b"DSSE"))
    memory.manifests["2"] = memory.manifests["1"]
    found = verify(VerifyRequest((f"{HOST}/rel/img:2",), key)).images[0].problems
    assert found == (f"the image was signed as {', '.join(sorted(tags))}, not as "
                     f"{HOST}/rel/img:2",)


def test_a_signature_payload_past_its_bound_is_not_read(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The payloads of up to 64 signatures are held at once: each is read up to 64 KiB
    (ours are a few hundred bytes), not up to the 16 MiB any blob may have. A registry
    serving a larger one fails the image's check, naming the bound."""
    from aipcc_build.publish.signing import MAX_SIGNATURE_PAYLOAD, SIGNATURE_ANNOTATION

    memory, image = signed_release(tmp_path, monkeypatch, (f"{HOST}/rel/img:1",))
    attachment, media_type = memory.manifests[signature_tag(digest(image))]
    document = json.loads(attachment)
    layer = document["layers"][0]
    large = b"{" + b" " * MAX_SIGNATURE_PAYLOAD + b"}"
    memory.blobs[digest(large)] = large
    document["layers"][0] = {**layer, "digest": digest(large), "size": len(large)}
    memory.put_manifest("rel/img", signature_tag(digest(image)),
                        json.dumps(document).encode(), media_type)
    found = verify(VerifyRequest((f"{HOST}/rel/img:1",), str(tmp_path / "k.pub")))
    problems = " ".join(found.images[0].problems)
    assert f"larger than {MAX_SIGNATURE_PAYLOAD} bytes" in problems
    assert SIGNATURE_ANNOTATION in layer["annotations"]
