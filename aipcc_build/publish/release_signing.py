"""Signing and attesting what promote released, after the copies: every released manifest
(each platform's and the index) gets a sigstore signature for each tag it was released
under, and each platform's manifest the SBOM and the signed verdict as referrers.

Everything here can be done again: a signature or an attestation already there is not
written twice, so a rerun of a promote that stopped half-way completes it. The verdict is
the one the build's gate reached, as the build report records it for the digest released;
the validator runs again on the released digest only where the report has none."""

from __future__ import annotations

import _thread

from .. import __version__
from ..errors import CheckFailed
from ..functional import partial, suppress
from ..image_reference import repository_of
from ..oci import INDEX_TYPES, OCI_INDEX, OCI_MANIFEST, b64decode, load_json
from ..records import record, replace
from ..tools.oci_registry import (
    Registry,
    RegistryRefused,
    digest_of,
    is_digest,
    side_by_side,
)
from ..tools.retry import Retry, StillFailing, TransientAnswer, with_retries
from . import attestations
from .attestations import Provenance
from .referrers import EMPTY, Store, Subject, canonical, empty_config, listing, put_tag
from .signing import (
    MAX_SIGNATURE_PAYLOAD,
    MAX_SIGNATURES,
    SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING,
    PublicKey,
    Signer,
    payload,
    read_payload,
    signature_tag,
)

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:  # the validator's results: not loaded to verify a release
    from collections.abc import Mapping, Sequence
    from typing import Any, Callable, Optional, TypeVar

    from ..validate.results import ImageVerdict

    T = TypeVar("T")

    # The validator on one image: (docker://REPO@DIGEST) -> one verdict per platform. A
    # name for annotations only: made at import, its quoted part was compiled, the first
    # compile of the process (the parser's start), a fifteenth of a `verify` of one image.
    Validator = Callable[[str], list[ImageVerdict]]

CREATOR = f"aipcc-build {__version__}"
# The platforms of an image index taken at most: a release has a handful; an index a
# registry serves with thousands would hold a check or a signing for hours.
MAX_PLATFORMS = 64


@record
class Released:
    """One image as promote released it: KEY (the matrix entry), SOURCE (REPO@DIGEST, the
    copy's source), DIGEST, and every DEST (HOST/REPO:TAG) it was released as."""

    key: str
    source: str
    digest: str
    dests: tuple[str, ...]
    # The manifest's bytes as promote read them back from the destination by DIGEST
    # (hashed): not asked for again. Empty: read from the registry.
    manifest: bytes = b""


class Registries:
    """One client per registry host, shared by every image of a run."""

    def __init__(self, tls_verify: bool = True, authfile: Optional[str] = None) -> None:
        self.tls_verify = tls_verify
        self.authfile = authfile
        self.clients: dict[str, Registry] = {}

    def of(self, repository: str) -> tuple[Registry, str]:
        """(the client of REPOSITORY's host, its path there)."""
        host, _, path = repository.partition("/")
        client = self.clients.get(host)
        if client is None:
            client = self.clients[host] = Registry(host, self.tls_verify, self.authfile)
        return client, path


def instances(registry: Store, path: str, digest: str,
              found: Optional[tuple[bytes, str]] = None) -> tuple[Subject, list[Subject]]:
    """(the manifest DIGEST of PATH, its platforms' manifests: itself when it is one).
    FOUND: its bytes and media type, when already read."""
    found = found or registry.get_manifest(path, digest)
    if found is None:
        raise RegistryRefused(f"{registry.host}/{path}@{digest} is not in the registry")
    body, media_type = found
    top = Subject(path, digest, media_type or OCI_MANIFEST, len(body))
    if media_type not in INDEX_TYPES:
        return top, [top]
    platforms = []
    try:
        for item in load_json(body).get("manifests") or []:
            if isinstance(item, dict) and isinstance(item.get("digest"), str):
                platforms.append(Subject(path, item["digest"],
                                         str(item.get("mediaType") or OCI_MANIFEST),
                                         int(item.get("size") or 0)))
    except (ValueError, AttributeError, TypeError, OverflowError):  # a size of 1e999
        raise RegistryRefused(f"{registry.host}/{path}@{digest} is not a valid image "
                              "index") from None
    if not platforms:
        raise RegistryRefused(f"{registry.host}/{path}@{digest} is an image index of no "
                              "platform")
    if len(platforms) > MAX_PLATFORMS:  # each checked or signed: a few requests apiece
        raise RegistryRefused(f"{registry.host}/{path}@{digest} is an image index of "
                              f"{len(platforms)} platforms, more than {MAX_PLATFORMS}")
    return top, platforms


def signatures(registry: Store, path: str, digest: str
               ) -> tuple[list[dict[str, Any]], list[tuple[bytes, bytes]]]:
    """(the layers of DIGEST's sigstore attachment, each as (payload, signature))."""
    found = registry.get_manifest(path, signature_tag(digest))
    if found is None:
        return [], []
    try:
        layers = [x for x in load_json(found[0]).get("layers") or [] if isinstance(x, dict)]
    except (ValueError, AttributeError, TypeError):
        return [], []
    signed: list[tuple[str, bytes]] = []  # (payload blob, signature)
    for layer in layers:
        annotations = layer.get("annotations")
        encoded = annotations.get(SIGNATURE_ANNOTATION) \
            if isinstance(annotations, dict) else None
        if layer.get("mediaType") != SIMPLE_SIGNING or not isinstance(encoded, str) \
                or not is_digest(str(layer.get("digest"))):
            continue
        try:  # as containers/image reads it (Go's StdEncoding: line breaks ignored)
            signed.append((str(layer["digest"]), b64decode(
                encoded.replace("\r", "").replace("\n", ""))))
        except ValueError:
            continue
    signed = signed[:MAX_SIGNATURES]
    payloads = side_by_side([partial(registry.get_blob, path, blob,
                                               MAX_SIGNATURE_PAYLOAD) for blob, _ in signed])
    return layers, [(data, signature) for data, (_, signature) in zip(payloads, signed)]


class Drafts:
    """The unsigned documents of a run's signatures and attestations (simple-signing
    payloads, SBOMs), each made once: what `prepare` uploads while an image copies is,
    byte for byte, what its signing names after the read-back (a payload holds its time,
    an SBOM its serial number). And what `prepare` read of the destination for the
    signing (a manifest's sigstore attachment, a subject's referrers), each taken once:
    after the read-back the signing only writes; a retry of it reads again."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, ...], bytes] = {}
        self._read: dict[tuple[str, ...], Any] = {}
        self._lock = _thread.allocate_lock()  # not threading: `verify` imports this module

    def keep(self, what: str, registry: Store, path: str, digest: str,
             read: Callable[[Store, str, str], Any]) -> None:
        """READ(REGISTRY, PATH, DIGEST), kept for `take` (WHAT: which reading)."""
        found = read(registry, path, digest)
        with self._lock:
            self._read[(what, registry.host, path, digest)] = found

    def take(self, what: str, registry: Store, path: str, digest: str,
             read: Callable[[Store, str, str], T]) -> T:
        """What `keep` read, once; else READ(REGISTRY, PATH, DIGEST) now."""
        with self._lock:
            found = self._read.pop((what, registry.host, path, digest), None)
        return read(registry, path, digest) if found is None else found

    def payload(self, identity: str, digest: str) -> bytes:
        return self._once(("payload", identity, digest),
                          lambda: payload(identity, digest, CREATOR))

    def sbom(self, verdict: ImageVerdict, digest: str, name: str) -> bytes:
        return self._once(("sbom", digest, name),
                          lambda: attestations.sbom(verdict, digest, name))

    def _once(self, key: tuple[str, ...], make: Callable[[], bytes]) -> bytes:
        with self._lock:
            made = self._made.get(key)
            if made is None:
                made = self._made[key] = make()
        return made


def sign(registry: Registry, path: str, digest: str, identities: Sequence[str],
         signer: Signer, drafts: Optional[Drafts] = None) -> int:
    """A signature of DIGEST as each of IDENTITIES (HOST/REPO:TAG) by SIGNER in its
    sigstore attachment, appended to the ones there (one write of the attachment); the
    number written (none for an identity already signed). DRAFTS: the payloads, when
    some may be uploaded already."""
    import base64

    drafts = drafts or Drafts()
    layers, pairs = drafts.take("signatures", registry, path, digest, signatures)
    public = signer.public_key
    signed = set(verified_identities(pairs, digest, public))
    missing = [identity for identity in dict.fromkeys(identities) if identity not in signed]
    blobs = []
    for identity in missing:
        data = drafts.payload(identity, digest)
        signature = signer.sign(data)
        blobs.append(data)
        layers.append({"mediaType": SIMPLE_SIGNING, "digest": digest_of(data),
                       "size": len(data), "annotations": {
                           SIGNATURE_ANNOTATION: base64.b64encode(signature).decode()}})
    if missing:
        _put_signatures(registry, path, digest, layers, blobs)
    return len(missing)


def _put_signatures(registry: Store, path: str, digest: str,
                    layers: list[dict[str, Any]], blobs: Sequence[bytes],
                    read_back: bool = True) -> None:
    """DIGEST's sigstore attachment, of LAYERS: BLOBS (those of its layers not yet in
    PATH) and its config uploaded side by side, then its manifest. The config is the
    empty one every attachment and referrer of the repository shares (OCI 1.1's, for an
    artifact without one), not one listing the layers as cosign's does: no reader of
    signatures (containers/image, cosign, verify) looks at it, and one of its own was an
    upload per signed manifest, a sixth of a signed promote's. The attachment's tag is
    read back (`put_tag`) unless READ_BACK is false."""
    registry.put_blobs(path, [*blobs, EMPTY])
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": empty_config(),
                "layers": layers}
    put_tag(registry, path, signature_tag(digest), canonical(manifest), OCI_MANIFEST,
            read_back)


def verified_identities(pairs: Sequence[tuple[bytes, bytes]], digest: str,
                        key: PublicKey) -> list[str]:
    """The identities (HOST/REPO:TAG) KEY signed DIGEST as, of a sigstore attachment's
    PAIRS."""
    found = []
    for data, signature in pairs:
        claim = read_payload(data)
        if claim is not None and claim.digest == digest and key.verifies(data, signature):
            found.append(claim.docker_reference)
    return found


@record
class SigningResult:
    signatures: int  # written by this run
    attestations: int  # written by this run (SBOM and verdict count apart)


def sign_release(released: Sequence[Released], signer: Signer, build_id: str,
                 validator: Validator, registries: Registries,
                 retry: Optional[Retry] = None,
                 on_retry: Optional[Callable[[int, float, str], None]] = None,
                 jobs: int = 1, drafts: Optional[Drafts] = None) -> SigningResult:
    """Sign and attest every image of RELEASED (see the module), JOBS at once. CheckFailed
    naming the image when a registry refuses, after the retries of a transient failure:
    what was written stays, a rerun completes the rest. DRAFTS: the unsigned documents
    `prepare` made and uploaded, if it ran."""
    made = drafts or Drafts()
    from .transfer import each

    def one(image: Released) -> tuple[int, int]:
        written = [0, 0]
        try:
            with_retries(lambda: _sign_image(image, signer, build_id, validator, registries,
                                             written, made),
                         retry or Retry(), on_retry or (lambda n, wait, why: None))
        except (RegistryRefused, StillFailing) as exc:  # refused, or failing past retries
            raise CheckFailed(f"{image.key}: {exc}: the release is not "
                              "completely signed and attested; promote again to complete "
                              "it") from None
        return written[0], written[1]

    counts = each(one, list(released), jobs)
    return SigningResult(sum(c[0] for c in counts), sum(c[1] for c in counts))


def _sign_image(image: Released, signer: Signer, build_id: str, validator: Validator,
                registries: Registries, written: list[int], drafts: Drafts) -> None:
    """IMAGE's signatures and its attestations, the two side by side (each a few small
    requests in a row): the last image signed is what a signed promote waits for."""
    repositories: dict[str, list[str]] = {}
    for dest in image.dests:
        repositories.setdefault(repository_of(dest), []).append(dest)
    verdicts = validator(f"docker://{image.source}")
    for repository, dests in repositories.items():
        registry, path = registries.of(repository)
        top, platforms = instances(registry, path, image.digest, (
            image.manifest, _media_type(image.manifest)) if image.manifest else None)
        subjects = ([top] if top not in platforms else []) + platforms
        provenance = Provenance(image.key, build_id)
        # Each manifest's signatures (the index's and each platform's: attachments of
        # their own) and each platform's attestations, all side by side.
        work: list[Callable[[], int]] = [
            *(partial(sign, registry, path, subject.digest, dests, signer, drafts)
              for subject in subjects),
            *(partial(_attest, registry, subject,
                                _verdict_of(verdicts, subject.digest, len(platforms)),
                                f"{repository}@{subject.digest}", provenance, signer, drafts)
              for subject in platforms)]
        counts = side_by_side(work)
        written[0] += sum(counts[:len(subjects)])
        written[1] += sum(counts[len(subjects):])


def _media_type(manifest: bytes) -> str:
    """The media type a manifest's bytes say (an index by its list of manifests when they
    name none)."""
    try:
        document = load_json(manifest)
    except ValueError:
        return OCI_MANIFEST
    if not isinstance(document, dict):
        return OCI_MANIFEST
    named = document.get("mediaType")
    if isinstance(named, str) and named:
        return named
    return OCI_INDEX if isinstance(document.get("manifests"), list) else OCI_MANIFEST


def _attest(registry: Registry, subject: Subject, verdict: ImageVerdict, name: str,
            provenance: Provenance, signer: Signer, drafts: Drafts) -> int:
    """SUBJECT's SBOM and signed verdict as its referrers, each unless one is there already
    (the verdict: one by the same key saying the same), in one listing and (without a
    referrers API) one write of the fallback index; the number written."""
    from .referrers import Artifact, push_artifacts, read_artifact

    document = attestations.statement(verdict, subject.digest, name, provenance)
    present, fallback = drafts.take("referrers", registry, subject.repository,
                                    subject.digest, listing)
    same: dict[str, Callable[[bytes], bool]] = {
        attestations.SBOM_MEDIA_TYPE: lambda data: True,
        attestations.VERDICT_ARTIFACT_TYPE: partial(
            _same_verdict, document=document, key=signer.public_key)}

    def there(artifact_type: str) -> bool:
        for existing in present:
            if existing.get("artifactType") != artifact_type:
                continue
            found = read_artifact(registry, subject.repository, str(existing.get("digest")))
            if found is not None and same[artifact_type](found[1]):
                return True
        return False

    missing = []
    if not there(attestations.SBOM_MEDIA_TYPE):
        missing.append(Artifact(attestations.SBOM_MEDIA_TYPE, attestations.SBOM_MEDIA_TYPE,
                                drafts.sbom(verdict, subject.digest, name)))
    if not there(attestations.VERDICT_ARTIFACT_TYPE):
        missing.append(Artifact(
            attestations.VERDICT_ARTIFACT_TYPE, attestations.DSSE_MEDIA_TYPE,
            attestations.envelope(document, signer),
            {attestations.PREDICATE_ANNOTATION: attestations.VERDICT_PREDICATE}))
    return len(push_artifacts(registry, subject, missing, fallback))


def _same_verdict(old: bytes, document: dict[str, Any], key: PublicKey) -> bool:
    """Whether an existing envelope OLD, signed by KEY, holds DOCUMENT's verdict for the
    same subject and build."""
    found, _ = attestations.open_envelope(old, key)
    if found is None:
        return False
    keep = ("verdict", "buildId", "matrixEntry")
    return found.get("subject") == document["subject"] and all(
        found.get("predicate", {}).get(k) == document["predicate"][k] for k in keep)


def _verdict_of(verdicts: Sequence[ImageVerdict], digest: str, platforms: int
                ) -> ImageVerdict:
    """The verdict of the platform manifest DIGEST (by digest, else the only one)."""
    for verdict in verdicts:
        if verdict.digest == digest:
            return verdict
    if platforms == 1 and len(verdicts) == 1:
        return verdicts[0]
    raise CheckFailed(f"the validator gave no verdict of {digest}")


def released_images(copies: Sequence[Any]) -> list[Released]:
    """promote's copies (transfer.Copy) grouped by image."""
    by_key: dict[str, list[Any]] = {}
    for copy in copies:
        by_key.setdefault(copy.key, []).append(copy)
    return [Released(key, group[0].source, group[0].digest,
                     tuple(c.dest for c in group)) for key, group in by_key.items()]



def judge_promoted(copies: Sequence[Any], *, tls_verify: bool, runner: Any = None,
                   validator: Optional[Validator] = None, jobs: int = 1,
                   judged: Optional[Mapping[str, list[ImageVerdict]]] = None) -> Validator:
    """promote's hook before its copies, when it signs: the verdict of each image's
    source digest (the digest it releases), JOBS at once; CheckFailed naming every image
    whose verdict is not ok, so that nothing failed is released, signed or attested. The
    verdicts, for the attestations after the copies. JUDGED (by image key): the verdicts
    the gate reached at build, which the build report records bound to the digest
    released; the validator runs only on an image without them."""
    from .transfer import each

    images = released_images(copies)
    known = {f"docker://{image.source}": (judged or {}).get(image.key) for image in images}
    sources = [ref for ref, verdicts in known.items() if not verdicts]
    if validator is None and sources:  # the validator loads only when it is to run
        from ..tools.skopeo import Skopeo
        from ..validate.pipeline import validate_image

        skopeo = Skopeo(runner, tls_verify=tls_verify)

        def validator(ref: str) -> list[ImageVerdict]:
            return validate_image(ref, skopeo=skopeo)

    found = dict(zip(sources, each(validator, sources, jobs))) if validator else {}
    verdicts_of = {ref: verdicts or found[ref] for ref, verdicts in known.items()}
    failed = [f"{ref[len('docker://'):]} ({verdict.platform}): {verdict.verdict}"
              for ref, verdicts in verdicts_of.items() for verdict in verdicts
              if not verdict.ok]
    if failed:
        raise CheckFailed("refusing to sign and promote what the validator does not pass: "
                          + "; ".join(failed))
    return verdicts_of.__getitem__


def _prepare(image: Released, verdicts: list[ImageVerdict], registries: Registries,
             drafts: Drafts) -> None:
    """The unsigned blobs IMAGE's signing will name, uploaded before its read-back: the
    simple-signing payload of each manifest (the index and each platform, as VERDICTS
    name them by digest) for each tag, each platform's SBOM and the empty config every
    attachment and attestation names. Nothing here signs or attests: a
    signature is in its attachment's manifest, not in a blob, and no manifest names these
    blobs before the read-back; what is left then is the attachments, the signed verdicts
    and the referrer manifests, a few requests instead of a few dozen. Beside the uploads,
    what the signing reads first (each manifest's sigstore attachment, each platform's
    referrers) is read now and kept in DRAFTS, and the uploads of the signed verdicts are
    begun (an upload session holds nothing): after the read-back the signing of the last
    image, which a signed promote waits for, starts with its writes, each one request."""
    platforms = [v.digest for v in verdicts if v.digest and v.digest != image.digest] \
        or [image.digest]
    subjects = ([image.digest] if image.digest not in platforms else []) + platforms
    repositories: dict[str, list[str]] = {}
    for dest in image.dests:
        repositories.setdefault(repository_of(dest), []).append(dest)
    for repository, dests in repositories.items():
        registry, path = registries.of(repository)
        blobs = [EMPTY]
        for digest in subjects:
            blobs += [drafts.payload(identity, digest) for identity in dict.fromkeys(dests)]
        blobs += [drafts.sbom(_verdict_of(verdicts, digest, len(platforms)), digest,
                              f"{repository}@{digest}") for digest in platforms]
        side_by_side([
            partial(_upload_ahead, registry, path, blobs, len(platforms)),
            *(partial(drafts.keep, "signatures", registry, path, digest,
                                signatures) for digest in subjects),
            *(partial(drafts.keep, "referrers", registry, path, digest, listing)
              for digest in platforms)])


def _upload_ahead(registry: Registry, path: str, blobs: list[bytes], signed: int) -> None:
    """BLOBS uploaded to PATH, then the uploads of SIGNED blobs begun (the signed verdicts,
    one a platform: each is then one request): after BLOBS, which would take them."""
    registry.put_blobs(path, blobs)
    registry.open_uploads(path, signed)


class PromoteSigning:
    """promote's hooks for its copies, with the VERDICTS judge_promoted found: `prepare`
    while an image copies, `sign` once all its copies are made and read back, so that
    promote signs each image as soon as it is copied, while others copy."""

    def __init__(self, copies: Sequence[Any], signer: Signer, build_id: str,
                 verdicts: Validator, *, tls_verify: bool, authfile: Optional[str],
                 retry: Retry) -> None:
        self._signer, self._build_id, self._verdicts = signer, build_id, verdicts
        self._retry = retry
        self._registries = Registries(tls_verify, authfile)
        self._drafts = Drafts()
        self._by_key = {image.key: image for image in released_images(copies)}

    def prepare(self, key: str) -> None:
        """The unsigned blobs of the image KEY uploaded (`_prepare`), for an image this
        run releases anew: an image released before mostly has its signatures already,
        and a payload holds its time, so its blobs would be new ones for nothing. Best
        effort: what fails here is uploaded again, or reported, by `sign`."""
        image = self._by_key[key]
        with suppress(CheckFailed, TransientAnswer, OSError):
            _prepare(image, self._verdicts(f"docker://{image.source}"), self._registries,
                     self._drafts)

    def sign(self, done: Sequence[Any], manifests: Mapping[str, bytes]) -> SigningResult:
        """DONE's images; MANIFESTS: their manifests' bytes read back, by digest."""
        images = [replace(image, manifest=manifests.get(image.digest, b""))
                  for image in (self._by_key[key]
                                for key in dict.fromkeys(c.key for c in done))]
        return sign_release(images, self._signer, self._build_id, self._verdicts,
                            self._registries, self._retry, drafts=self._drafts)


def carry(source: Store, source_path: str, dest: Store, dest_path: str, digest: str) -> int:
    """The signatures (sigstore attachments) of DIGEST and of each of its platforms'
    manifests, and their referrers, copied from SOURCE_PATH in SOURCE to DEST_PATH in DEST
    (mirror's hook after a copy: registries, or an OCI layout on either side); the number
    of manifests written."""
    from .referrers import copy_referrers

    top, platforms = instances(source, source_path, digest)
    written = 0
    for subject in ([top] if top not in platforms else []) + platforms:
        layers, _ = signatures(source, source_path, subject.digest)
        there, _ = signatures(dest, dest_path, subject.digest)
        missing = [x for x in layers if x not in there]
        if missing:
            _put_signatures(dest, dest_path, subject.digest, there + missing,
                            [source.get_blob(source_path, str(x["digest"])) for x in missing],
                            read_back=False)  # mirror reads back what it carried
            written += 1
    for subject in platforms:
        written += copy_referrers(source, dest, source_path,
                                  Subject(dest_path, subject.digest, subject.media_type,
                                          subject.size))
    return written
