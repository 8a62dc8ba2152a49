"""verify against a registry that lies in ways found to break it: JSON nested past
Python's recursion limit (RecursionError, a traceback), an index whose sizes are no
integers, a referrers index or signature attachment listing ten thousand entries (a
request or two each), and DSSE envelopes other signers write (URL-safe or wrapped base64,
a second signature beside the valid one). Each is a problem naming the image, found with
a bounded number of reads, or a pass where the envelope is valid."""

from __future__ import annotations

import base64
import json
from typing import Any, Optional

import pytest

from aipcc_build.publish import attestations
from aipcc_build.publish.referrers import referrers_tag
from aipcc_build.publish.signing import signature_tag
from tests.unit.publish.test_verify import OCI_INDEX, OCI_MANIFEST, digest, problems, world

__all__ = ["world"]  # the fixture, used by name

DEEP = b"[" * 200000 + b"]" * 200000


def verdict_blob(world: dict[str, Any]) -> str:
    """The digest of the blob that holds the image's verdict envelope."""
    memory = world["memory"]
    index = json.loads(memory.manifests[referrers_tag(world["digest"])][0])
    verdict = next(m for m in index["manifests"]
                   if m["artifactType"] == attestations.VERDICT_ARTIFACT_TYPE)
    manifest = json.loads(memory.manifests[verdict["digest"]][0])
    return str(manifest["layers"][0]["digest"])


def sbom_blob(world: dict[str, Any]) -> str:
    memory = world["memory"]
    index = json.loads(memory.manifests[referrers_tag(world["digest"])][0])
    sbom = next(m for m in index["manifests"]
                if m["artifactType"] == attestations.SBOM_MEDIA_TYPE)
    return str(json.loads(memory.manifests[sbom["digest"]][0])["layers"][0]["digest"])


@pytest.mark.parametrize("where", ["tag", "index", "referrers", "signatures", "verdict",
                                   "sbom"])
def test_json_nested_past_the_recursion_limit_is_a_problem(world: dict[str, Any],
                                                           where: str) -> None:
    memory = world["memory"]
    if where in ("tag", "index"):
        memory.manifests["1"] = (DEEP, OCI_INDEX if where == "index" else OCI_MANIFEST)
    elif where == "referrers":
        memory.manifests[referrers_tag(world["digest"])] = (DEEP, OCI_INDEX)
    elif where == "signatures":
        memory.manifests[signature_tag(world["digest"])] = (DEEP, OCI_MANIFEST)
    else:
        memory.blobs[verdict_blob(world) if where == "verdict" else sbom_blob(world)] = DEEP
    assert problems(world)


@pytest.mark.parametrize("size", ["1e999", "-1e999", True, "7"])
def test_an_index_whose_sizes_are_no_integers_is_a_problem(world: dict[str, Any],
                                                           size: Any) -> None:
    memory = world["memory"]
    written = size if size in ("1e999", "-1e999") else json.dumps(size)
    body = (f'{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[{{"mediaType":'
            f'"{OCI_MANIFEST}","digest":"{world["digest"]}","size":{written}}}]}}').encode()
    memory.manifests["1"] = (body, OCI_INDEX)
    found = problems(world)
    assert found and "index" in found[0], found


class Counting:
    """The memory registry, its manifest reads counted."""

    def __init__(self, memory: Any) -> None:
        self.memory, self.reads = memory, 0
        self.host = memory.host

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)

    def get_manifest(self, repository: str, reference: str) -> Optional[tuple[bytes, str]]:
        self.reads += 1
        return self.memory.get_manifest(repository, reference)

    def get_blob(self, repository: str, blob: str, max_size: int = 1 << 30) -> bytes:
        self.reads += 1
        return bytes(self.memory.get_blob(repository, blob))


def counted(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Counting:
    from aipcc_build.publish import verify as verify_module

    counting = Counting(world["memory"])
    registries = verify_module.Registries.__call__()  # type: ignore[call-arg]
    monkeypatch.setattr(registries, "memory", counting)
    return counting


def test_ten_thousand_listed_verdicts_are_not_each_read(world: dict[str, Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    memory = world["memory"]
    tag = referrers_tag(world["digest"])
    index = json.loads(memory.manifests[tag][0])
    bogus = [{"mediaType": OCI_MANIFEST, "digest": f"sha256:{n:064x}", "size": 10,
              "artifactType": attestations.VERDICT_ARTIFACT_TYPE} for n in range(10000)]
    index["manifests"] = [m for m in index["manifests"]
                          if m["artifactType"] != attestations.VERDICT_ARTIFACT_TYPE] + bogus
    memory.manifests[tag] = (json.dumps(index).encode(), OCI_INDEX)
    counting = counted(world, monkeypatch)
    found = problems(world)
    assert found and "attestation" in found[-1], found
    assert counting.reads < 200
    assert sum(len(p) for p in found) < 4000


def test_ten_thousand_listed_signatures_are_not_each_read(world: dict[str, Any],
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    memory = world["memory"]
    tag = signature_tag(world["digest"])
    attachment = json.loads(memory.manifests[tag][0])
    layer = attachment["layers"][0]
    attachment["layers"] = [dict(layer, digest=f"sha256:{n:064x}") for n in range(10000)]
    memory.manifests[tag] = (json.dumps(attachment).encode(), OCI_MANIFEST)
    counting = counted(world, monkeypatch)
    found = problems(world)
    assert found, found
    assert counting.reads < 200


def test_a_signature_tag_holding_another_images_signatures_is_not_a_signature(
        world: dict[str, Any]) -> None:
    """The attachment of another digest, served under this digest's tag: its payload
    names the other digest."""
    memory = world["memory"]
    other = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [],
                        "annotations": {"x": "other"}}).encode()
    from aipcc_build.publish.release_signing import Released, sign_release
    from aipcc_build.publish.signing import load_signer
    from aipcc_build.validate.results import Expectation, ImageVerdict

    memory.put_manifest("rel/other", "2", other, OCI_MANIFEST)  # memory: one tag space
    key = world["key"]
    signer = load_signer(key[:-len(".pub")] + ".key", key.rsplit("/", 1)[0] + "/pass")

    class One:
        def of(self, repository: str) -> tuple[Any, str]:
            return memory, repository.partition("/")[2]

    sign_release([Released("base/other", f"registry.test/rel/other@{digest(other)}",
                           digest(other), ("registry.test/rel/other:2",))], signer, "43",
                 lambda ref: [ImageVerdict(ref, "linux/amd64", expected=Expectation("cpu"))],
                 One())  # type: ignore[arg-type]
    memory.manifests[signature_tag(world["digest"])] = \
        memory.manifests[signature_tag(digest(other))]
    found = problems(world)
    assert found == (f"the image's signatures are of another manifest ({digest(other)}), "
                     f"not of {world['digest']}",), found


def rewrite_envelope(world: dict[str, Any], change: Any) -> None:
    memory = world["memory"]
    blob = verdict_blob(world)
    memory.blobs[blob] = change(json.loads(memory.blobs[blob]))


def urlsafe(text: str) -> str:
    return base64.urlsafe_b64encode(base64.b64decode(text)).decode()


@pytest.mark.parametrize("change", [
    lambda e: dict(e, payload=urlsafe(e["payload"]).rstrip("="),
                   signatures=[{"sig": urlsafe(s["sig"]).rstrip("=")}
                               for s in e["signatures"]]),
    lambda e: dict(e, payload="\n".join(e["payload"][i:i + 76]
                                        for i in range(0, len(e["payload"]), 76))),
    lambda e: dict(e, signatures=[{"sig": "AAAA"}, {"sig": "!!not base64"},
                                  {"keyid": 3}, *e["signatures"]]),
], ids=["url-safe-unpadded", "wrapped", "beside-other-signatures"])
def test_a_valid_envelope_written_otherwise_verifies(world: dict[str, Any],
                                                     change: Any) -> None:
    rewrite_envelope(world, lambda e: json.dumps(change(e)).encode())
    assert problems(world) == ()


def test_an_envelope_whose_only_signature_is_garbage_is_not_signed(
        world: dict[str, Any]) -> None:
    rewrite_envelope(world, lambda e: json.dumps(
        dict(e, signatures=[{"sig": "!!not base64"}, {"sig": "AAAA"}])).encode())
    found = problems(world)
    assert any("not by the key" in p for p in found), found


def test_a_reference_with_a_line_break_is_refused_on_one_line(tmp_path: Any) -> None:
    from aipcc_build.errors import InputError
    from aipcc_build.publish.signing import write_private_key
    from aipcc_build.publish.verify import VerifyRequest, verify

    write_private_key(str(tmp_path / "k.key"), b"p", n=2)
    with pytest.raises(InputError) as refused:
        verify(VerifyRequest(("registry.test/rel/img:1\nFAILED other",),
                             str(tmp_path / "k.pub")))
    assert "\n" not in str(refused.value) and "\\n" in str(refused.value)


def test_a_registry_busy_past_every_retry_is_each_images_problem(tmp_path: Any) -> None:
    """429 and 503 go through the one retry table and backoff, the registry's Retry-After
    obeyed; past the last attempt verify raised StillFailing, which ended the command with
    no report (no JSON) and left the other images unchecked."""
    import time

    from aipcc_build.publish.signing import write_private_key
    from aipcc_build.publish.verify import VerifyRequest, verify
    from aipcc_build.tools.retry import Retry
    from tests.support.same_answer import SameAnswer

    write_private_key(str(tmp_path / "k.key"), b"p", n=2)
    status = b"429 Too Many Requests"
    server = SameAnswer(b"HTTP/1.1 " + status + b"\r\nRetry-After: 1\r\n"
                        b"Content-Length: 0\r\n\r\n")
    try:
        start = time.monotonic()
        result = verify(VerifyRequest((f"{server.host}/rel/a:1", f"{server.host}/rel/b:1"),
                                      str(tmp_path / "k.pub"), tls_verify=False,
                                      retry=Retry(attempts=2, first=0.01, cap=0.01)))
        took = time.monotonic() - start
    finally:
        server.stop()
    assert [image.ok for image in result.images] == [False, False]
    for image in result.images:
        assert image.problems == (f"the registry kept failing: http://{server.host}/v2/rel/"
                                  f"{image.ref.split('/rel/')[1].replace(':', '/manifests/')}"
                                  f": status {status[:3].decode()} (retry after 1 s)",)
    assert took >= 1.0  # the registry's Retry-After, not the 0.01 s backoff


def test_a_registry_that_resets_every_connection_is_each_images_problem(
        tmp_path: Any) -> None:
    """A reset connection goes through the same table, backoff and bound as a 429: it
    failed the command at once (RegistryRefused) where skopeo would have retried."""
    from aipcc_build.publish.signing import write_private_key
    from aipcc_build.publish.verify import VerifyRequest, verify
    from aipcc_build.tools.retry import Retry
    from tests.unit.tools.test_oci_registry_network import Failing

    write_private_key(str(tmp_path / "k.key"), b"p", n=2)
    server = Failing("reset", failures=-1)
    try:
        result = verify(VerifyRequest((f"{server.host}/rel/a:1",), str(tmp_path / "k.pub"),
                                      tls_verify=False,
                                      retry=Retry(attempts=2, first=0.01, cap=0.01)))
    finally:
        server.stop()
    [image] = result.images
    assert not image.ok
    [problem] = image.problems
    assert problem.startswith("the registry kept failing: http")
    assert f"://{server.host}/v2/rel/a/manifests/1: " in problem
    assert "Connection reset by peer" in problem
    assert len(server.requests) >= 2  # the plain-HTTP probe aside, each attempt asked


def resigned(world: dict[str, Any], tmp_path: Any, change: Any) -> None:
    """The verdict envelope's statement changed by CHANGE, signed again by the key."""
    from aipcc_build.publish.signing import load_signer

    memory = world["memory"]
    blob = verdict_blob(world)
    document = json.loads(base64.b64decode(json.loads(memory.blobs[blob])["payload"]))
    change(document)
    signer = load_signer(str(tmp_path / "k.key"), str(tmp_path / "pass"))
    memory.blobs[blob] = attestations.envelope(document, signer)


@pytest.mark.parametrize("lie", ["verdict", "subjects", "payload-type", "artifact-subject",
                                 "sbom-toolkit"])
def test_what_a_lying_registry_says_is_shown_bounded(world: dict[str, Any], tmp_path: Any,
                                                     lie: str) -> None:
    """A verdict of a megabyte, ten thousand subjects, a payload type or an artifact's
    subject of a megabyte went into the report whole."""
    huge = "x" * 1000000
    memory = world["memory"]
    if lie == "verdict":
        resigned(world, tmp_path, lambda d: d["predicate"].update(verdict=huge))
    elif lie == "subjects":
        resigned(world, tmp_path, lambda d: d.update(subject=[
            {"digest": {"sha256": f"{n:064x}"}} for n in range(10000)]))
    elif lie == "sbom-toolkit":
        memory.blobs[sbom_blob(world)] = json.dumps({
            "bomFormat": "CycloneDX", "specVersion": "1.6", "components": [
                {"name": huge, "properties": [{"name": attestations.TOOLKIT_PROPERTY,
                                                "value": huge}]}]}).encode()
    elif lie == "payload-type":
        rewrite_envelope(world, lambda e: json.dumps(dict(e, payloadType=huge)).encode())
    else:
        index = json.loads(memory.manifests[referrers_tag(world["digest"])][0])
        for entry in index["manifests"]:
            manifest = json.loads(memory.manifests[entry["digest"]][0])
            manifest["subject"]["digest"] = huge
            memory.manifests[entry["digest"]] = (json.dumps(manifest).encode(), OCI_MANIFEST)
    found = problems(world)
    assert found, found
    assert sum(len(p) for p in found) < 2000, [p[:200] for p in found]


def test_a_listed_attestation_that_is_an_index_is_named_no_artifact(
        world: dict[str, Any]) -> None:
    """A referrers entry that is an image index (nesting: its manifests listing more)."""
    memory = world["memory"]
    tag = referrers_tag(world["digest"])
    index = json.loads(memory.manifests[tag][0])
    nested = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                         "manifests": index["manifests"]}).encode()
    memory.manifests[digest(nested)] = (nested, OCI_INDEX)
    for entry in index["manifests"]:
        entry["digest"] = digest(nested)
    memory.manifests[tag] = (json.dumps(index).encode(), OCI_INDEX)
    found = problems(world)
    assert found and all("no artifact manifest" in p for p in found), found


@pytest.mark.parametrize("wrap", ["\n", "\r\n"])
def test_a_signature_annotation_wrapped_in_lines_verifies(world: dict[str, Any],
                                                          wrap: str) -> None:
    """containers/image decodes the annotation with Go's StdEncoding, which ignores line
    breaks: skopeo let such a signature through, verify called the image unsigned."""
    from aipcc_build.publish.signing import SIGNATURE_ANNOTATION

    memory = world["memory"]
    tag = signature_tag(world["digest"])
    attachment = json.loads(memory.manifests[tag][0])
    for layer in attachment["layers"]:
        text = layer["annotations"][SIGNATURE_ANNOTATION]
        layer["annotations"][SIGNATURE_ANNOTATION] = wrap.join(
            text[i:i + 20] for i in range(0, len(text), 20))
    memory.manifests[tag] = (json.dumps(attachment).encode(), OCI_MANIFEST)
    assert problems(world) == ()


def test_an_index_of_ten_thousand_platforms_is_refused_unread(
        world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    memory = world["memory"]
    entry = {"mediaType": OCI_MANIFEST, "digest": world["digest"], "size": 10}
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                       "manifests": [entry] * 10000}).encode()
    memory.manifests["1"] = (body, OCI_INDEX)
    counting = counted(world, monkeypatch)
    found = problems(world)
    assert found and "10000 platforms, more than 64" in found[0], found
    assert counting.reads < 10


def test_a_verdict_envelope_past_its_bound_is_a_problem_unread(world: dict[str, Any]) -> None:
    """A registry serving a verdict blob larger than any verdict envelope (ours are a few
    kilobytes) is refused at MAX_VERDICT_ENVELOPE bytes, not at the client's 16 MiB bound
    for any blob: a check reads up to MAX_VERDICTS of them at once."""
    memory = world["memory"]
    memory.blobs[verdict_blob(world)] = b" " * (attestations.MAX_VERDICT_ENVELOPE + 1)
    found = problems(world)
    assert found and f"larger than {attestations.MAX_VERDICT_ENVELOPE} bytes" in found[0], found
