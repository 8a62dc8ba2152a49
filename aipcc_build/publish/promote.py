"""promote: copy the images a release's build reports mark ok (one report per CI job,
joined by `build_report`; or the matrix's images of a build id, at their digests now), by
digest and with every platform, to the release repositories, tagged
`{version}-{build_id}` and the moving tags of the product the reports record (a matrix
given too must be of its version); then read every tag and digest back, and describe the
release in a manifest (`release_manifest`). A `dev` or pull-request build id is no release
unless the request says so.

The seam for what comes after (signing, attestations): `promote(PromoteRequest)` returns a
`PromoteResult` whose `released` lists every reference as the destination serves it.

Everything is checked before anything is copied: an image the report does not mark ok, or
whose digest in the source registry is no longer the report's, refuses the whole promotion.
A tag the destination already holds at the same digest is not copied again; tags are never
deleted. The `{version}-{build_id}` tag is immutable: when the destination holds it at
another digest (the build id was rebuilt), or when two images of the report would land on
one destination tag, nothing is copied.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from ..errors import CheckFailed, InputError
from ..image_reference import below, repository_of
from ..imagebuild import build_report
from ..imagebuild.build_report import ReportEntry
from ..matrix.expand import check_build_id
from ..matrix.model import Product
from ..tools.registry_http import UNKNOWN
from ..tools.retry import Retry, with_retries
from ..tools.runner import Runner
from ..tools.skopeo import Skopeo
from . import COPY_JOBS
from .release_signing import PromoteSigning, SigningResult, judge_promoted
from .signing import Signer
from .transfer import (
    Copy,
    Event,
    OnEvent,
    Probe,
    RegistryCheck,
    Served,
    each,
    read_back,
    release_namespace,
)
from .verify import require_verdicts


@dataclass(frozen=True)
class PromoteRequest:
    # The release: build reports (files, or directories of them: one per CI job), joined
    # into one; or, empty, the matrix's images of BUILD_ID, pinned to their digests now.
    reports: tuple[str, ...]
    to: str  # HOST/NAMESPACE of the release repositories (docker:// allowed)
    # The registry the build pushed to; None: the one the report records, else the matrix's.
    source_registry: Optional[str]
    # The product of a matrix given with the report: it must be the report's (its version
    # is in every tag). None: the report's alone.
    product: Optional[Product] = None
    matrix_registry: str = ""  # of that matrix: "" when none was given
    # A matrix the user named with the report: its product and registry stand for the two
    # fields above (read when the plan is made).
    matrix_path: Optional[str] = None
    build_id: Optional[str] = None  # without reports: the matrix's images of this build
    # A `dev` or pull-request build id is not a release unless this says so.
    allow_unreleased_build_id: bool = False
    manifest: Optional[str] = None  # where the release manifest goes (a file), if asked
    dry_run: bool = False
    tls_verify: bool = True
    authfile: Optional[str] = None
    retry: Retry = field(default_factory=Retry)
    jobs: int = COPY_JOBS  # looks and images copied at once
    # Sign and attest what is released (publish/release_signing): a loaded private key
    # (perhaps still being decrypted: promote waits for it before any copy).
    signer: Optional[Signer] = None
    # The public key (a PEM file) whose passing verdict attestation every image must carry
    # in the source before anything is copied (publish/verify.require_verdicts).
    require_verdict_by: Optional[str] = None


@dataclass(frozen=True)
class Released:
    """One reference of the release, as the destination serves it (read back)."""

    key: str
    reference: str  # HOST/NS/REPO:TAG
    digest: str
    platforms: tuple[str, ...]


@dataclass(frozen=True)
class PromoteResult:
    build_id: str
    planned: tuple[Copy, ...]  # every (image, tag)
    copied: tuple[Copy, ...]  # what this run copied (nothing on a dry run)
    skipped: tuple[Copy, ...]  # already at the destination with the same digest
    dry_run: bool
    product: Optional[Product] = None
    # Every tag, read back from the destination after the copies (none on a dry run).
    released: tuple[Released, ...] = ()
    signing: Optional[SigningResult] = None  # when signed and attested


# Build ids that name no release: a developer's (`dev`) or a pull request's build (the
# GitHub recipe's `on-pr-SHA`, Konflux's `on-pr-REVISION`).
UNRELEASED_PREFIXES = ("dev-", "on-pr-", "pr-", "mr-")


def unreleased(build_id: str) -> bool:
    return build_id == "dev" or build_id.startswith(UNRELEASED_PREFIXES)


def release_tags(product: Product, build_id: str) -> list[str]:
    """The immutable tag first, then the moving tags, without repeats."""
    tags = [f"{product.version}-{build_id}"]
    for pattern in product.moving_tags:
        tag = pattern.format(version=product.version, build_id=build_id)
        if tag not in tags:
            tags.append(tag)
    return tags


def release_product(request: PromoteRequest, release: build_report.Release) -> Product:
    """The product the build was made with: the report's (a matrix given too must agree),
    else, for a report written before it was recorded, the matrix's; InputError when there
    is neither: a default matrix's version would tag the release wrong."""
    if request.product is not None:
        release.check_matrix(request.product.version)
    product = release.product or request.product
    if product is None:
        raise InputError("the build report does not record the product version the build "
                         "was made with (written by an older aipcc-build): give the matrix "
                         "the build was made with", file=release.path)
    return product


def planned_copies(request: PromoteRequest) -> tuple[str, list[Copy]]:
    """(build id, the copies): refuses (InputError naming every image) an image not ok,
    without a digest, or outside the source registry. Reads nothing but the report."""
    build_id, _, copies, _, _ = _plan(request)
    return build_id, copies


def _release(request: PromoteRequest, skopeo: Optional[Skopeo]) -> build_report.Release:
    """The reports joined, or the matrix's images of the build id, each pinned to the
    digest its tag has now (InputError naming those the source registry does not hold)."""
    if request.reports:
        if request.build_id is not None:
            raise InputError("promote takes build reports or a build id, not both",
                             field="build_id")
        return build_report.read_releases(request.reports)
    if request.build_id is None:
        raise InputError("promote takes build reports or a build id", field="report")
    from ..matrix import EVERYTHING, expand, load

    if request.matrix_path is None:
        raise InputError("promote by build id reads the matrix: name it", field="matrix")
    matrix = load(request.matrix_path)
    specs = expand(matrix, build_id=request.build_id, registry=request.source_registry,
                   filters=EVERYTHING)
    tool = skopeo or Skopeo()
    digests = each(lambda spec: tool.manifest_digest(
        f"docker://{spec.reference}", tls_verify=request.tls_verify,
        authfile=request.authfile), specs, request.jobs, first_alone=True)
    missing = [s.reference for s, d in zip(specs, digests) if d is None]
    if missing:
        raise InputError(f"build {request.build_id} is not in the registry: "
                         f"{', '.join(missing)} not found", field="build_id")
    return build_report.Release(
        request.build_id, request.source_registry or matrix.registry,
        [ReportEntry(name=s.name, kind=s.kind, key=s.key, reference=s.reference,
                     status="ok", digest=d, build_duration=None)
         for s, d in zip(specs, digests)],
        matrix.product, matrix.path)


def _plan(request: PromoteRequest, skopeo: Optional[Skopeo] = None
          ) -> tuple[str, list[ReportEntry], list[Copy], list[str], Product]:
    """(build id, the release's images, the copies, the tags, the product), from one read
    of the reports."""
    to = release_namespace(request.to)
    if request.matrix_path is not None and request.reports:
        from ..matrix import load

        matrix = load(request.matrix_path)
        request = replace(request, product=matrix.product, matrix_registry=matrix.registry,
                          matrix_path=None)
    release = _release(request, skopeo)
    build_id, entries = release.build_id, release.images
    source = request.source_registry or release.registry or request.matrix_registry
    product = release_product(request, release)
    if not source:
        raise InputError("the build report does not record the registry the build pushed "
                         "to: name it, or give the matrix the build was made with",
                         file=release.path)
    # Fields of the report: never named after an option.
    if build_id is None:
        raise InputError('the build report has no "build_id"', file=release.path)
    try:
        check_build_id(build_id)
    except InputError as exc:
        raise InputError(f'"build_id": {exc.message}', file=release.path) from None
    if unreleased(build_id) and not request.allow_unreleased_build_id:
        raise InputError(f"build id {build_id} is a development or pull-request build, not "
                         "a release: promote a CI build of the main branch, or say it is "
                         "meant", file=release.path, field="allow_unreleased_build_id")
    if not entries:
        raise InputError("the build report lists no images", file=release.path)
    if request.manifest is not None and not request.dry_run:
        # Before the copies: a release must not end without its manifest.
        build_report.check_writable(request.manifest, field="manifest", room=MANIFEST_ROOM)
    problems, copies = [], []
    tags = release_tags(product, build_id)
    for entry in entries:
        path = below(entry.reference, source) if entry.reference else None
        if entry.status != "ok":
            problems.append(f"{entry.key} is {entry.status or 'without a status'} in the "
                            "report, not ok")
        elif not entry.digest or not entry.reference:
            problems.append(f"{entry.key} has no pushed digest in the report")
        elif path is None:
            problems.append(f"{entry.key}: {entry.reference} is not below "
                            f"{source}")
        else:
            repository = repository_of(entry.reference)
            for tag in tags:
                copies.append(Copy(key=entry.key, source=f"{repository}@{entry.digest}",
                                   dest=f"{to}/{path}:{tag}", digest=entry.digest))
    if problems:
        raise InputError("refusing to promote: " + "; ".join(problems), file=release.path)
    first: dict[str, Copy] = {}
    for item in copies:
        other = first.setdefault(item.dest, item)
        if other.key != item.key:
            raise InputError(f"refusing to promote: {other.key} and {item.key} would both be "
                             f"{item.dest}", file=release.path)
    return build_id, entries, copies, tags, product


def promote(request: PromoteRequest, runner: Optional[Runner] = None,
            on_event: Optional[OnEvent] = None, probe: Optional[Probe] = None,
            check: Optional[RegistryCheck] = None) -> PromoteResult:
    """Check the registries answer (CHECK), the sources, then every destination tag (JOBS
    at once: a rerun with nothing new costs one look per tag), then copy each image once
    and give it its other tags."""
    skopeo = Skopeo(runner)
    emit = on_event or (lambda event: None)
    build_id, entries, copies, tags, product = _plan(request, skopeo)
    if check is not None:
        check([str(e.reference) for e in entries] + [c.dest for c in copies],
              request.tls_verify, request.authfile, request.retry)

    def digest(pair: tuple[str, str]) -> Optional[str]:
        ref, key = pair

        def on_retry(n: int, wait: float, why: str) -> None:
            emit(Event(key, "retry", ref, f"{why} (retry {n} in {wait:g} s)"))

        quick = with_retries(lambda: probe(f"docker://{ref}", request.tls_verify),
                             request.retry, on_retry) if probe else UNKNOWN
        if quick is not UNKNOWN:
            return quick if isinstance(quick, str) else None
        return with_retries(
            lambda: skopeo.manifest_digest(f"docker://{ref}", tls_verify=request.tls_verify,
                                           authfile=request.authfile),
            request.retry, on_retry)

    # The source must still hold what the report says, for every image, before any copy
    # (_plan checked each has a reference).
    found = each(digest, [(str(e.reference), e.key) for e in entries], request.jobs,
                 first_alone=True)
    moved = [f"{entry.key}: {entry.reference} is now {now or 'gone'}, the report says "
             f"{entry.digest}" for entry, now in zip(entries, found) if now != entry.digest]
    if moved:
        raise InputError("refusing to promote, the source changed since the build: " +
                         "; ".join(moved), field="report")
    there = each(digest, [(c.dest, c.key) for c in copies], request.jobs, first_alone=True)
    immutable = f":{tags[0]}"
    for item, now in zip(copies, there):
        if item.dest.endswith(immutable) and now is not None and now != item.digest:
            raise CheckFailed(f"refusing to promote: {item.dest} already holds {now}, not "
                              f"{item.digest} ({item.key}): a release tag never changes")
    number = {item: n for n, item in enumerate(copies, 1)}
    skipped = [c for c, now in zip(copies, there) if now == c.digest]
    for item in skipped:
        emit(Event(item.key, "skipped", item.dest, index=number[item], total=len(copies)))
    missing: dict[str, list[Copy]] = {}
    for item, now in zip(copies, there):
        if now != item.digest:
            missing.setdefault(item.key, []).append(item)
    if request.signer is not None:  # decrypted while the above ran; refused: exit 2
        request.signer.ready()
    if request.require_verdict_by is not None:  # before any copy
        require_verdicts([c.source for c in copies], request.require_verdict_by,
                         tls_verify=request.tls_verify, authfile=request.authfile,
                         retry=request.retry)
    if request.signer is not None and not request.dry_run:  # before any copy
        judged = {e.key: judged_at_build for e in entries
                  if (judged_at_build := e.verdicts)}
        verdicts = judge_promoted(copies, tls_verify=request.tls_verify, runner=runner,
                                  jobs=request.jobs, judged=judged)
    if request.dry_run:
        for item in (c for group in missing.values() for c in group):
            emit(Event(item.key, "planned", item.dest, index=number[item],
                       total=len(copies)))
        return PromoteResult(build_id=build_id, planned=tuple(copies), copied=(),
                             skipped=tuple(skipped), dry_run=True, product=product)
    present = {c.key for c in skipped}
    signed: list[SigningResult] = []
    signing_hooks = PromoteSigning(
        copies, request.signer, build_id, verdicts, tls_verify=request.tls_verify,
        authfile=request.authfile, retry=request.retry) if request.signer is not None else None
    looked: dict[str, Optional[str]] = {c.dest: c.digest for c in skipped}
    recorded = {str(e.digest): e.platforms for e in entries}

    def copy(item: Copy, source: str) -> None:
        emit(Event(item.key, "copying", item.dest, index=number[item], total=len(copies)))
        with_retries(
            lambda: skopeo.copy_all(source, f"docker://{item.dest}",
                                    tls_verify=request.tls_verify, authfile=request.authfile),
            request.retry,
            lambda n, wait, why: emit(Event(item.key, "retry", item.dest,
                                            f"{why} (retry {n} in {wait:g} s)")))
        emit(Event(item.key, "copied", item.dest, index=number[item], total=len(copies)))

    def release_copies(key: str) -> None:
        """Copy one image's missing tags."""
        # One copy of the image; every further tag is a copy from the destination
        # repository itself, where every blob is already there: skopeo checks them and
        # writes the manifest under the new tag (a tenth of a second, whatever the size).
        for nth, item in enumerate(missing.get(key, [])):
            if nth or item.key in present:
                copy(item, f"docker://{repository_of(item.dest)}@{item.digest}")
            else:
                copy(item, f"docker://{item.source}")

    def check_and_sign(key: str) -> list[Served]:
        """Read every tag of one image back and sign and attest it only when each tag
        serves the digest sent: a signature binds what the destination serves, never what
        promote believes it copied. Nothing is reported released that was not read back:
        every tag, and the image by its digest, as the destination serves them now."""
        group = by_key[key]
        served = read_back([(c.dest, c.digest) for c in group], skopeo,
                           tls_verify=request.tls_verify, authfile=request.authfile,
                           retry=request.retry, jobs=1, probe=probe, looked=looked,
                           platforms=recorded)
        # Every image, wholly skipped ones too: a rerun completes what a refusal left.
        if signing_hooks is not None and not any(s.problem for s in served):
            signed.append(signing_hooks.sign(group, {s.digest: s.manifest for s in served}))
        return served

    by_key: dict[str, list[Copy]] = {}
    for item in copies:
        by_key.setdefault(item.key, []).append(item)
    # The images to copy first, then those wholly there (only read back and signed).
    order = [*missing, *(key for key in by_key if key not in missing)]
    # An image's read-back and signing run beside the copies, not in a copy's place: the
    # next image starts copying as soon as the copies of one are made.
    with ThreadPoolExecutor(max_workers=request.jobs) as after:
        def copied(key: str) -> Future[list[Served]]:
            if signing_hooks is not None and len(missing.get(key, [])) == len(by_key[key]):
                # Released anew: its unsigned blobs go up while it copies.
                after.submit(signing_hooks.prepare, key)
            release_copies(key)
            return after.submit(check_and_sign, key)

        pending = each(copied, order, request.jobs)
        served_of = {s.dest: s for future in pending for s in future.result()}
    served = [served_of[c.dest] for c in copies]
    wrong = [(c, s) for c, s in zip(copies, served) if s.problem]
    for item, bad in wrong:
        emit(Event(item.key, "failed", item.dest, bad.problem))
    if wrong:
        raise CheckFailed("the destination does not serve what was sent: " +
                          "; ".join(bad.problem for _, bad in wrong))
    signing = None
    if signing_hooks is not None:
        signing = SigningResult(sum(s.signatures for s in signed),
                                sum(s.attestations for s in signed))
    result = PromoteResult(
        build_id=build_id, planned=tuple(copies),
        copied=tuple(c for group in missing.values() for c in group),
        skipped=tuple(skipped),
        dry_run=False, product=product, signing=signing,
        released=tuple(Released(c.key, s.dest, s.digest, s.platforms)
                       for c, s in zip(copies, served)))
    if request.manifest is not None:
        from ..fsutil import write_atomic

        write_atomic(request.manifest, manifest_text(result))
    return result


MANIFEST_SCHEMA = 1
# What must fit where the manifest goes before the copies start (a full disk takes the
# empty file the check makes): a release manifest of a hundred images.
MANIFEST_ROOM = 64 * 1024


def release_manifest(result: PromoteResult) -> dict[str, Any]:
    """The release manifest (`promote --json`, `--manifest FILE`): the product, version and
    build id, and every released reference with its digest and platforms, as read back."""
    product = result.product
    return {
        "schema": MANIFEST_SCHEMA,
        "product": product.name if product else None,
        "version": product.version if product else None,
        "build_id": result.build_id,
        "dry_run": result.dry_run,
        "images": [{"key": r.key, "reference": r.reference, "digest": r.digest,
                    "pull": f"{repository_of(r.reference)}@{r.digest}",
                    "platforms": list(r.platforms)} for r in result.released],
        "planned": [{"key": c.key, "reference": c.dest, "digest": c.digest,
                     "present": c in result.skipped} for c in result.planned]
        if result.dry_run else [],
    }


def is_release_manifest(path: str) -> bool:
    """Whether PATH holds a release manifest (release_manifest), not a build report."""
    import json

    try:
        with open(path, encoding="utf-8") as stream:
            document = json.load(stream)
    except (OSError, ValueError):
        return False  # the build report's reader names what is wrong
    return isinstance(document, dict) and "pull" in next(iter(
        x for x in document.get("images") or [{}] if isinstance(x, dict)), {})


def read_release_manifest(path: str) -> build_report.Release:
    """The released references of a release manifest, as a build report's images (each
    "ok" at the digest it was read back with); InputError naming the field otherwise, and
    for a dry run's, which released nothing."""
    import json

    try:
        with open(path, encoding="utf-8") as stream:
            document = json.load(stream)
    except (OSError, ValueError) as exc:
        raise InputError(f"not a release manifest ({exc})", file=path) from None
    if not isinstance(document, dict) or document.get("schema") != MANIFEST_SCHEMA \
            or not isinstance(document.get("images"), list):
        raise InputError(f"not a release manifest of schema {MANIFEST_SCHEMA}", file=path)
    if document.get("dry_run"):
        raise InputError("a dry run's manifest: nothing was released", file=path,
                         field="dry_run")
    entries = []
    for index, item in enumerate(document["images"]):
        fields = [item.get(name) if isinstance(item, dict) else None
                  for name in ("key", "reference", "digest")]
        if not all(isinstance(x, str) and x for x in fields):
            raise InputError("each image needs \"key\", \"reference\" and \"digest\"",
                             file=path, field=f"images[{index}]")
        key, reference, digest = (str(x) for x in fields)
        kind, _, name = key.partition("/")
        entries.append(build_report.ReportEntry(name=name, kind=kind, key=key,
                                                reference=reference, status="ok",
                                                digest=digest, build_duration=None))
    build_id = document.get("build_id")
    return build_report.Release(build_id if isinstance(build_id, str) else None, None,
                                entries, None, path)


def manifest_text(result: PromoteResult) -> str:
    import json

    return json.dumps(release_manifest(result), indent=2) + "\n"
