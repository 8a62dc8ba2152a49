"""`verify`: whether a released image is what we released and what the gate proved. For
each reference: its signature by the key (each platform's manifest and the index's, with
containers/image's default identity rule: a tag must be the one signed, a digest any tag
of the repository), and, on each platform's manifest, the SBOM and the verdict attestation
as referrers, bound to that digest, the verdict signed by the key and saying ok."""

from __future__ import annotations

from ..errors import InputError, excerpt, quoted
from ..functional import partial
from ..image_reference import is_reference, split
from ..records import record
from ..tools.oci_registry import Registry, RegistryRefused, digest_of, side_by_side
from ..tools.retry import Retry, StillFailing, last_line, with_retries
from . import attestations
from .referrers import list_referrers, read_artifact
from .release_signing import Registries, instances, signatures, verified_identities
from .signing import Payload, PublicKey, load_public_key, read_payload

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Callable, Optional

# The verdict attestations of one digest read at most (two requests each): a registry
# listing thousands would hold the check for hours. A release carries one per signing key.
MAX_VERDICTS = 16


@record
class VerifyRequest:
    refs: tuple[str, ...]  # HOST/REPO:TAG or HOST/REPO@DIGEST (docker:// allowed)
    key: Optional[str]  # the PEM public key's path
    tls_verify: bool = True
    authfile: Optional[str] = None
    retry: Retry = Retry()


@record
class ImageCheck:
    ref: str
    digest: Optional[str]  # what REF points at, when found
    platforms: int  # platform manifests checked
    problems: tuple[str, ...]  # empty: verified

    @property
    def ok(self) -> bool:
        return not self.problems


@record
class VerifyResult:
    images: tuple[ImageCheck, ...]

    @property
    def ok(self) -> bool:
        return all(image.ok for image in self.images)


def verify(request: VerifyRequest) -> VerifyResult:
    """Check every reference (see the module); InputError for a malformed reference or
    key before any registry is asked."""
    if request.key is None:
        raise InputError("verification needs the public key the release was signed with "
                         "(keyless verification needs Fulcio and Rekor: use cosign)",
                         field="key")
    key = load_public_key(request.key)
    refs = []
    for ref in request.refs:
        plain = ref[len("docker://"):] if ref.startswith("docker://") else ref
        repository, tag, digest = split(plain)
        if not is_reference(plain) or "/" not in repository or not (tag or digest):
            raise InputError(f"{quoted(ref, always=True)} is not HOST/REPOSITORY:TAG or "
                             "HOST/REPOSITORY@sha256:DIGEST", field="refs")
        refs.append(plain)
    if not refs:
        raise InputError("name at least one image", field="refs")
    registries = Registries(request.tls_verify, request.authfile)

    def checked(ref: str) -> ImageCheck:
        try:
            return with_retries(lambda: _check(ref, key, registries), request.retry,
                                lambda n, wait, why: None)
        except RegistryRefused as exc:
            return ImageCheck(ref, None, 0, (str(exc),))
        except StillFailing as exc:  # 429s or 5xxs past every retry: this image's problem
            return ImageCheck(ref, None, 0, (f"the registry kept failing: {last_line(exc)}",))

    # The first alone (its registry's scheme and login learnt once), the others side by
    # side: each is a few requests in a row.
    first = checked(refs[0])
    return VerifyResult((first, *side_by_side([partial(checked, ref)
                                               for ref in refs[1:]])))


def _check(ref: str, key: PublicKey, registries: Registries) -> ImageCheck:
    repository, tag, wanted = split(ref)
    registry, path = registries.of(repository)
    found = registry.get_manifest(path, wanted or str(tag))
    if found is None:
        return ImageCheck(ref, None, 0, ("no such image in the registry",))
    digest = digest_of(found[0])
    top, platforms = instances(registry, path, digest, found)
    checks: list[Callable[[], list[str]]] = []
    for subject in ([top] if top not in platforms else []) + platforms:
        if top in platforms:
            what = "the image"
        else:
            what = "the index" if subject is top else f"platform manifest {subject.digest}"
        checks.append(partial(_signature_problems, registry, path, subject.digest,
                                        repository, tag, key, what))
    for subject in platforms:
        checks.append(partial(_attestation_problems, registry, subject.repository,
                                        subject.digest, key))
    # Each check is a few requests in a row: side by side, they take as long as one.
    problems = [p for found in side_by_side(checks) for p in found]
    return ImageCheck(ref, digest, len(platforms), tuple(problems))


def _signature_problems(registry: Registry, path: str, digest: str, repository: str,
                        tag: Optional[str], key: PublicKey, what: str) -> list[str]:
    _, pairs = signatures(registry, path, digest)
    if not pairs:
        return [f"{what} is not signed (no sigstore signature of {digest})"]
    # The signatures that claim the identity REF stands for are checked first: one by the
    # key settles it, and the others (each tag's) need no verification of their own.
    claimed = [(data, signature) for data, signature in pairs
               if _stands_for(read_payload(data), repository, tag)]
    if verified_identities(claimed, digest, key):
        return []
    identities = verified_identities(pairs, digest, key)
    if not identities:
        # A signature tag holding another image's signatures (copied, or a registry
        # serving the wrong attachment): named as such, not as a foreign key.
        signed_digests = {c.digest for c in (read_payload(data) for data, _ in pairs) if c}
        if signed_digests and digest not in signed_digests:
            return [f"{what}'s signatures are of another manifest "
                    f"({excerpt(', '.join(sorted(signed_digests)))}), not of {digest}"]
        return [f"{what} is signed, but not by the key {key.path}"]
    signed = sorted(set(identities))
    wanted = f"{repository}:{tag}" if tag else f"a tag of {repository}"
    if all(split(identity)[0] != repository for identity in signed):
        # Signed by the key for other repositories: a copy of a release (a mirror's). What
        # was checked is the copy at REPOSITORY; the signature names where it was released.
        return [f"{what} at {repository} was signed as {', '.join(signed)}, not as {wanted}: "
                "a copy keeps the name it was signed as, which a pull through the mirror's "
                "registries.conf checks"]
    return [f"{what} was signed as {', '.join(signed)}, not as {wanted}"]


def _stands_for(claim: Optional[Payload], repository: str, tag: Optional[str]) -> bool:
    """Whether a signature claiming CLAIM is one of REPOSITORY:TAG by containers/image's
    default rule (matchRepoDigestOrExact): that tag, or, for a reference by digest, any
    tag of the repository."""
    if claim is None:
        return False
    identity = claim.docker_reference
    return identity == f"{repository}:{tag}" if tag else split(identity)[0] == repository


def _attestation_problems(client: Registry, path: str, digest: str,
                          key: PublicKey) -> list[str]:
    problems: list[str] = []
    referrers = list_referrers(client, path, digest)
    sboms = [r for r in referrers if r.get("artifactType") == attestations.SBOM_MEDIA_TYPE]
    verdicts = [r for r in referrers
                if r.get("artifactType") == attestations.VERDICT_ARTIFACT_TYPE][:MAX_VERDICTS]
    # The SBOM and the verdicts read side by side: each is two requests in a row.
    read = side_by_side([
        *(partial(read_artifact, client, path, str(d.get("digest"))) for d in sboms[:1]),
        *(partial(read_artifact, client, path, str(d.get("digest")),
                  attestations.MAX_VERDICT_ENVELOPE) for d in verdicts)])
    if not sboms:
        problems.append(f"{digest} has no SBOM attestation")
    for found in read[:len(sboms[:1])]:
        why = _bound(found, digest) or (attestations.check_sbom(found[1]) if found else "")
        if why:
            problems.append(f"{digest}: {why}")
    if not verdicts:
        problems.append(f"{digest} has no verdict attestation")
        return problems
    reasons = []
    for found in read[len(sboms[:1]):]:
        why = _bound(found, digest)
        if not why and found is not None:
            document, why = attestations.open_envelope(found[1], key)
            if document is not None:
                subjects = attestations.subject_digests(document)
                predicate = document.get("predicate")
                verdict = predicate.get("verdict") if isinstance(predicate, dict) else None
                if digest not in subjects:
                    named = ", ".join(subjects[:3]) + (", ..." if len(subjects) > 3 else "")
                    why = (f"the verdict attestation's subject is "
                           f"{excerpt(named, 240) if subjects else 'nothing'}, not {digest}")
                elif verdict != "ok":
                    why = f"the verdict attestation says {excerpt(verdict)}"
                else:
                    return problems
        reasons.append(why)
    problems.append(f"{digest}: {reasons[0]}" if len(set(reasons)) == 1 else
                    f"{digest}: no valid verdict attestation ({'; '.join(reasons)})")
    return problems


def _bound(found: Optional[tuple[dict[str, object], bytes]], digest: str) -> str:
    """Why an artifact is not a referrer of DIGEST ("" when it is)."""
    if found is None:
        return "a listed attestation is not in the registry, or is no artifact manifest"
    subject = found[0].get("subject")
    named = subject.get("digest") if isinstance(subject, dict) else None
    if named != digest:
        return f"a listed attestation refers to {excerpt(named) if named else 'nothing'}, " \
               f"not {digest}"
    return ""


def require_verdicts(sources: list[str], key_path: str, *, tls_verify: bool,
                     authfile: Optional[str], retry: Retry) -> None:
    """promote's check before any copy: every image of SOURCES (HOST/REPO@DIGEST) carries,
    on each platform's manifest, a verdict attestation signed by KEY_PATH's key that says
    ok (and its SBOM); CheckFailed naming every image that does not."""
    from ..errors import CheckFailed

    key = load_public_key(key_path, field="require_verdict_by")
    registries = Registries(tls_verify, authfile)
    problems = []
    for source in sources:
        repository, _, digest = split(source)
        registry, path = registries.of(repository)

        def attempt(registry: Registry = registry, path: str = path,
                    digest: str = str(digest)) -> list[str]:
            _, platforms = instances(registry, path, digest)
            return [p for subject in platforms
                    for p in _attestation_problems(registry, path, subject.digest, key)]

        try:
            found = with_retries(attempt, retry, lambda n, wait, why: None)
        except RegistryRefused as exc:
            found = [str(exc)]
        except StillFailing as exc:
            found = [f"the registry kept failing: {last_line(exc)}"]
        problems += [f"{source}: {problem}" for problem in found]
    if problems:
        raise CheckFailed("refusing to promote what carries no passing verdict "
                          "attestation: " + "; ".join(problems))
