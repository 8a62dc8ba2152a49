"""The compatibility matrix: per image, the driver it needs, the GPUs it runs on, its EOL.

Facts come from `toolkit_facts`; a matrix entry's own `native_driver` and `gpu_archs` override
them. Nothing here prints: results are frozen dataclasses for `compat_report` to format.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from packaging.version import Version

from ..errors import InputError
from ..matrix import Filters, ImageSpec, Product
from ..toolkit.facts import DriverVersion, ToolkitFacts
from ..toolkit.gpu_archs import BadArch, declared_arch, expected_gpus, sort_archs
from ..validate.results import DeviceCode
from . import DEFAULT_WARN_DAYS

if TYPE_CHECKING:
    from ..imagebuild.build_report import Release, ReportEntry
    from ..matrix import Matrix

SUPPORTED = "supported"
EOL_SOON = "eol-soon"
EOL = "eol"


@dataclass(frozen=True)
class Requirements:
    """What one image needs from a node, after matrix overrides."""

    vendor: Optional[str]  # GPU vendor the image needs: "nvidia", "amd", or None (CPU)
    min_driver: Optional[DriverVersion]  # below this the image does not start
    native_driver: Optional[DriverVersion]  # at or above: no minor-version compatibility limits
    archs: tuple[str, ...]  # "sm_90" / "gfx942"; empty for CPU images
    archs_from_matrix: bool  # the matrix entry's gpu_archs replaced the toolkit's list
    native_driver_from_matrix: bool
    missing_facts: tuple[str, ...]  # what the data file does not know about this toolkit


@dataclass(frozen=True)
class CompatRow:
    name: str
    kind: str
    reference: str
    accelerator: str
    version: Optional[str]
    os: str
    variant: str  # FROMAGER_VARIANT
    requirements: Requirements
    eol: Optional[dt.date]
    eol_status: str  # SUPPORTED, EOL_SOON or EOL
    days_to_eol: Optional[int]  # negative once past
    digest: Optional[str]  # from the build report, when one was given
    platforms: tuple[str, ...] = ()  # one instance each under the reference
    # From a build report that recorded it: the GPU code the validator read (SASS, PTX and
    # ROCm targets, the union over its files), and the declared architectures some library
    # with device code has no code for.
    measured_archs: Optional[tuple[str, ...]] = None
    archs_without_code: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuiltImage:
    """One image as a build report records it: the reference the build pushed (or tagged),
    the digest, and the platforms that were built."""

    reference: str
    digest: Optional[str]
    platforms: tuple[str, ...]
    gpu_code: Optional[tuple[DeviceCode, ...]] = None  # None: the report did not record it


@dataclass(frozen=True)
class CompatTable:
    rows: tuple[CompatRow, ...]  # grouped by accelerator, newest version first
    today: dt.date
    warn_days: int
    warnings: tuple[str, ...]
    facts_path: str
    # The product, its version and the build id every reference is tagged with (a build
    # report's when the table is of one)
    product: Optional[Product] = None
    build_id: Optional[str] = None


def eol_status(image: ImageSpec, today: dt.date, warn_days: int = DEFAULT_WARN_DAYS) -> str:
    """SUPPORTED, EOL_SOON (EOL within `warn_days`) or EOL (on or after the EOL date).

    An image without an EOL date (CPU images, or a version with no date yet) is supported.
    """
    eol = image.toolkit.eol if image.toolkit else None
    if eol is None:
        return SUPPORTED
    if today >= eol:
        return EOL
    if (eol - today).days <= warn_days:
        return EOL_SOON
    return SUPPORTED


def requirements(image: ImageSpec, facts: ToolkitFacts) -> Requirements:
    toolkit = image.toolkit
    if toolkit is None:
        return Requirements(None, None, None, (), False, False, ())
    missing = []
    own_driver = DriverVersion.parse(toolkit.native_driver) if toolkit.native_driver else None
    try:
        own_archs = tuple(declared_arch(a) for a in toolkit.gpu_archs)
    except BadArch as err:
        where = toolkit.where
        raise InputError(str(err), file=where.file if where else None,
                         line=where.line if where else None,
                         field=f"accelerators.{image.accelerator}.versions.gpu_archs") from err
    if image.accelerator == "cuda":
        major = facts.cuda_major(toolkit.version)
        release = facts.cuda_release(toolkit.version)
        archs_fact = facts.cuda_architectures_for(toolkit.version)
        if major is None:
            missing.append(f"minimum driver of CUDA {Version(toolkit.version).major}.x")
        if release is None and own_driver is None:
            missing.append(f"driver shipped with CUDA {toolkit.version}")
        if archs_fact is None and not own_archs:
            missing.append(f"architectures of CUDA {toolkit.major_minor}")
        # The matrix's native_driver is NVIDIA's "minimum required driver" of the release:
        # what it needs natively. Below it, down to the major's floor, minor-version compatibility
        # still starts the image (without PTX JIT of newer PTX).
        native = own_driver or (release.driver if release else None)
        floor = major.min_driver if major else None
        min_driver = floor if floor is not None else native
        if native is not None and min_driver is not None and native < min_driver:
            min_driver = native
        fact_archs = tuple(f"sm_{cc.replace('.', '')}" for cc in archs_fact.compute_capabilities) \
            if archs_fact else ()
        return Requirements("nvidia", min_driver, native, own_archs or fact_archs, bool(own_archs),
                            own_driver is not None, tuple(missing))
    if image.accelerator == "rocm":
        rocm = facts.rocm_release(toolkit.version)
        if rocm is None and not own_archs:
            missing.append(f"gfx targets of ROCm {toolkit.major_minor}")
        if rocm is None:
            missing.append(f"supported OS releases of ROCm {toolkit.major_minor}")
        archs = own_archs or (rocm.gfx_targets if rocm else ())
        return Requirements("amd", own_driver, own_driver, archs, bool(own_archs),
                            own_driver is not None, tuple(missing))
    return Requirements(None, own_driver, own_driver, own_archs, bool(own_archs),
                        own_driver is not None, ())


def version_sort_key(image: ImageSpec) -> tuple[object, ...]:
    """Accelerators with versions first, each newest first (numerically: 12.10 > 12.9)."""
    release = Version(image.version).release if image.version else ()
    newest_first = tuple(-part for part in release + (0,) * (3 - len(release)))
    return (image.version is None, image.accelerator, newest_first, image.os, image.kind,
            image.name)


def build_compat_table(
    images: Iterable[ImageSpec],
    facts: ToolkitFacts,
    *,
    today: dt.date,
    warn_days: int = DEFAULT_WARN_DAYS,
    built: Optional[Mapping[str, BuiltImage]] = None,
    product: Optional[Product] = None,
    build_id: Optional[str] = None,
) -> CompatTable:
    """One row per image; with BUILT (by image key, from a build report), each row's
    reference, digest and platforms are the build's."""
    rows = []
    warnings = []
    for image in sorted(images, key=version_sort_key):
        req = requirements(image, facts)
        for fact in req.missing_facts:
            warning = f"{image.accelerator} {image.version}: the data file does not know the {fact}"
            if warning not in warnings:
                warnings.append(warning)
        warnings.extend(w for w in os_warnings(image, facts) if w not in warnings)
        eol = image.toolkit.eol if image.toolkit else None
        build = (built or {}).get(image.key)
        rows.append(CompatRow(
            name=image.name,
            kind=image.kind,
            reference=build.reference if build else image.reference,
            accelerator=image.accelerator,
            version=image.version,
            os=image.os,
            variant=image.variant,
            requirements=req,
            eol=eol,
            eol_status=eol_status(image, today, warn_days),
            days_to_eol=(eol - today).days if eol else None,
            digest=build.digest if build else None,
            platforms=build.platforms if build else image.platforms,
            **_measured(build.gpu_code if build else None, req.archs),
        ))
    return CompatTable(tuple(rows), today, warn_days, tuple(warnings), facts.path, product,
                       build_id)


def _measured(files: Optional[Sequence[DeviceCode]], declared: Sequence[str]
              ) -> dict[str, Any]:
    """The row's measured architectures and the declared ones without code, from FILES."""
    if files is None:
        return {}
    from ..validate.gpu_code import coverage_findings

    try:
        expected = expected_gpus(declared)
    except BadArch:
        expected = ()
    gaps = {f.component or "" for f in coverage_findings([(c, "") for c in files], expected)}
    return {"measured_archs": sort_archs({a for c in files for a in (*c.sass, *c.ptx, *c.gfx)}),
            "archs_without_code": tuple(a for a in expected if a in gaps)}


_RHEL_RE = re.compile(r"^(?:rhel|ubi|el)(\d+)(?:\.(\d+))?")


def os_warnings(image: ImageSpec, facts: ToolkitFacts) -> Sequence[str]:
    """A ROCm image on a RHEL release AMD does not list for that ROCm version."""
    if image.accelerator != "rocm" or not image.version:
        return ()
    rocm = facts.rocm_release(image.version)
    match = _RHEL_RE.match(image.os)
    if rocm is None or match is None:
        return ()
    major, minor = match.groups()
    wanted = f"RHEL {major}.{minor}" if minor is not None else f"RHEL {major}"
    same_major = [r for r in rocm.os_releases if r.startswith(f"RHEL {major}.")]
    if wanted in rocm.os_releases or (minor is None and same_major):
        return ()
    return (f"rocm {image.version} on {image.os}: AMD does not list {wanted} for ROCm "
            f"{rocm.release} (listed: {', '.join(rocm.os_releases)})",)


def eol_findings(table: CompatTable) -> tuple[CompatRow, ...]:
    """Rows past EOL or within the warning window: what `compat --check-eol` fails on."""
    return tuple(row for row in table.rows if row.eol_status != SUPPORTED)


@dataclass(frozen=True)
class MatrixImagesOn:
    """The images of a matrix (FILTERS) as a build id names them, judged on a day."""

    matrix_path: str
    build_id: str
    today: dt.date
    warn_days: int = DEFAULT_WARN_DAYS
    registry: Optional[str] = None
    filters: Optional[Filters] = None  # None: every image


@dataclass(frozen=True)
class CompatRequest(MatrixImagesOn):
    """One compatibility table: the matrix's images, or with REPORT the images that build
    made, as it made them."""

    # Build reports (files, or directories of them): the reports of one build's CI jobs,
    # joined (`build_report.read_releases`).
    report: tuple[str, ...] = ()


def measured_code(entry: ReportEntry) -> Optional[tuple[DeviceCode, ...]]:
    """The device code a build report recorded for an image, over its platforms; None
    when it recorded none (a report written before it did)."""
    codes = [i.gpu_code for i in entry.instances] if entry.instances else [entry.gpu_code]
    if all(c is None for c in codes):
        return None
    return tuple(dict.fromkeys(code for c in codes for code in c or ()))


def report_images(matrix: Matrix, request: MatrixImagesOn, reports: Sequence[str]
                  ) -> tuple[Release, dict[str, BuiltImage]]:
    """The release the build REPORTS record (joined), and its images that built, by key: the
    references, digests and platforms the build made and the device code it measured.
    InputError when MATRIX is not the one the build was made with (another product version,
    an image it does not have)."""
    from ..imagebuild import build_report
    from ..matrix import expand

    release = build_report.read_releases(reports)
    every = expand(matrix, build_id=request.build_id, registry=request.registry)
    release.check_matrix(matrix.product.version, {image.key for image in every}, matrix.path)
    built = {}
    for entry in release.images:
        if entry.status != "ok" or not entry.reference:
            continue  # not built: not part of what this build made
        platforms = tuple(i.platform for i in entry.instances if i.platform) \
            if entry.instances else entry.platforms
        built[entry.key] = BuiltImage(entry.reference, entry.digest, platforms,
                                      measured_code(entry))
    return release, built


def compat_table(request: CompatRequest) -> CompatTable:
    """The table REQUEST asks for. With a report, the rows are the report's images that
    built: its references, digests and platforms; InputError when the matrix is not the one
    the build was made with (another product version, an image it does not have)."""
    from ..matrix import EVERYTHING, expand, load
    from ..toolkit.facts import load_facts

    matrix = load(request.matrix_path)
    images = expand(matrix, build_id=request.build_id, registry=request.registry,
                    filters=request.filters or EVERYTHING)
    facts = load_facts()
    if not request.report:
        return build_compat_table(images, facts, today=request.today,
                                  warn_days=request.warn_days, product=matrix.product,
                                  build_id=request.build_id)
    release, built = report_images(matrix, request, request.report)
    return build_compat_table([image for image in images if image.key in built], facts,
                              today=request.today, warn_days=request.warn_days, built=built,
                              product=release.product or matrix.product,
                              build_id=release.build_id or request.build_id)
