"""Expand a loaded matrix into image specs: one per (kind, accelerator, version, OS) cell
minus the excludes, in matrix order. Errors point at the matrix field through the
locations the loader recorded, so nothing here needs the YAML."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional

from ..errors import InputError, quoted
from ..suggest import did_you_mean
from .model import (
    SAFE_NAME,
    SAFE_REFERENCE,
    Accelerator,
    ImageKind,
    ImageSpec,
    Matrix,
    ToolkitVersion,
    index_release,
    versioned_variant,
)
from .platforms import ALIASES, VENDOR_PLATFORMS, describe, host_platform


@dataclass(frozen=True)
class Filters:
    """Which images a command works on; an empty tuple matches everything."""

    accelerators: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    oses: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()  # an image matches with the platforms among these

    def matches(self, image: ImageSpec) -> bool:
        return (
            (not self.platforms or any(p in self.platforms for p in image.platforms))
            and (not self.accelerators or image.accelerator in self.accelerators)
            and (not self.versions or any(version_matches(image.version, v)
                                          for v in self.versions))
            and (not self.oses or image.os in self.oses)
            and (not self.kinds or image.kind in self.kinds)
            and (not self.names or image.name in self.names or image.key in self.names)
        )


EVERYTHING = Filters()


def version_matches(version: Optional[str], prefix: str) -> bool:
    """Component-wise prefix: "12.8" matches 12.8.1, "12.1" does not match 12.10.0."""
    if version is None:
        return False
    want = prefix.split(".")
    return version.split(".")[: len(want)] == want


def _excluded(matrix: Matrix, kind: str, accelerator: str, version: Optional[str],
              os_name: str, platform: Optional[str] = None) -> bool:
    """Whether an exclude rule removes the cell (PLATFORM None: rules without a platform)
    or one platform of it."""
    return any(
        (rule.accelerator is None or rule.accelerator == accelerator)
        and (rule.version is None or version_matches(version, rule.version))
        and (rule.os is None or rule.os == os_name)
        and (rule.kind is None or rule.kind == kind)
        and rule.platform == platform
        for rule in matrix.exclude
    )


def image_name(accelerator: str, version: Optional[ToolkitVersion], os_name: str) -> str:
    """`cuda-12.8-ubi9`: the toolkit's major.minor goes into the name, not the tag."""
    if version is None:
        return f"{accelerator}-{os_name}"
    return f"{accelerator}-{version.major_minor}-{os_name}"


def expand(matrix: Matrix, *, build_id: str = "dev", registry: Optional[str] = None,
           filters: Filters = EVERYTHING) -> list[ImageSpec]:
    """Every image of the matrix (minus excludes) in matrix order, then filtered."""
    images = expand_all(matrix, build_id=build_id, registry=registry)
    check_filters(matrix, images, filters)
    return matching(images, filters)


def matching(images: list[ImageSpec], filters: Filters) -> list[ImageSpec]:
    """The IMAGES FILTERS match, each with only the platforms the filters keep."""
    return [_only_platforms(image, filters.platforms) for image in images
            if filters.matches(image)]


def _only_platforms(image: ImageSpec, platforms: tuple[str, ...]) -> ImageSpec:
    if not platforms:
        return image
    return replace(image, platforms=tuple(p for p in image.platforms if p in platforms))


def check_filters(matrix: Matrix, images: list[ImageSpec], filters: Filters) -> None:
    """A filter value that names nothing is a typo: a CI job must fail, not build nothing."""
    known = (
        ("filters.accelerators", filters.accelerators, list(matrix.accelerators)),
        ("filters.oses", filters.oses, list(matrix.os)),
        ("filters.kinds", filters.kinds, list(matrix.images)),
        ("filters.names", filters.names, [i.name for i in images] + [i.key for i in images]),
        ("filters.platforms", filters.platforms, sorted({p for i in images for p in i.platforms})),
    )
    for field, values, names in known:
        for value in values:
            if value not in names:
                extra = f" (did you mean '{ALIASES[value]}'?)" if value in ALIASES else \
                    did_you_mean(value, names)
                raise InputError(f"{quoted(value, always=True)} matches nothing in the "
                                 f"matrix{extra}", file=matrix.path, field=field)
    for prefix in filters.versions:
        if not any(version_matches(image.version, prefix) for image in images):
            versions = sorted({i.version for i in images if i.version})
            raise InputError(f"no version starts with '{prefix}' (the matrix has "
                             f"{', '.join(versions)})", file=matrix.path,
                             field="filters.versions")


def check_build_id(build_id: str, field: str = "build_id") -> None:
    """A build id goes into every tag: InputError (naming FIELD: `build_id`,
    `parent_build_id`) unless it is letters, digits, '.', '_' and '-'."""
    if not SAFE_NAME.fullmatch(build_id):
        shown = build_id.encode("unicode_escape").decode("ascii")  # one line, whatever it is
        raise InputError(f"build id '{shown}' may hold only letters, digits, '.', '_', '-'",
                         field=field)


def expand_all(matrix: Matrix, *, build_id: str, registry: Optional[str]) -> list[ImageSpec]:
    check_build_id(build_id)
    if registry is not None and not SAFE_REFERENCE.fullmatch(registry):
        raise InputError(f"'{registry}' is not a registry reference", field="registry")
    tag = f"{matrix.product.version}-{build_id}"
    images: list[ImageSpec] = []
    seen: dict[str, ImageSpec] = {}
    cells: dict[tuple[str, str, Optional[str], str], ImageSpec] = {}
    for kind in matrix.images.values():
        for accelerator in matrix.accelerators.values():
            versions: Sequence[Optional[ToolkitVersion]] = accelerator.versions or (None,)
            for version in versions:
                for os_name in kind.os:
                    full = version.version if version else None
                    if _excluded(matrix, kind.name, accelerator.name, full, os_name):
                        continue
                    platforms = _cell_platforms(matrix, kind, accelerator, version, os_name)
                    if not platforms:
                        continue
                    image = _image(matrix, kind, accelerator, version, os_name,
                                   registry or matrix.registry, tag, platforms)
                    for clash_key in (image.key, image.repository):
                        if clash_key in seen:
                            raise _clash(matrix, image, seen[clash_key])
                        seen[clash_key] = image
                    cells[(kind.name, accelerator.name, full, os_name)] = image
                    images.append(image)
    _check_shared_indexes(matrix, images)
    _check_index_directories(matrix, images)
    for image in images:
        if image.from_kind is None:
            continue
        parent = (image.from_kind, image.accelerator, image.version, image.os)
        if parent not in cells:
            message = (f"{image.key} is built from the '{image.from_kind}' image of the same "
                       f"accelerator, version and OS, which the matrix does not build "
                       f"(add {image.os} to images.{image.from_kind}.os or exclude this cell)")
            raise matrix.error(f"images.{image.kind}.from_image", message)
        missing = [p for p in image.platforms if p not in cells[parent].platforms]
        if missing:
            message = (f"{image.key} is built for {', '.join(missing)} FROM "
                       f"{image.from_kind}/{image.name}, which the matrix builds for "
                       f"{', '.join(cells[parent].platforms)} only")
            raise matrix.error(f"images.{image.kind}.from_image", message)
    return images


def _cell_platforms(matrix: Matrix, kind: ImageKind, accelerator: Accelerator,
                    version: Optional[ToolkitVersion], os_name: str) -> tuple[str, ...]:
    """The platforms of one cell: those every level that names platforms allows (the
    top, the OS, the kind, the toolkit version), in the order of the first such level;
    the host's when none does. Then the platform excludes; () when they drop all."""
    os_spec = matrix.os[os_name]
    levels = [(field, names) for field, names in (
        ("platforms", matrix.platforms),
        (f"os.{os_name}.platforms", os_spec.platforms),
        (f"images.{kind.name}.platforms", kind.platforms),
        (f"accelerators.{accelerator.name}.versions", version.platforms if version else ()),
    ) if names]
    if not levels:
        levels = [("platforms", (host_platform(),))]
    chosen = tuple(p for p in levels[0][1] if all(p in names for _, names in levels))
    cell = f"{kind.name} {accelerator.name} {version.version if version else '-'} {os_name}"
    if not chosen:
        said = "; ".join(f"{field}: {', '.join(names)}" for field, names in levels)
        raise _platform_error(matrix, levels[-1][0], version,
                              f"no platform is left for {cell} ({said})")
    full = version.version if version else None
    chosen = tuple(p for p in chosen
                   if not _excluded(matrix, kind.name, accelerator.name, full, os_name, p))
    vendor = VENDOR_PLATFORMS.get(accelerator.name)
    for platform in chosen:
        if vendor is not None and platform not in vendor and not (
                version is not None and platform in version.platforms):
            # The most specific level that asked for it is the one to change.
            field = next(field for field, names in reversed(levels) if platform in names)
            raise _platform_error(
                matrix, field, version,
                f"{accelerator.name} is published for {', '.join(vendor)} only, not "
                f"{platform} ({cell}): exclude it ({{accelerator: {accelerator.name}, "
                f"platform: {platform}}}) or list {platform} in a version's platforms")
        if os_spec.from_for(platform) is None:
            raise matrix.error(f"os.{os_name}.from",
                               f"OS '{os_name}' names no base image for {platform} ({cell})")
    return chosen


def _platform_error(matrix: Matrix, field: str, version: Optional[ToolkitVersion],
                    message: str) -> InputError:
    if field.startswith("accelerators.") and version is not None and version.where:
        where = version.where
        return InputError(message, file=where.file, line=where.line, column=where.column,
                          field=f"{field}.platforms")
    return matrix.error(field, message)


def _image(matrix: Matrix, kind: ImageKind, accelerator: Accelerator,
           version: Optional[ToolkitVersion], os_name: str, registry: str,
           tag: str, platforms: tuple[str, ...]) -> ImageSpec:
    name = image_name(accelerator.name, version, os_name)
    # Placeholders were checked at load time, so format() cannot fail here.
    variant = accelerator.variant.format(accelerator=accelerator.name, os=os_name)
    repository = kind.repository.format(registry=registry, kind=kind.name, name=name,
                                        accelerator=accelerator.name, os=os_name,
                                        product=matrix.product.name)
    if not SAFE_NAME.fullmatch(variant):
        raise matrix.error(f"accelerators.{accelerator.name}.variant",
                           f"'{variant}' holds characters outside [A-Za-z0-9._-/:]")
    if not SAFE_REFERENCE.fullmatch(repository):
        raise matrix.error(f"images.{kind.name}.repository",
                           f"'{repository}' holds characters outside [A-Za-z0-9._-/:]")
    allow = accelerator.allow + (version.allow if version else ()) + kind.allow
    index_pattern = accelerator.wheel_index or matrix.wheel_index
    wheel_index = None
    if index_pattern is not None:
        parts: list[Optional[str]] = [*version.version.split(".")] if version else [None, None]
        wheel_index = index_pattern.format(
            release=index_release(matrix.product.version), accelerator=accelerator.name,
            major=parts[0], minor=parts[1], os=os_name,
            variant=versioned_variant(accelerator.name, version.version if version else None,
                                      os_name))
    directory = os.path.join(matrix.output, kind.name, name)
    # A multi-platform image has one rendered file per platform (Containerfile.arm64).
    containerfiles = {
        platform: os.path.join(directory, "Containerfile" if len(platforms) == 1
                               else f"Containerfile.{describe(platform).file_suffix}")
        for platform in platforms
    }
    os_froms = {platform: matrix.os[os_name].from_for(platform) or "" for platform in platforms}
    return ImageSpec(
        name=name, kind=kind.name, accelerator=accelerator.name,
        version=version.version if version else None, os=os_name,
        os_from=os_froms[platforms[0]], variant=variant, repository=repository, tag=tag,
        template=kind.template,
        containerfile=containerfiles[platforms[0]],
        from_kind=kind.from_image, resources=kind.resources, toolkit=version, allow=allow,
        context=kind.context or "", requirements=kind.requirements, platforms=platforms,
        os_froms=os_froms,
        containerfiles=containerfiles, wheel_index=wheel_index,
        wheel_index_auth=(accelerator.wheel_index_auth or matrix.wheel_index_auth)
        if wheel_index is not None else "none",
    )


def _check_shared_indexes(matrix: Matrix, images: list[ImageSpec]) -> None:
    """Two toolkit releases behind one index URL would mix ABIs: the pattern must tell
    them apart. (Two OSes may share one: the EL9 images install ubi9's wheels.)"""
    owner: dict[str, ImageSpec] = {}
    for image in images:
        if image.wheel_index is None:
            continue
        other = owner.setdefault(image.wheel_index, image)
        if (other.accelerator, other.toolkit and other.toolkit.major_minor) != \
                (image.accelerator, image.toolkit and image.toolkit.major_minor):
            field = f"accelerators.{image.accelerator}.wheel_index"
            if matrix.accelerators[image.accelerator].wheel_index is None:
                field = "wheel_index"
            raise matrix.error(field, f"{other.versioned_variant} and "
                               f"{image.versioned_variant} would share the wheel index "
                               f"{image.wheel_index}: use {{variant}} (or {{accelerator}}, "
                               "{major}, {minor}, {os}) in the pattern")


def index_root(pattern: str) -> str:
    """The root of a wheel index PATTERN: its URL up to the first segment with a field."""
    return pattern[:pattern.rfind("/", 0, pattern.index("{")) + 1]


def index_layout(pattern: str, url: str) -> tuple[str, str]:
    """(variant directory, pages directory) of URL, a wheel index PATTERN filled in, below
    the pattern's root; the variant directory ends with the segment of the last field.
    `aipcc-build index` keeps one variant's generations in its directory."""
    root = index_root(pattern)
    fields = pattern[len(root):].split("/")
    last = max(number for number, segment in enumerate(fields) if "{" in segment)
    segments = url[len(root):].split("/")
    return "/".join(segments[:last + 1]), "/".join(segments[last + 1:]).strip("/")


def _index_pattern_field(matrix: Matrix, image: ImageSpec) -> str:
    if matrix.accelerators[image.accelerator].wheel_index is None:
        return "wheel_index"
    return f"accelerators.{image.accelerator}.wheel_index"


def _check_index_directories(matrix: Matrix, images: list[ImageSpec]) -> None:
    """Each index owns its variant directory (its URL up to the last field): a directory
    inside another's, or one directory behind two URLs, would have one variant's publish
    replace the other's index."""
    owner: dict[str, ImageSpec] = {}  # the variant directory's URL -> an image of it
    for image in images:
        if image.wheel_index is None:
            continue
        pattern = matrix.accelerators[image.accelerator].wheel_index or matrix.wheel_index
        assert pattern is not None
        directory = index_root(pattern) + index_layout(pattern, image.wheel_index)[0] + "/"
        other = owner.setdefault(directory, image)
        if other.wheel_index != image.wheel_index:
            raise _shared_directory(matrix, image, directory, f"is also the directory of "
                                    f"{other.versioned_variant}'s ({other.wheel_index})")
    for directory, image in owner.items():
        for inner, other in owner.items():
            if inner != directory and inner.startswith(directory):
                raise _shared_directory(matrix, image, directory,
                                        f"holds {other.versioned_variant}'s ({inner})")


def _shared_directory(matrix: Matrix, image: ImageSpec, directory: str,
                      how: str) -> InputError:
    return matrix.error(
        _index_pattern_field(matrix, image),
        f"{image.versioned_variant}'s wheel index directory ({directory}) {how}: one "
        "variant's publish would replace the other's index; end the pattern's last field "
        "with what tells the variants apart ({variant}, or {accelerator}-...)")


def _clash(matrix: Matrix, image: ImageSpec, other: ImageSpec) -> InputError:
    message = (f"two cells produce the same image {image.reference.rsplit(':', 1)[0]} "
               f"({other.accelerator} {other.version or '-'} {other.os} {other.kind} and "
               f"{image.accelerator} {image.version or '-'} {image.os} {image.kind})")
    if image.toolkit is not None and image.toolkit.where is not None:
        where = image.toolkit.where
        return InputError(message, file=where.file, line=where.line, column=where.column,
                          field=f"accelerators.{image.accelerator}.versions")
    return matrix.error(f"images.{image.kind}", message)
