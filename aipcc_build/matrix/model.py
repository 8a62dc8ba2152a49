"""The typed matrix: frozen dataclasses produced by `matrix.load`, consumed downstream.

Nothing here re-validates: `matrix.load` guarantees every invariant before it builds these.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Optional

from ..errors import InputError

SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")
# Registries and repositories also need ':' (port) and '/' (path); still no whitespace or quotes.
SAFE_REFERENCE = re.compile(r"[A-Za-z0-9._:/-]+")
# Paths the matrix names (templates, output, a kind's template and context) go into CI
# documents: Tekton's catalog tasks substitute parameters into their shell scripts
# unquoted, Konflux into a CEL expression. Letters, digits, '.', '_', '-' and '/', no
# part starting with '-' (it would read as an option). docs/matrix-file.md says so.
SAFE_PATH = re.compile(r"(?!-)(?!.*/-)[A-Za-z0-9._/-]+")
SAFE_PATH_WHAT = ("a safe path (letters, digits, '.', '_', '-' and '/', no part starting "
                  "with '-')")
# A repository URL a build cluster can clone: https, ssh, git, or scp-like user@host:path.
CLONABLE = re.compile(r"^((https?|ssh|git)://|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:)")
# Resource quantities: the matrix's `resources` and the scheduler's capacity.
QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]i?)?")
UNITS = {
    None: 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
}


def parse_quantity(text: str) -> Optional[float]:
    """`2`, `0.5`, `4Gi` -> the amount; None when TEXT is not a quantity."""
    match = QUANTITY.fullmatch(text.strip())
    return float(match.group(1)) * UNITS[match.group(2)] if match else None


def versioned_variant(accelerator: str, version: Optional[str], os_name: str) -> str:
    """`cuda12.8-ubi9` (major.minor, no dash), `cpu-ubi9` without a version: the
    `<variant>` of Red Hat AI's index URLs."""
    if version is None:
        return f"{accelerator}-{os_name}"
    return f"{accelerator}{'.'.join(version.split('.')[:2])}-{os_name}"


def index_release(product_version: str) -> str:
    """The `{release}` of a wheel index URL: the product's major.minor and its channel
    suffix, if any ("3.4.1" -> "3.4", "3.4-EA1" -> "3.4-EA1")."""
    number, dash, channel = product_version.partition("-")
    return ".".join(number.split(".")[:2]) + dash + channel


@dataclass(frozen=True)
class Where:
    """A position in the matrix file, for messages."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class AllowRule:
    """A deliberate exception for the validator; every field given must match a finding."""

    reason: str
    toolkit: Optional[str] = None  # "cuda", "rocm", or None for the image's own family
    component: Optional[str] = None  # e.g. "nccl", "cuda-compat"
    versions: tuple[str, ...] = ()  # version prefixes ("12.9", "2.27.3+cuda12.9")
    path: Optional[str] = None  # fnmatch glob on the path inside the image
    where: Optional[Where] = None


@dataclass(frozen=True)
class Product:
    name: str
    version: str
    # Tags that move to each release ("{version}", "latest"); placeholders {version} and
    # {build_id}. `promote` sets them besides the immutable "{version}-{build_id}".
    moving_tags: tuple[str, ...] = ()



# The Konflux task bundles every component's build pipeline references when the matrix
# names none: one file the project keeps (task -> `tag@sha256:digest`, with its source).
KONFLUX_BUNDLES_FILE = "konflux-bundles.yaml"
# The branch whose pushes build and release, and pull requests into which are built.
DEFAULT_BRANCH = "main"


@functools.lru_cache(maxsize=1)
def default_bundles() -> Mapping[str, str]:
    """The packaged Konflux task bundles (aipcc_build/data/konflux-bundles.yaml)."""
    import yaml

    text = resources.files("aipcc_build").joinpath(f"data/{KONFLUX_BUNDLES_FILE}").read_text()
    return MappingProxyType(dict(yaml.safe_load(text)))


# The image CI jobs run in (buildah, skopeo, git, aipcc-build): matrix/ci.yaml builds it,
# the repository's own CI pushes it under build id `main`.
DEFAULT_CI_IMAGE = "quay.io/aipcc/ci/aipcc-build:1-main"


@dataclass(frozen=True)
class CiSettings:
    """How CI jobs build this matrix (`ci:` in the matrix file)."""

    # Shell command run from the project root before a job builds: fetches what the build
    # contexts need and git does not hold (the demo's wheelhouse). None: nothing to fetch.
    fetch: Optional[str] = None
    image: str = DEFAULT_CI_IMAGE
    bundles: Mapping[str, str] = field(default_factory=lambda: dict(default_bundles()))
    # Konflux: builds without network, from what the prefetch task fetched as described by
    # `prefetch_input` (Konflux's prefetch-input JSON: pip requirements, an RPM lockfile).
    hermetic: bool = False
    prefetch_input: str = ""
    branch: str = DEFAULT_BRANCH
    # The repository clusters clone (Tekton's PipelineRun, Konflux's Components and
    # IntegrationTestScenario). None: the checkout's `origin` remote, which differs between
    # clones; a matrix whose CI files are committed names it.
    source_url: Optional[str] = None
    # The derived files beyond its Containerfiles the project commits from this matrix
    # (COMMITTED_KINDS): `regenerate --check` finds them missing when they are gone, as it
    # cannot when nothing on the disk names the matrix any more.
    committed: tuple[str, ...] = ()


# What `ci.committed` may name: the Konflux files (`.tekton/`, `konflux/`) and the
# compatibility page (docs/compatibility.md).
COMMITTED_KINDS = ("konflux", "compatibility-page")


@dataclass(frozen=True)
class OsSpec:
    name: str
    from_ref: str  # the base image; with per-platform bases, the first platform's
    # Platform -> base image, when each platform has its own (`from` written as a mapping).
    platform_froms: Mapping[str, str] = field(default_factory=dict)
    platforms: tuple[str, ...] = ()  # the platforms this OS is built for; () = any

    def from_for(self, platform: str) -> Optional[str]:
        """The base image for PLATFORM; None when this OS names none for it."""
        if not self.platform_froms:
            return self.from_ref
        return self.platform_froms.get(platform)


@dataclass(frozen=True)
class ToolkitVersion:
    version: str  # "12.8.1" or "6.4"
    native_driver: Optional[str] = None  # needed natively (matrix-file.md#native_driver)
    eol: Optional[dt.date] = None
    gpu_archs: tuple[str, ...] = ()
    vars: Mapping[str, object] = field(default_factory=dict)
    allow: tuple[AllowRule, ...] = ()
    where: Optional[Where] = None
    platforms: tuple[str, ...] = ()  # the platforms this release is built for; () = any

    @property
    def parts(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))

    @property
    def major_minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


@dataclass(frozen=True)
class Accelerator:
    name: str
    variant: str  # pattern, "{accelerator}-{os}" by default
    versions: tuple[ToolkitVersion, ...]  # empty for an accelerator without versions (cpu)
    allow: tuple[AllowRule, ...] = ()
    wheel_index: Optional[str] = None  # URL pattern replacing the matrix's for this one
    wheel_index_auth: Optional[str] = None  # replaces the matrix's for this accelerator


@dataclass(frozen=True)
class ImageKind:
    name: str
    template: str
    repository: str  # pattern, "{registry}/{kind}/{name}" by default
    os: tuple[str, ...]
    from_image: Optional[str] = None
    resources: Mapping[str, float] = field(default_factory=dict)
    allow: tuple[AllowRule, ...] = ()
    context: Optional[str] = None  # absolute build-context directory; None: the Containerfile's
    platforms: tuple[str, ...] = ()  # the platforms this kind is built for; () = any
    # The requirements its template installs (absolute path): judged before the build.
    requirements: Optional[str] = None


@dataclass(frozen=True)
class Exclude:
    accelerator: Optional[str] = None
    version: Optional[str] = None  # prefix: "12.8" matches 12.8.1
    os: Optional[str] = None
    kind: Optional[str] = None
    platform: Optional[str] = None  # drops this platform only, not the whole cell


@dataclass(frozen=True)
class Matrix:
    path: str
    schema: int
    product: Product
    registry: str
    templates: str  # absolute directory
    output: str  # absolute directory
    os: Mapping[str, OsSpec]
    accelerators: Mapping[str, Accelerator]
    images: Mapping[str, ImageKind]
    exclude: tuple[Exclude, ...] = ()
    wheel_index: Optional[str] = None  # URL pattern of the per-variant wheel indexes
    wheel_index_auth: str = "none"  # how readers authenticate to them (INDEX_AUTH_MODES)
    platforms: tuple[str, ...] = ()  # top-level `platforms`; () = the host's unless a level says
    ci: CiSettings = field(default_factory=CiSettings)
    # Field path ("images.devel.from_image") -> where it is written, for later errors.
    locations: Mapping[str, Where] = field(default_factory=dict)

    def error(self, field: str, message: str) -> InputError:
        """An error at FIELD in the matrix file, or at the file when FIELD is not written."""
        where = self.locations.get(field)
        if where is None:
            return InputError(message, file=self.path, field=field)
        return InputError(message, file=where.file, line=where.line, column=where.column,
                          field=field)


@dataclass(frozen=True)
class ImageSpec:
    """One image of the matrix: a cell (accelerator, version, os) of one image kind."""

    name: str  # "cuda-12.8-ubi9"
    kind: str  # "builder"
    accelerator: str  # "cuda"
    version: Optional[str]  # "12.8.1"; None for an accelerator without versions
    os: str
    os_from: str
    variant: str  # generic FROMAGER_VARIANT: "cuda-ubi9"
    repository: str  # "quay.io/aipcc/builder/cuda-12.8-ubi9"
    tag: str  # "3.0-175"
    template: str  # template file name, relative to the templates directory
    containerfile: str  # absolute path of the rendered Containerfile
    from_kind: Optional[str] = None  # kind this image is built FROM (same cell)
    resources: Mapping[str, float] = field(default_factory=dict)
    toolkit: Optional[ToolkitVersion] = None
    allow: tuple[AllowRule, ...] = ()  # accelerator, version and kind rules together
    context: str = ""  # the kind's build-context directory; read it with plan.build_context
    requirements: Optional[str] = None  # the kind's requirements file, judged before a build
    wheel_index: Optional[str] = None  # the index pip and uv use in the image, when the
    # matrix has a wheel_index pattern
    wheel_index_auth: str = "none"  # how pip and uv authenticate to it (INDEX_AUTH_MODES)
    # One instance per platform, joined under `reference` by a manifest list when several.
    platforms: tuple[str, ...] = ()
    os_froms: Mapping[str, str] = field(default_factory=dict)  # platform -> base image
    containerfiles: Mapping[str, str] = field(default_factory=dict)  # platform -> file

    @property
    def versioned_variant(self) -> str:
        """The wheel index's variant: "cuda12.8-ubi9", "cpu-ubi9" (FROMAGER_VARIANT stays
        generic; the toolkit version lives here, in the index URL)."""
        return versioned_variant(self.accelerator, self.version, self.os)

    @property
    def multi_platform(self) -> bool:
        return len(self.platforms) > 1

    @property
    def key(self) -> str:
        """Unique id within a matrix: "kind/name"."""
        return f"{self.kind}/{self.name}"

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def depends_on(self) -> Optional[str]:
        # A from_image dependency is the same cell of another kind, hence the same name.
        return f"{self.from_kind}/{self.name}" if self.from_kind else None
