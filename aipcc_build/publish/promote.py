"""promote: copy the images a build report marks ok, by digest and with every platform, to
the release repositories, tagged `{version}-{build_id}` and the moving tags of the product
the report records (a matrix given too must be of its version).

Everything is checked before anything is copied: an image the report does not mark ok, or
whose digest in the source registry is no longer the report's, refuses the whole promotion.
A tag the destination already holds at the same digest is not copied again; tags are never
deleted. The `{version}-{build_id}` tag is immutable: when the destination holds it at
another digest (the build id was rebuilt), or when two images of the report would land on
one destination tag, nothing is copied.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

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
from .release_signing import SigningResult, judge_promoted, sign_promoted
from .signing import Signer
from .transfer import Copy, Event, OnEvent, Probe, RegistryCheck, each, no_credentials
from .verify import require_verdicts


@dataclass(frozen=True)
class PromoteRequest:
    report: str  # build report path
    to: str  # HOST/NAMESPACE of the release repositories
    # The registry the build pushed to; None: the one the report records, else the matrix's.
    source_registry: Optional[str]
    # The product of a matrix given with the report: it must be the report's (its version
    # is in every tag). None: the report's alone.
    product: Optional[Product] = None
    matrix_registry: str = ""  # of that matrix: "" when none was given
    # A matrix the user named with the report: its product and registry stand for the two
    # fields above (read when the plan is made).
    matrix_path: Optional[str] = None
    dry_run: bool = False
    tls_verify: bool = True
    authfile: Optional[str] = None
    retry: Retry = field(default_factory=Retry)
    jobs: int = COPY_JOBS  # looks and images copied at once
    # Sign and attest what is released (publish/release_signing): a loaded private key.
    signer: Optional[Signer] = None
    # The public key (a PEM file) whose passing verdict attestation every image must carry
    # in the source before anything is copied (publish/verify.require_verdicts).
    require_verdict_by: Optional[str] = None


@dataclass(frozen=True)
class PromoteResult:
    build_id: str
    planned: tuple[Copy, ...]  # every (image, tag)
    copied: tuple[Copy, ...]  # what this run copied (nothing on a dry run)
    skipped: tuple[Copy, ...]  # already at the destination with the same digest
    dry_run: bool
    signing: Optional[SigningResult] = None  # when signed and attested


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
                         "the build was made with", file=request.report)
    return product


def planned_copies(request: PromoteRequest) -> tuple[str, list[Copy]]:
    """(build id, the copies): refuses (InputError naming every image) an image not ok,
    without a digest, or outside the source registry. Reads nothing but the report."""
    build_id, _, copies, _ = _plan(request)
    return build_id, copies


def _plan(request: PromoteRequest) -> tuple[str, list[ReportEntry], list[Copy], list[str]]:
    """(build id, the report's images, the copies, the tags), from one read of the
    report."""
    no_credentials(request.to)
    if request.matrix_path is not None:
        from ..matrix import load

        matrix = load(request.matrix_path)
        request = replace(request, product=matrix.product, matrix_registry=matrix.registry,
                          matrix_path=None)
    release = build_report.read_release(request.report)
    build_id, entries = release.build_id, release.images
    source = request.source_registry or release.registry or request.matrix_registry
    product = release_product(request, release)
    if not source:
        raise InputError("the build report does not record the registry the build pushed "
                         "to: name it, or give the matrix the build was made with",
                         file=request.report)
    # Fields of the report: never named after an option (promote has no --build-id).
    if build_id is None:
        raise InputError('the build report has no "build_id"', file=request.report)
    try:
        check_build_id(build_id)
    except InputError as exc:
        raise InputError(f'"build_id": {exc.message}', file=request.report) from None
    if not entries:
        raise InputError("the build report lists no images", file=request.report)
    problems, copies = [], []
    tags = release_tags(product, build_id)
    to = request.to.rstrip("/")
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
        raise InputError("refusing to promote: " + "; ".join(problems), file=request.report)
    first: dict[str, Copy] = {}
    for item in copies:
        other = first.setdefault(item.dest, item)
        if other.key != item.key:
            raise InputError(f"refusing to promote: {other.key} and {item.key} would both be "
                             f"{item.dest}", file=request.report)
    return build_id, entries, copies, tags


def promote(request: PromoteRequest, runner: Optional[Runner] = None,
            on_event: Optional[OnEvent] = None, probe: Optional[Probe] = None,
            check: Optional[RegistryCheck] = None) -> PromoteResult:
    """Check the registries answer (CHECK), the sources, then every destination tag (JOBS
    at once: a rerun with nothing new costs one look per tag), then copy each image once
    and give it its other tags."""
    skopeo = Skopeo(runner)
    emit = on_event or (lambda event: None)
    build_id, entries, copies, tags = _plan(request)
    if check is not None:
        check([str(e.reference) for e in entries] + [c.dest for c in copies],
              request.tls_verify, request.authfile)

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
                         "; ".join(moved), file=request.report)
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
    if request.require_verdict_by is not None:  # before any copy
        require_verdicts([c.source for c in copies], request.require_verdict_by,
                         tls_verify=request.tls_verify, authfile=request.authfile,
                         retry=request.retry)
    if request.signer is not None and not request.dry_run:  # before any copy
        verdicts = judge_promoted(copies, tls_verify=request.tls_verify, runner=runner,
                                  jobs=request.jobs)
    if request.dry_run:
        for item in (c for group in missing.values() for c in group):
            emit(Event(item.key, "planned", item.dest, index=number[item],
                       total=len(copies)))
        return PromoteResult(build_id=build_id, planned=tuple(copies), copied=(),
                             skipped=tuple(skipped), dry_run=True)
    present = {c.key for c in skipped}

    def copy(item: Copy, source: str) -> None:
        emit(Event(item.key, "copying", item.dest, index=number[item], total=len(copies)))
        with_retries(
            lambda: skopeo.copy_all(source, f"docker://{item.dest}",
                                    tls_verify=request.tls_verify, authfile=request.authfile),
            request.retry,
            lambda n, wait, why: emit(Event(item.key, "retry", item.dest,
                                            f"{why} (retry {n} in {wait:g} s)")))
        emit(Event(item.key, "copied", item.dest, index=number[item], total=len(copies)))

    def publish(group: list[Copy]) -> list[Copy]:
        # One copy of the image; every further tag is a copy from the destination
        # repository itself, where every blob is already there: skopeo checks them and
        # writes the manifest under the new tag (a tenth of a second, whatever the size).
        for nth, item in enumerate(group):
            if nth or item.key in present:
                copy(item, f"docker://{repository_of(item.dest)}@{item.digest}")
            else:
                copy(item, f"docker://{item.source}")
        return group

    done = each(publish, list(missing.values()), request.jobs)
    signing = None
    if request.signer is not None:  # every copy, skipped ones too: a rerun completes it
        signing = sign_promoted(copies, request.signer, build_id, verdicts,
                                tls_verify=request.tls_verify, authfile=request.authfile,
                                retry=request.retry, jobs=request.jobs)
    return PromoteResult(build_id=build_id, planned=tuple(copies),
                         copied=tuple(c for group in done for c in group),
                         skipped=tuple(skipped), dry_run=False, signing=signing)
