"""mirror: copy every image of a release, by digest and with every platform, to another
registry, or into one OCI layout (`dir:PATH`) or archive (`oci-archive:FILE`) for a
disconnected site, and from such a layout or archive into that site's registry.

Resumable: an image the destination already holds at the same digest is skipped, so a run
killed halfway finishes on the next one. Connection errors and 5xx answers are retried with
capped exponential backoff; an image that still fails is reported failed and the others go
on. A run into a registry writes an ImageDigestMirrorSet and a registries.conf snippet
for the repositories it mirrored (none when it mirrored nothing).

`mirror_release` picks the images: out of a layout or archive a previous run wrote, out of
a build report (its references and digests; a matrix given too must be the one the build
was made with), or the matrix's images of a build id, pinned to their digests now.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..errors import CheckFailed, InputError, ToolError, quoted
from ..image_reference import below, repository_of, tag_of
from ..tools.registry_http import UNKNOWN
from ..tools.retry import Retry, last_line, with_retries
from ..tools.skopeo import Skopeo
from . import COPY_JOBS, mirror_config, oci_layout
from .image_policy import Place, Trust, carry_trust, write_image_policy
from .transfer import (
    Event,
    OnEvent,
    Probe,
    RegistryCheck,
    each,
    no_credentials,
    read_back,
    release_namespace,
)

if TYPE_CHECKING:
    from ..imagebuild.build_report import ReportEntry
    from ..matrix import Filters
    from ..tools.runner import Runner


@dataclass(frozen=True)
class Image:
    """One image to mirror: KEY names it; PATH:TAG is its name below the source registry."""

    key: str
    path: str
    tag: str
    digest: str
    source: str  # a skopeo reference by digest: docker://REPO@sha256:..., oci:DIR:REF


@dataclass(frozen=True)
class MirrorRequest:
    images: tuple[Image, ...]
    to: str  # docker://HOST/NS, dir:PATH or oci-archive:FILE
    source_registry: str  # the registry the images are named under (for the mirror config)
    out: str = "."  # where the mirror config goes
    tls_verify: bool = True
    authfile: Optional[str] = None
    retry: Retry = field(default_factory=Retry)
    jobs: int = COPY_JOBS  # images copied at once into a registry (a layout takes one at a time)
    # Signatures and attestations carried with each image (registry to registry), and the
    # ClusterImagePolicy naming this public key (a PEM file) written beside the IDMS.
    trust: Trust = field(default_factory=Trust)


@dataclass(frozen=True)
class Outcome:
    image: Image
    dest: str
    status: str  # copied, skipped, failed
    message: str = ""


@dataclass(frozen=True)
class MirrorResult:
    outcomes: tuple[Outcome, ...]
    written: tuple[str, ...]  # archive, mirror config

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]


def destination(to: str) -> tuple[str, str]:
    """(transport, location) of a --to or --from value; InputError on anything else."""
    no_credentials(to)
    for transport in ("oci-archive:", "dir:"):
        if to.startswith(transport) and len(to) > len(transport):
            return transport.rstrip(":/"), to[len(transport):].rstrip("/")
    try:
        return "docker", release_namespace(to)
    except InputError:
        raise InputError(f"{quoted(to, always=True)} is not HOST/NAMESPACE (or "
                         "docker://HOST/NAMESPACE), oci-archive:FILE or dir:PATH",
                         field="to") from None


def images_from_report(entries: Sequence[ReportEntry], source_registry: str) -> list[Image]:
    """The ok images of a build report; InputError on an image outside SOURCE_REGISTRY.
    Images not ok are not part of the release."""
    images = []
    for entry in entries:
        key, reference, digest, status = entry.key, entry.reference, entry.digest, entry.status
        if status != "ok" or not digest or not reference:
            continue
        path, tag = below(reference, source_registry), tag_of(reference)
        if path is None or tag is None:
            raise InputError(f"{key}: {reference} is not REPOSITORY:TAG below "
                             f"{source_registry}", field="registry")
        images.append(Image(key, path, tag, digest,
                            f"docker://{repository_of(reference)}@{digest}"))
    return images


def images_from_references(references: Sequence[tuple[str, str]], source_registry: str,
                           skopeo: Skopeo, tls_verify: bool = True,
                           authfile: Optional[str] = None) -> list[Image]:
    """(key, reference) pairs of the matrix, pinned to the digest each tag has now."""
    images = []
    for key, reference in references:
        digest = skopeo.manifest_digest(f"docker://{reference}", tls_verify=tls_verify,
                                        authfile=authfile)
        path, tag = below(reference, source_registry), tag_of(reference)
        if digest is None:
            raise InputError(f"{key}: {reference} does not exist", field="build_id")
        assert path is not None and tag is not None
        images.append(Image(key, path, tag, digest,
                            f"docker://{repository_of(reference)}@{digest}"))
    return images


def images_from_layout(source: str, signed: bool = False
                       ) -> tuple[list[Image], str, Optional[Path]]:
    """The images of a dir: layout or oci-archive (unpacked into a temporary directory,
    returned third for removal) and the registry they came from; SIGNED: each must carry its
    signature (a ClusterImagePolicy will require it), else the source is refused."""
    transport, location = destination(source)
    if transport == "docker":
        raise InputError("mirror from a registry takes a build report or the matrix",
                         field="source")
    path, temporary = Path(location), None
    if transport == "oci-archive":
        if not path.is_file():
            raise InputError("no such archive", file=location, field="source")
        import tempfile

        temporary = Path(tempfile.mkdtemp(prefix="aipcc-mirror-"))
    try:
        if temporary is not None:
            oci_layout.unpack(path, temporary)
            path = temporary
        elif not (path / "index.json").is_file():
            raise InputError("not an OCI layout (no index.json)", file=location,
                             field="source")
        registry = oci_layout.source_registry(path)
        if registry is None:
            raise InputError(f"no {oci_layout.META}: not written by aipcc-build mirror",
                             file=location, field="source")
        missing = oci_layout.unsigned(path) if signed else []
        if missing:
            raise InputError(f"no signature (no PATH:sha256-<hex>.sig ref) for "
                             f"{', '.join(missing)}: the ClusterImagePolicy --key writes "
                             "would make the site refuse the pull", file=location,
                             field="key")
        images = []
        for ref, digest in sorted(oci_layout.refs(path).items()):
            name, _, tag = ref.rpartition(":")
            images.append(Image(key=name, path=name, tag=tag, digest=digest,
                                source=f"oci:{path}:{ref}"))
    except BaseException:
        if temporary is not None:  # refused: the caller never gets it to remove
            oci_layout.remove(temporary)
        raise
    return images, registry, temporary


@dataclass(frozen=True)
class MirrorRelease:
    """One `mirror` run: where the images come from (exactly one of LAYOUT, REPORTS and
    BUILD_ID) and where they go."""

    to: str  # docker://HOST/NS, dir:PATH or oci-archive:FILE
    matrix_path: str
    # The user named the matrix: a build report's images are checked against it. Otherwise
    # it is read only when needed (BUILD_ID, FILTERS), and checked all the same.
    matrix_named: bool = False
    layout: Optional[str] = None  # dir:PATH or oci-archive:FILE a previous mirror wrote
    # Build reports (files or directories of them, one per CI job): their ok images.
    reports: tuple[str, ...] = ()
    build_id: Optional[str] = None  # the matrix's images of this build
    filters: Optional[Filters] = None  # None: every image
    registry: Optional[str] = None  # the registry the build pushed to, if not recorded
    out: str = "."
    tls_verify: bool = True
    authfile: Optional[str] = None
    retry: Retry = field(default_factory=Retry)
    jobs: int = COPY_JOBS
    trust: Trust = field(default_factory=Trust)


def mirror_release(request: MirrorRelease, runner: Optional[Runner] = None,
                   on_event: Optional[OnEvent] = None,
                   sleep: Callable[[float], None] = time.sleep,
                   probe: Optional[Probe] = None,
                   check: Optional[RegistryCheck] = None) -> MirrorResult:
    """Mirror the images REQUEST names; checks every input, and that the registries answer
    (CHECK), before the first copy."""
    given = [x for x in (request.layout, request.reports or None, request.build_id)
             if x is not None]
    if len(given) != 1:
        raise InputError("mirror takes one source: a layout or archive, a build report, or a "
                         "build id", field="source")
    _check_policy_source(request)
    destination(request.to)
    temporary = None
    try:
        if request.layout is not None:
            images, source_registry, temporary = images_from_layout(
                request.layout, signed=request.trust.policy_key is not None)
        elif request.reports:
            images, source_registry = _from_report(request, request.reports)
        else:
            assert request.build_id is not None
            images, source_registry = _from_build(request, request.build_id, runner, check)
            check = None  # asked before the tags were pinned
        return mirror(MirrorRequest(images=tuple(images), to=request.to,
                                    source_registry=source_registry, out=request.out,
                                    tls_verify=request.tls_verify, authfile=request.authfile,
                                    retry=request.retry, jobs=request.jobs,
                                    trust=request.trust),
                      runner, on_event, sleep, probe, check)
    finally:
        if temporary is not None:
            oci_layout.remove(temporary)


def _check_policy_source(request: MirrorRelease) -> None:
    """A ClusterImagePolicy requires the release's signatures, which only the images of a
    release manifest carry (promote signs what it releases): for a build report's or a build
    id's images, never signed, it would make the site refuse every pull. A layout or archive
    is what a mirror of either wrote: it keeps the signatures it was given, each image's
    checked once the layout is read (images_from_layout)."""
    from .promote import is_release_manifest

    if request.trust.policy_key is None or request.layout is not None:
        return
    if len(request.reports) == 1 and is_release_manifest(request.reports[0]):
        return
    raise InputError("needs a release manifest (promote writes it) as the source: the "
                     "images of a build report or a build id were never signed, and a "
                     "ClusterImagePolicy requiring signatures would refuse their pulls",
                     field="key")


def _from_report(request: MirrorRelease, paths: Sequence[str]) -> tuple[list[Image], str]:
    """The report's ok images (those the filters pick), under the registry the build
    pushed to; the matrix, read once when named or needed, must be the build's."""
    from ..imagebuild import build_report
    from .promote import is_release_manifest, read_release_manifest

    manifests = [path for path in paths if is_release_manifest(path)]
    if manifests and len(paths) > 1:
        raise InputError("a release manifest is mirrored alone, not joined with other "
                         "reports", file=manifests[0], field="report")
    release = read_release_manifest(manifests[0]) if manifests \
        else build_report.read_releases(paths)
    entries = release.images
    matrix = None
    if request.matrix_named or request.filters is not None:
        from ..matrix import EVERYTHING, expand, load

        matrix = load(request.matrix_path)
        release.check_matrix(matrix.product.version, matrix_path=matrix.path)
        if request.filters is not None and request.filters != EVERYTHING:
            # The filters pick the report's images by key.
            keys = {s.key for s in expand(matrix, build_id="any", registry=request.registry,
                                          filters=request.filters)}
            entries = [entry for entry in entries if entry.key in keys]
    source = request.registry or release.registry or (matrix.registry if matrix else None)
    if source is None and manifests:
        # The released references' registry host: each keeps its path below it.
        hosts = {str(e.reference).partition("/")[0] for e in entries}
        source = hosts.pop() if len(hosts) == 1 else None
    if source is None:
        raise InputError("the build report does not record the registry the build pushed "
                         "to: name it, or give the matrix the build was made with",
                         file=release.path)
    return images_from_report(entries, source), source


def _from_build(request: MirrorRelease, build_id: str, runner: Optional[Runner],
                check: Optional[RegistryCheck]) -> tuple[list[Image], str]:
    """The matrix's images of BUILD_ID, pinned to the digest each tag has now."""
    from ..matrix import EVERYTHING, expand, load

    matrix = load(request.matrix_path)
    specs = expand(matrix, build_id=build_id, registry=request.registry,
                   filters=request.filters or EVERYTHING)
    source = request.registry or matrix.registry
    if check is not None:
        check([s.reference for s in specs] + _destination_refs(request.to),
              request.tls_verify, request.authfile, request.retry)
    return images_from_references([(s.key, s.reference) for s in specs], source,
                                  Skopeo(runner), tls_verify=request.tls_verify,
                                  authfile=request.authfile), source


def mirror(request: MirrorRequest, runner: Optional[Runner] = None,
           on_event: Optional[OnEvent] = None,
           sleep: Callable[[float], None] = time.sleep,
           probe: Optional[Probe] = None,
           check: Optional[RegistryCheck] = None) -> MirrorResult:
    transport, location = destination(request.to)
    with contextlib.ExitStack() as held:
        partial = None
        if transport == "oci-archive" and oci_layout.is_stream(Path(location)):
            # A FIFO, a device, /dev/stdout: streamed into, nothing to resume; the layout
            # is built in a temporary directory, not beside it (FILE.partial in /dev).
            import tempfile

            partial = Path(tempfile.mkdtemp(prefix="aipcc-mirror-"))
            held.callback(oci_layout.remove, partial)
        return _mirror(request, runner, on_event, sleep, probe, check, partial, held)


def _mirror(request: MirrorRequest, runner: Optional[Runner], on_event: Optional[OnEvent],
            sleep: Callable[[float], None], probe: Optional[Probe],
            check: Optional[RegistryCheck], partial: Optional[Path],
            held: contextlib.ExitStack) -> MirrorResult:
    """`mirror`; an archive's layout built in PARTIAL (else FILE.partial beside it), the
    layout written locked until HELD closes."""
    transport, location = destination(request.to)
    skopeo = Skopeo(runner)
    if check is not None:
        sources = [i.source[len("docker://"):] for i in request.images
                   if i.source.startswith("docker://")]
        if request.images and (sources or transport == "docker"):
            check(sources + _destination_refs(request.to), request.tls_verify,
                  request.authfile, request.retry)
    emit = on_event or (lambda event: None)
    total = len(request.images)
    archive: Optional[Path] = None
    if transport == "docker":
        target, present = f"docker://{location}", None
        mirror_config.check_writable(Path(request.out))
    else:
        work = Path(location)
        present = {}
        if transport == "oci-archive":
            archive, work = work, partial or Path(location + ".partial")
            oci_layout.check_destination(work)
            if not work.exists():
                present = oci_layout.archive_refs(archive)
                wanted = {f"{i.path}:{i.tag}": i.digest for i in request.images}
                if present and all(present.get(r) == d for r, d in wanted.items()) and \
                        not oci_layout.archive_damaged(archive, sorted(set(wanted.values()))):
                    # Nothing new, every blob read back: the archive stays untouched.
                    outcomes = [Outcome(i, f"{request.to}:{i.path}:{i.tag}", "skipped")
                                for i in request.images]
                    for n, o in enumerate(outcomes, 1):
                        emit(Event(o.image.key, "skipped", o.dest, index=n, total=total))
                    return MirrorResult(tuple(outcomes), ())
                if present:  # images to add, or damaged blobs: completed as a layout is
                    oci_layout.unpack(archive, work)
        oci_layout.check_destination(work)
        work.mkdir(parents=True, exist_ok=True)
        held.enter_context(oci_layout.locked(work))
        present = oci_layout.refs(work)
        target = f"oci:{work}"

    def one(index: int, image: Image) -> Outcome:
        if transport == "docker":
            dest = f"{target}/{image.path}:{image.tag}"
        else:
            dest = f"{target}:{image.path}:{image.tag}"

        def on_retry(attempt: int, wait: float, why: str) -> None:
            emit(Event(image.key, "retry", dest, f"{why} (attempt {attempt + 1} of "
                       f"{request.retry.attempts} in {wait:g} s)", index, total))

        try:
            quick = probed.get(index, UNKNOWN)
            if quick is not UNKNOWN:
                found = quick if isinstance(quick, str) else None
            elif present is None:
                found = with_retries(lambda: skopeo.manifest_digest(
                    dest, tls_verify=request.tls_verify, authfile=request.authfile),
                    request.retry, on_retry, sleep)
            else:
                found = present.get(f"{image.path}:{image.tag}")
                damaged = found == image.digest and \
                    bool(oci_layout.damaged_blobs(work, image.digest))
                if damaged:  # copied again: the ref stays, its blobs replaced atomically
                    found = None

            def copy(to: str) -> None:
                with_retries(lambda: skopeo.copy_all(
                    image.source, to, tls_verify=request.tls_verify,
                    authfile=request.authfile), request.retry, on_retry, sleep)

            if found != image.digest:
                emit(Event(image.key, "copying", dest, index=index, total=total))
                if transport == "docker":
                    copy(dest)
                else:
                    _copy_into_layout(image, work, copy, damaged)
            if request.trust.carry:
                there = Place(f"{location}/{image.path}") if transport == "docker" \
                    else Place(image.path, work)
                carry_trust(_source_place(image), there, image.digest, request.retry,
                            on_retry, request.tls_verify, request.authfile)
            if found == image.digest:
                emit(Event(image.key, "skipped", dest, index=index, total=total))
                return Outcome(image, dest, "skipped")
        except (ToolError, InputError, CheckFailed) as exc:
            why = last_line(exc) if isinstance(exc, ToolError) else str(exc)
            emit(Event(image.key, "failed", dest, why, index, total))
            return Outcome(image, dest, "failed", why)
        emit(Event(image.key, "copied", dest, index=index, total=total))
        return Outcome(image, dest, "copied")

    numbered = list(enumerate(request.images, 1))
    probed: dict[int, object] = {}
    if probe and transport == "docker":
        # The quick looks first, all of them: a rerun with nothing new ends here.
        def look(image: Image) -> object:
            ref = f"{target}/{image.path}:{image.tag}"
            try:
                return with_retries(lambda: probe(ref, request.tls_verify), request.retry,
                                    lambda n, wait, why: emit(Event(
                                        image.key, "retry", ref, f"{why} (attempt {n + 1} of "
                                        f"{request.retry.attempts} in {wait:g} s)")), sleep)
            except ToolError:
                return UNKNOWN  # skopeo looks again, and the image fails alone

        looks = each(look, request.images, request.jobs, first_alone=True)
        probed = dict(enumerate(looks, 1))
    # Registries take concurrent pushes; an OCI layout's index.json does not.
    outcomes = each(lambda pair: one(*pair), numbered,
                    request.jobs if transport == "docker" else 1)

    outcomes = _read_back(request, outcomes, transport, target, skopeo, emit, probe, sleep)
    written: list[str] = []
    failed = any(o.status == "failed" for o in outcomes)
    if transport == "docker":
        # Only the repositories the destination now holds: a site told to pull an image
        # from a mirror that does not have it fails its pulls. Every image failed: nothing
        # written.
        mirrors = {f"{request.source_registry}/{o.image.path}": f"{location}/{o.image.path}"
                   for o in outcomes if o.status != "failed"}
        if mirrors or not outcomes:
            written += [str(p) for p in mirror_config.write(
                Path(request.out), mirror_config.resource_name(f"aipcc-{location}"), mirrors)]
        if mirrors and request.trust.policy_key is not None:
            written.append(str(write_image_policy(Path(request.out), location,
                                                  request.trust.policy_key, mirrors)))
    else:
        oci_layout.write_meta(work, request.source_registry)
        if archive is not None and not failed:
            oci_layout.pack(work, archive)
            oci_layout.remove(work)
            written.append(str(archive))
        elif archive is None:
            written.append(str(work))
    return MirrorResult(tuple(outcomes), tuple(written))


def _copy_into_layout(image: Image, layout: Path, copy: Callable[[str], None],
                      damaged: bool = False) -> None:
    """IMAGE copied into LAYOUT through a stage (its index.json is only ever replaced
    whole) and its blobs read back before its ref is set. A blob found there under its
    name with other bytes (DAMAGED: found so before), which skopeo takes without reading,
    is copied again into a stage of its own blobs and put in place of the damaged file in
    one rename (`oci_layout.replace_blobs`); still other bytes, the image fails."""
    name = f"{image.path}:{image.tag}"
    bad: list[str] = []
    for shared in (False,) if damaged else (True, False):
        with oci_layout.staging(layout, shared=shared) as stage:
            copy(f"oci:{stage}:{name}")
            if not shared:
                oci_layout.replace_blobs(stage, layout)
            bad = oci_layout.damaged_blobs(layout, image.digest)
            if not bad:
                oci_layout.adopt(stage, layout, name)
                return
    raise CheckFailed(f"{layout}: {name}: the blobs {', '.join(bad)} do not read back "
                      "with the bytes copied")


def _source_place(image: Image) -> Place:
    """Where IMAGE's signatures are read: its registry repository, or its repository in
    the layout its source (oci:DIR:PATH:TAG) is in."""
    if image.source.startswith("docker://"):
        return Place(repository_of(image.source[len("docker://"):]))
    ref = f":{image.path}:{image.tag}"
    return Place(image.path, Path(image.source[len("oci:"):-len(ref)]))


def _destination_refs(to: str) -> list[str]:
    """The registry of a docker --to, as references the registry check takes."""
    transport, location = destination(to)
    return [f"{location}/x"] if transport == "docker" else []


def _read_back(request: MirrorRequest, outcomes: list[Outcome], transport: str, target: str,
               skopeo: Skopeo, emit: OnEvent, probe: Optional[Probe],
               sleep: Callable[[float], None]) -> list[Outcome]:
    """OUTCOMES with each image the destination does not serve as sent (its tag, its
    digest) failed: the mirror configuration names only what was read back. An image
    skipped was read in this run already (its tag's manifest, hashed): only the copies
    are read again, so a rerun with nothing new still starts no program."""
    if transport == "docker":
        done = [o for o in outcomes if o.status == "copied"]
        served = read_back([(o.dest[len("docker://"):], o.image.digest) for o in done],
                           skopeo, tls_verify=request.tls_verify, authfile=request.authfile,
                           retry=request.retry, jobs=request.jobs, probe=probe, sleep=sleep,
                           with_platforms=False)
        problems = {o.dest: s.problem for o, s in zip(done, served) if s.problem}
    else:
        done = [o for o in outcomes if o.status != "failed"]
        held = oci_layout.refs(Path(target[len("oci:"):]))
        problems = {}
        for o in done:
            now = held.get(f"{o.image.path}:{o.image.tag}")
            if now != o.image.digest:
                problems[o.dest] = f"{o.dest} holds {now or 'nothing'}, not the " \
                                   f"{o.image.digest} sent"
    checked = []
    for outcome in outcomes:
        problem = problems.get(outcome.dest)
        if problem:
            emit(Event(outcome.image.key, "failed", outcome.dest, problem))
            outcome = Outcome(outcome.image, outcome.dest, "failed", problem)
        checked.append(outcome)
    return checked
