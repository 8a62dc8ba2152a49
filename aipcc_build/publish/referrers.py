"""OCI 1.1 referrers: artifacts that hang off an image manifest by their `subject`, and the
sigstore attachments (`sha256-<hex>.sig`) that hold its signatures.

A registry with the referrers API indexes an artifact when it is pushed, and says so with
an `OCI-Subject` header; one without it (distribution 2.8 answers 404 on
/v2/NAME/referrers/DIGEST) gets the fallback the OCI distribution spec describes, kept by
the client: an image index tagged `sha256-<hex>` listing the referrers of that digest,
read, extended and written again. Readers ask the API first, then the tag."""

from __future__ import annotations

from ..functional import partial
from ..oci import OCI_INDEX, OCI_MANIFEST, load_json
from ..records import field, record
from ..tools.oci_registry import MAX_BLOB, RegistryRefused, Reply, digest_of, side_by_side

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Callable, Optional, Protocol
else:
    Protocol = object  # a description for the type checker: nothing checks it at run time

EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"


def empty_config() -> dict[str, Any]:
    """The config descriptor of an artifact that has none (OCI 1.1's empty descriptor, its
    two bytes inline): every referrer and sigstore attachment of a repository names the
    one `{}` blob, uploaded once."""
    return {"mediaType": EMPTY_MEDIA_TYPE, "digest": digest_of(EMPTY), "size": len(EMPTY),
            "data": "e30="}


class Store(Protocol):
    """Where manifests, blobs and tags of repositories are read and written: a registry
    (tools.oci_registry.Registry) or an OCI layout (oci_layout.LayoutStore)."""

    host: str  # what messages name it by

    def get_manifest(self, repository: str, reference: str
                     ) -> Optional[tuple[bytes, str]]: ...

    def put_manifest(self, repository: str, reference: str, body: bytes,
                     media_type: str) -> Reply: ...

    def get_blob(self, repository: str, digest: str, max_size: int = ...) -> bytes: ...

    def put_blob(self, repository: str, data: bytes) -> str: ...

    def put_blobs(self, repository: str, blobs: Sequence[bytes]) -> None: ...

    def referrers(self, repository: str, digest: str
                  ) -> Optional[list[dict[str, Any]]]: ...


@record
class Subject:
    repository: str  # path in the registry
    digest: str
    media_type: str
    size: int

    def descriptor(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


def referrers_tag(digest: str) -> str:
    algorithm, _, hexdigest = digest.partition(":")
    return f"{algorithm}-{hexdigest}"


def canonical(document: dict[str, Any]) -> bytes:
    import json

    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def put_tag(registry: Store, repository: str, tag: str, body: bytes,
            media_type: str, read_back: bool = True) -> None:
    """BODY written as TAG of REPOSITORY, then read back (unless READ_BACK is false: a
    caller that reads what it wrote back itself, as mirror does): a write counts only
    once the tag serves it. RegistryRefused naming the tag when the registry answered
    the write but serves another manifest there, or none (a registry that lies, or
    another writer that replaced the tag meanwhile): a rerun writes it again."""
    registry.put_manifest(repository, tag, body, media_type)
    if not read_back:
        return
    found = registry.get_manifest(repository, tag)
    if found is None or digest_of(found[0]) != digest_of(body):
        served = "no manifest" if found is None \
            else f"another manifest ({digest_of(found[0])})"
        raise RegistryRefused(f"{registry.host}/{repository}:{tag}: the registry accepted "
                              f"its write of {digest_of(body)} but serves {served} there")


def confirm_digest(registry: Store, repository: str, reply: Reply, digest: str) -> None:
    """A write by DIGEST, as its REPLY confirms it: the manifest the registry stored is
    the one its Docker-Content-Digest names (the registry's own hashing of what it
    received), or, with no such header, the one a read by DIGEST serves; RegistryRefused
    when that is another, or none."""
    if reply.headers.get("docker-content-digest") is None:
        read_back_digest(registry, repository, digest)
    else:
        _check_stored_as(registry, repository, reply, digest)


def _check_stored_as(registry: Store, repository: str, reply: Reply, digest: str) -> None:
    """RegistryRefused when REPLY's Docker-Content-Digest names another digest than the
    DIGEST written."""
    stored = reply.headers.get("docker-content-digest")
    if stored is not None and stored != digest:
        raise RegistryRefused(f"{registry.host}/{repository}@{digest}: the registry stored "
                              f"the write as {stored}")


def read_back_digest(registry: Store, repository: str, digest: str) -> None:
    """The manifest just written as DIGEST read back: RegistryRefused when the registry
    serves nothing there (it answered the write and kept nothing). A read by digest is
    refused by the client when the bytes served hash to anything else."""
    if registry.get_manifest(repository, digest) is None:
        raise RegistryRefused(f"{registry.host}/{repository}@{digest}: the registry stored "
                              "the write as nothing")


@record
class Artifact:
    """What to hang off a subject: DATA (one layer of MEDIA_TYPE) as ARTIFACT_TYPE."""

    artifact_type: str
    media_type: str
    data: bytes
    annotations: dict[str, str] = field(default_factory=dict)


def push_artifact(registry: Store, subject: Subject, artifact_type: str,
                  media_type: str, data: bytes,
                  annotations: Optional[dict[str, str]] = None) -> str:
    """DATA as an artifact referring to SUBJECT; its manifest's digest. An artifact of the
    same type with the same content already referring to it is not pushed again."""
    layer = {"mediaType": media_type, "digest": digest_of(data), "size": len(data)}
    for existing in list_referrers(registry, subject.repository, subject.digest,
                                   artifact_type):
        found = read_artifact(registry, subject.repository, str(existing.get("digest")))
        if found is not None and layer in found[0].get("layers", []):
            return str(existing["digest"])
    return push_artifacts(registry, subject, [Artifact(artifact_type, media_type, data,
                                                       dict(annotations or {}))])[0]


def push_artifacts(registry: Store, subject: Subject, artifacts: list[Artifact],
                   fallback: Optional[list[dict[str, Any]]] = None) -> list[str]:
    """Each of ARTIFACTS as a referrer of SUBJECT, without looking for one there; their
    manifests' digests. Each manifest counts once it is read back by its digest (a 201
    and the registry's Docker-Content-Digest say what it hashed, not that it keeps it).
    Where the registry has no referrers API, one write of the fallback index then lists
    them all: FALLBACK, its entries as `listing` just read them (not read again), else as
    the registry serves it now."""
    if not artifacts:
        return []
    manifests = []
    for artifact in artifacts:
        data = artifact.data
        manifest: dict[str, Any] = {
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "artifactType": artifact.artifact_type,
            "config": empty_config(),
            "layers": [{"mediaType": artifact.media_type, "digest": digest_of(data),
                        "size": len(data)}],
            "subject": subject.descriptor()}
        if artifact.annotations:
            manifest["annotations"] = dict(artifact.annotations)
        manifests.append(canonical(manifest))
    registry.put_blobs(subject.repository, [EMPTY, *(a.data for a in artifacts)])
    replies = side_by_side([partial(registry.put_manifest, subject.repository,
                                              digest_of(body), body, OCI_MANIFEST)
                            for body in manifests])
    unindexed = []
    for artifact, body, reply in zip(artifacts, manifests, replies):
        _check_stored_as(registry, subject.repository, reply, digest_of(body))
        if "oci-subject" not in reply.headers:
            descriptor = {"mediaType": OCI_MANIFEST, "digest": digest_of(body),
                          "size": len(body), "artifactType": artifact.artifact_type}
            if artifact.annotations:
                descriptor["annotations"] = dict(artifact.annotations)
            unindexed.append(descriptor)
    # Read back before the fallback index names them: an index entry of a manifest the
    # registry did not keep would stay there, and fail every `verify` after a rerun.
    side_by_side([partial(read_back_digest, registry, subject.repository,
                          digest_of(body)) for body in manifests])
    if unindexed:
        _add_to_fallback(registry, subject, unindexed, fallback)
    return [digest_of(body) for body in manifests]


def _add_to_fallback(registry: Store, subject: Subject, descriptors: list[dict[str, Any]],
                     manifests: Optional[list[dict[str, Any]]] = None,
                     read_back: bool = True) -> None:
    """DESCRIPTORS added to SUBJECT's fallback index, whose entries are MANIFESTS when
    the caller has just read them; the index read back unless READ_BACK is false."""
    if manifests is None:
        manifests = _fallback_entries(registry, subject.repository, subject.digest)
    listed = {m.get("digest") for m in manifests}
    new = [d for d in descriptors if d["digest"] not in listed]
    if not new:
        return
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [*manifests, *new]}
    put_tag(registry, subject.repository, referrers_tag(subject.digest), canonical(index),
            OCI_INDEX, read_back)


def _fallback_entries(registry: Store, repository: str, digest: str
                      ) -> list[dict[str, Any]]:
    """The entries of DIGEST's fallback index (none when there is none, or when what the
    tag holds is no index: a write replaces it with one)."""
    tagged = registry.get_manifest(repository, referrers_tag(digest))
    if tagged is None:
        return []
    try:
        return [m for m in load_json(tagged[0]).get("manifests") or []
                if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return []


def listing(registry: Store, repository: str, digest: str
            ) -> tuple[list[dict[str, Any]], Optional[list[dict[str, Any]]]]:
    """(the descriptors of DIGEST's referrers, the entries of its fallback index when they
    were read from the fallback tag: None when the registry has the referrers API)."""
    found: Optional[list[dict[str, Any]]]
    entries: Optional[list[dict[str, Any]]] = None
    if getattr(registry, "referrers_api", False) is None:
        # Whether the registry has the API is not known yet: the fallback tag is asked
        # beside it, so that a registry without one (distribution 2.8) costs no request
        # in a row after the API's 404 (`verify` of an image is a few requests in a row).
        asked: list[Callable[[], Optional[list[dict[str, Any]]]]] = [
            partial(registry.referrers, repository, digest),
            partial(_fallback_entries, registry, repository, digest)]
        found, entries = side_by_side(asked)
    else:
        found = registry.referrers(repository, digest)
    if found is not None:
        return found, None
    if entries is None:
        entries = _fallback_entries(registry, repository, digest)
    return entries, entries


def list_referrers(registry: Store, repository: str, digest: str,
                   artifact_type: Optional[str] = None) -> list[dict[str, Any]]:
    """The descriptors of DIGEST's referrers (of ARTIFACT_TYPE when given): the
    referrers API's, else the fallback tag's."""
    found, _ = listing(registry, repository, digest)
    return [m for m in found if artifact_type is None
            or m.get("artifactType") == artifact_type]


def read_artifact(registry: Store, repository: str, digest: str,
                  max_size: int = MAX_BLOB) -> Optional[tuple[dict[str, Any], bytes]]:
    """(the artifact manifest, its first layer's bytes: at most MAX_SIZE of them); None
    when it is no artifact."""
    if not digest.startswith("sha256:"):
        return None
    found = registry.get_manifest(repository, digest)
    if found is None:
        return None
    try:
        manifest = load_json(found[0])
        blob = manifest["layers"][0]["digest"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    if not isinstance(manifest, dict) or not isinstance(blob, str) \
            or not blob.startswith("sha256:"):
        return None
    return manifest, registry.get_blob(repository, blob, max_size)


def copy_referrers(source: Store, dest: Store, source_path: str, subject: Subject
                   ) -> int:
    """Every referrer of SUBJECT in SOURCE_PATH copied, blobs and manifest by digest, to
    SUBJECT's repository in DEST (and into its fallback index where DEST has no referrers
    API); the number copied."""
    copied = 0
    listed: Optional[set[str]] = None
    for descriptor in list_referrers(source, source_path, subject.digest):
        digest = str(descriptor.get("digest"))
        if dest.get_manifest(subject.repository, digest) is not None:
            if listed is None:
                listed = {str(d.get("digest"))
                          for d in list_referrers(dest, subject.repository, subject.digest)}
            if digest in listed:
                continue
            # Stored but listed nowhere (a referrers tag the registry lost): copied again,
            # which lists it.
        found = source.get_manifest(source_path, digest)
        artifact = read_artifact(source, source_path, digest)
        if found is None or artifact is None:
            continue
        body, media_type = found
        manifest = artifact[0]
        for blob in [manifest.get("config"), *(manifest.get("layers") or [])]:
            if isinstance(blob, dict) and isinstance(blob.get("digest"), str):
                dest.put_blob(subject.repository, source.get_blob(source_path, blob["digest"]))
        reply = dest.put_manifest(subject.repository, digest, body, media_type)
        confirm_digest(dest, subject.repository, reply, digest)
        if "oci-subject" not in reply.headers:
            _add_to_fallback(dest, subject, [{k: v for k, v in descriptor.items()
                                              if k in ("mediaType", "digest", "size",
                                                       "artifactType", "annotations")}],
                             read_back=False)  # mirror reads back what it carried
        copied += 1
    return copied
