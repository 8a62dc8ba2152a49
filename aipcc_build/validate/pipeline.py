"""validate_image: open an image, scan its layers (cached, in parallel), judge each platform."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Optional

from ..errors import AipccError, InputError
from ..imagefs.blobs import LayerJob, TarSplitLayer
from ..imagefs.image import PlatformImage, open_image
from ..records import record, replace
from ..tools.skopeo import TRANSPORTS, Skopeo
from .cache import LayerCache, default_cache_dir
from .gpu_code import coverage_findings, final_device_code
from .index_config import unread_named_files
from .results import (
    OVERSIZED,
    UNREAD,
    VIOLATION,
    DeviceCode,
    Expectation,
    Hazard,
    ImageVerdict,
    LayerScan,
)
from .rootfs import diff_id_findings
from .scan_stack import RPM_DATABASES, RPMDB_READ_LIMIT, read_through_links, stack_of
from .verdict import judge

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing.context import BaseContext

    from ..imagefs.lookup import FileRead
    from ..imagefs.overlay import Stack
    from ..matrix.model import AllowRule, ImageSpec
    from .cache import CacheDir


def expectation_from_spec(spec: ImageSpec) -> tuple[Expectation, tuple[AllowRule, ...]]:
    """What a matrix image must contain, and the allow rules of its accelerator, version, kind."""
    return (Expectation(spec.accelerator, spec.version, spec.variant, source="matrix",
                        index=spec.wheel_index), spec.allow)


def gpu_archs_source(spec: ImageSpec) -> str:
    """Where a matrix image's expected GPU architectures come from, as its coverage
    findings name it."""
    return f"gpu_archs of the matrix's {spec.accelerator} {spec.version} entry"


def gpu_archs_of(spec: ImageSpec) -> tuple[str, ...]:
    """The GPUs a matrix image's device code must run on: its toolkit entry's gpu_archs."""
    from ..toolkit.gpu_archs import BadArch, expected_gpus  # a matrix's run: not a warm start

    declared = spec.toolkit.gpu_archs if spec.toolkit else ()
    try:
        return expected_gpus(declared)
    except BadArch as exc:
        raise InputError(f"{exc}", field=f"accelerators.{spec.accelerator}.versions."
                         "gpu_archs") from None


def _blob_size(job: LayerJob) -> int:
    location = job.location
    if isinstance(location, TarSplitLayer):
        return location.size
    if location.length is not None:
        return location.length
    try:
        return os.path.getsize(location.path)
    except OSError:
        return 0


POOL_THRESHOLD_BYTES = 64 << 20
# Seconds a SIGKILLed scan worker gets to exit (the kernel's work, not the worker's).
KILLED_WORKER_WAIT = 10.0


def _pool_context() -> BaseContext:
    import multiprocessing
    import threading

    # fork starts workers in milliseconds, but forking a process that runs other threads
    # can deadlock the child; callers with threads get the slower, safe forkserver.
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _die_with_parent(parent: int) -> None:
    """Pool initializer: a worker must not outlive the validator (SIGTERM, SIGKILL)."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass
    if parent != -1 and os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _pool(workers: int) -> ProcessPoolExecutor:
    from concurrent.futures import ProcessPoolExecutor

    context = _pool_context()
    # forkserver and spawn workers are children of the server: it exits with us (its pipe
    # closes), and they with it.
    parent = os.getpid() if context.get_start_method() == "fork" else -1
    return ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=_die_with_parent, initargs=(parent,))


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """End POOL now: scans not started are cancelled, running ones killed (their workers
    read layers for seconds; a signal must not wait for them). Returns once every killed
    worker has exited."""
    import time
    from multiprocessing.connection import wait

    # Taken first: shutdown forgets them. (No public way before Python 3.14's
    # terminate_workers.)
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.kill()
    # The executor's own thread waits for the same workers: a join racing it can return
    # before the worker's exit is recorded. A worker's sentinel closes when it exits,
    # whoever reaps it.
    pending = [worker.sentinel for worker in workers]
    deadline = time.monotonic() + KILLED_WORKER_WAIT
    while pending and time.monotonic() < deadline:
        ready = wait(pending, timeout=deadline - time.monotonic())
        pending = [sentinel for sentinel in pending if sentinel not in ready]
    for worker in workers:
        worker.join(timeout=0)  # reaps it, unless the executor's thread did


def scan_layers(jobs: Iterable[LayerJob], cache: LayerCache
                ) -> tuple[dict[str, LayerScan], set[str]]:
    """Scans by digest, and the digests served from the cache.

    Inflating gzip is single-threaded per stream, so layers are scanned in parallel
    processes, the largest first so that the last one to finish is a small one.
    """
    scans: dict[str, LayerScan] = {}
    cached: set[str] = set()
    todo = []
    for job in jobs:
        hit = cache.get(job.digest)
        if hit is not None:
            scans[job.digest] = hit
            cached.add(job.digest)
        else:
            todo.append(job)
    if not todo:
        return scans, cached
    # Imported here: a fully cached run needs neither the inflaters nor a process pool.
    from .layers import scan_layer

    sizes = {job.digest: _blob_size(job) for job in todo}
    todo.sort(key=lambda job: sizes[job.digest], reverse=True)
    # More processes than cores: with few large layers, the last one would otherwise run
    # alone on one core while the others idle.
    workers = min(len(todo), 2 * (os.cpu_count() or 1))
    # Starting a pool costs ~0.2 s: more than scanning a few small layers in this process.
    if workers > 1 and sum(sizes.values()) > POOL_THRESHOLD_BYTES:
        pool = _pool(workers)
        try:
            results = list(pool.map(scan_layer, todo))
        except BaseException:
            _stop_pool(pool)  # a signal (Interrupted) or a failed scan: no more scanning
            raise
        pool.shutdown()
    else:
        results = [scan_layer(job) for job in todo]
    for scan in results:
        cache.put(scan)
        scans[scan.digest] = scan
    return scans, cached


def validate_image(
    ref: str,
    *,
    expect: Optional[Expectation] = None,
    allow: Sequence[AllowRule] = (),
    strict_layers: bool = False,
    platform: Optional[str] = None,
    cache_dir: Optional[CacheDir] = None,
    skopeo: Optional[Skopeo] = None,
    gpu_archs: tuple[str, ...] = (),
    gpu_source: str = "expected",
) -> list[ImageVerdict]:
    """One verdict per platform of REF; its libraries' device code must run on each of
    GPU_ARCHS (which the findings say come from GPU_SOURCE). Raises InputError (or
    ToolError) when REF is unreadable."""
    root = cache_dir or default_cache_dir()
    cache = LayerCache(root)
    with open_image(ref, platform, skopeo,
                    metadata_cache=os.path.join(root, "validate", "containers-storage")
                    ) as opened:
        jobs: dict[str, LayerJob] = {}
        for image in opened.images:
            for layer in image.layers:
                jobs.setdefault(layer.digest,
                                LayerJob(layer.digest, layer.media_type, layer.location))
        scans, cached = scan_layers(jobs.values(), cache)
        verdicts = []
        for image in opened.images:
            image_scans = [scans[layer.digest] for layer in image.layers]
            image_jobs = [jobs[layer.digest] for layer in image.layers]
            stack = stack_of(image_scans)
            read_through = _read_through_links(image, image_scans, stack, image_jobs)
            reads = _read_named_files(image, image_scans, stack, read_through, image_jobs)
            device_code = final_device_code(image_scans, stack)
            verdict = judge(
                ref=ref, image=image, scans=image_scans, stack=stack, expect=expect,
                allow=allow, strict_layers=strict_layers, reads=reads,
                read_through=read_through, rootfs=diff_id_findings(image, image_scans),
                gpu=coverage_findings(device_code, gpu_archs, gpu_source),
                layers_read=opened.layers_read,
                cached_layers=sum(1 for layer in image.layers if layer.digest in cached))
            verdicts.append(replace(verdict, gpu_code=tuple(code for code, _ in device_code),
                                    gpu_archs=gpu_archs))
        return verdicts


def _read_through_links(image: PlatformImage, scans: Sequence[LayerScan], stack: Stack,
                        layers: Sequence[LayerJob]) -> list[LayerScan]:
    """What the files programs read through links hold (`read_through_links`), read now
    from the image's LAYERS; nothing to read in the usual image."""
    linked = read_through_links(image.env, scans, stack)
    if not linked:
        return []
    # Imported here: the usual image never needs this second read.
    from ..imagefs.lookup import read_path
    from .detect import DPKG_STATUS_LIMIT
    from .layers import scan_file

    found = []
    for path in linked:
        limit = RPMDB_READ_LIMIT if path in RPM_DATABASES else DPKG_STATUS_LIMIT
        read = read_path(layers, path, limit)
        if read.data is None or read.layer is None:
            if not read.absent:
                found.append(_unread(path, read, scans, stack))
            continue
        wal = None
        if path in RPM_DATABASES:
            # sqlite replays the write-ahead log beside the name it opens, symlinks
            # resolved: where the read landed.
            log = read_path(layers, f"{read.path}-wal", RPMDB_READ_LIMIT)
            if log.data:
                wal = log.data
            elif not log.absent and log.data is None:
                found.append(_unread(f"{path}-wal", log, scans, stack))
        found.append(scan_file(read.layer, path, read.data, wal))
    return found


def _unread(path: str, read: FileRead, scans: Sequence[LayerScan], stack: Stack
            ) -> LayerScan:
    """A file read through a link (or a device or FIFO at its name) that could not be
    read (larger than the limit, not a regular file, its layer unreadable), as a hazard of
    the layer holding it: the verdict fails it as the scan's own (`judge`) when it is a
    package database."""
    if read.over_limit:
        hazard = Hazard(OVERSIZED, path, f"{read.problem}", severe=False)
    elif read.error is not None:
        hazard = Hazard(UNREAD, path, f"read through a link: {read.error}", severe=True)
    else:
        linked = f"read through a link to {read.path}: " if read.path != path else ""
        hazard = Hazard(UNREAD, path, f"{linked}{read.problem}: not read", severe=False)
    layer = read.layer or _layer_of(read.path, scans, stack)
    return LayerScan(digest=layer, entries=0, hazards=(hazard,))


def _layer_of(path: str, scans: Sequence[LayerScan], stack: Stack) -> str:
    """The digest of the layer the final tree takes PATH from ("" when none)."""
    found = stack.resolve(path)
    return scans[found.layer].digest if found.layer is not None else ""


def _read_named_files(image: PlatformImage, scans: Sequence[LayerScan], stack: Stack,
                      read_through: Sequence[LayerScan], layers: Sequence[LayerJob]
                      ) -> dict[str, FileRead]:
    """The config files the image's environment names that its layer scans did not read,
    read now from its LAYERS; none for an image whose named files are the usual ones."""
    unread = unread_named_files(image, scans, stack, read_through)
    if not unread:
        return {}
    # Imported here: the usual image never needs this second read.
    from ..imagefs.lookup import read_path
    from .detect import SMALL_FILE_LIMIT

    return {path: read_path(layers, path, SMALL_FILE_LIMIT) for path in unread}


@record
class Target:
    """One image to validate, with what it must contain."""

    ref: str
    expect: Optional[Expectation] = None
    allow: tuple[AllowRule, ...] = ()
    name: Optional[str] = None  # the matrix image key, in matrix mode
    only_if_present: bool = False  # matrix mode: an image not found is skipped
    gpu_archs: tuple[str, ...] = ()  # the GPUs its device code must run on
    gpu_source: str = "expected"  # where GPU_ARCHS come from, as findings name it


@record
class Outcome:
    target: Target
    verdicts: tuple[ImageVerdict, ...] = ()
    error: Optional[str] = None  # the image could not be read
    error_field: Optional[str] = None  # the request field that fixes it (tls_verify)
    skipped: bool = False  # not found where the matrix's images were looked for

    @property
    def exit_code(self) -> int:
        if self.error or any(v.verdict == "unreadable" for v in self.verdicts):
            return 2
        return 0 if all(v.ok for v in self.verdicts) else 1

    def problems(self) -> str:
        """Why the image failed, one finding per line, for its build log and report."""
        if self.error:
            return self.error
        return "\n".join(finding.line() for verdict in self.verdicts
                         for finding in verdict.findings
                         if finding.status == VIOLATION)

    def warnings(self) -> tuple[str, ...]:
        """Findings that do not fail the image (layer hygiene, among others), one line each."""
        return tuple(finding.line() for verdict in self.verdicts
                     for finding in verdict.findings if finding.status == "warning")

    def gpu_code(self) -> tuple[DeviceCode, ...]:
        """The device code of every platform's final filesystem, one record per file and
        platform (a file with the same code on two platforms once)."""
        return tuple(dict.fromkeys(code for verdict in self.verdicts
                                   for code in verdict.gpu_code))

    def toolkits(self) -> dict[str, list[str]]:
        """Every toolkit release found, over all platforms: {"cuda": ["12.8"]}."""
        found: dict[str, set[str]] = {}
        for verdict in self.verdicts:
            for toolkit, versions in verdict.toolkits.items():
                found.setdefault(toolkit, set()).update(versions)
        return {name: sorted(versions) for name, versions in found.items()}


def validate_targets(targets: Sequence[Target], *, strict_layers: bool = False,
                     platform: Optional[str] = None, cache_dir: Optional[CacheDir] = None,
                     skopeo: Optional[Skopeo] = None) -> list[Outcome]:
    """Validate each target; an unreadable one is an outcome with an error, not a crash."""
    tool = skopeo or Skopeo()
    outcomes = []
    for target in targets:
        try:
            # A registry that cannot be asked is an error of this image, not a skip.
            if target.only_if_present and not tool.exists(target.ref):
                outcomes.append(Outcome(target, skipped=True))
                continue
            target = replace(target, ref=with_transport(target.ref, tool))
            verdicts = validate_image(target.ref, expect=target.expect, allow=target.allow,
                                      strict_layers=strict_layers, platform=platform,
                                      cache_dir=cache_dir, skopeo=tool,
                                      gpu_archs=target.gpu_archs,
                                      gpu_source=target.gpu_source)
        except AipccError as exc:
            outcomes.append(Outcome(target, error=str(exc), error_field=exc.field))
            continue
        outcomes.append(Outcome(target, tuple(verdicts)))
    return outcomes


def with_transport(ref: str, skopeo: Skopeo) -> str:
    """REF as skopeo takes it. A bare reference (quay.io/ns/name:tag, as the matrix and
    podman print them) is read as podman does: from local storage when the image is there,
    else from its registry; the transport chosen stays in the reference the report shows."""
    if ref.partition(":")[0] in TRANSPORTS:
        return ref
    from ..image_reference import is_reference  # here: a reference with its transport needs none

    if not is_reference(ref):
        return ref
    local = f"containers-storage:{ref}"
    return local if skopeo.exists(local) else f"docker://{ref}"


def validate_built(spec: ImageSpec, image_id: str, *, cache_dir: Optional[CacheDir] = None,
                   skopeo: Optional[Skopeo] = None) -> Outcome:
    """Validate an image just built into local storage (by ID: its tag may be reused)
    against its matrix cell; layers are read in place (else copied uncompressed), never
    recompressed."""
    expect, allow = expectation_from_spec(spec)
    # containers-storage takes a bare image ID; buildah's --iidfile writes "sha256:<hex>".
    bare_id = image_id.split(":", 1)[-1]
    target = Target(f"containers-storage:{bare_id}", expect, allow, name=spec.key,
                    gpu_archs=gpu_archs_of(spec), gpu_source=gpu_archs_source(spec))
    return validate_targets([target], cache_dir=cache_dir, skopeo=skopeo)[0]

