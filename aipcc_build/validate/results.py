"""The validator's typed results: what a layer says, and what the validator concludes.

`Evidence` and `LayerScan` are per layer and cached by layer digest; `Finding` and
`ImageVerdict` are per image and computed afresh each run (the component table and the
expectation may change between runs, the layer's bytes cannot).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional

from ..records import field, record

# The matrix's types, for annotations only: the validator must not load the matrix
# package (a warm validation would be mostly imports).
if TYPE_CHECKING:
    from ..matrix.model import AllowRule


# Finding statuses. Only violations fail an image (a version the component table cannot
# place is a warning that says why).
OK = "ok"
ALLOWED = "allowed"
WARNING = "warning"
VIOLATION = "violation"
FAILING = (VIOLATION,)


@record
class Evidence:
    """One thing inside a layer (or the image config) that names a toolkit version."""

    kind: str  # see detect.EVIDENCE_KINDS
    path: str  # "/usr/local/cuda-12.9", "/var/lib/rpm/rpmdb.sqlite", "config:Env/CUDA_VERSION"
    toolkit: str  # "cuda" or "rocm"
    component: str  # "cuda-runtime", "cufft", "cuda-cudart-12-9", "torch", "toolkit"
    version: str  # the version as found: "12.9.79", "2.8.0+cu129", "2.27.3-1+cuda12.9"
    release: Optional[str] = None  # "12.9" when the evidence names its release itself
    # The distribution whose RECORD lists the file ("torch 2.7.0"), when one does.
    distribution: Optional[str] = None
    detail: Optional[str] = None  # how it was found: "vendored copy", "symbolic link to ..."
    # A record of the toolkit it was compiled with (torch/version.py, +cu126), not a copy
    # of the toolkit's libraries.
    built: bool = False


# The hazard kind of a set-user-ID or set-group-ID file (the verdict treats the base
# layer's apart).
SETUID = "setuid"
# A layer the container engine refuses (its compression, its tar, its digest, a member).
REFUSED_LAYER = "refused-layer"
# The hazard kind of a small file the scan reads (a version file, a pip or uv config) that
# does not parse (the verdict fails a config file that pip or uv loads).
UNPARSABLE = "unparsable-file"
# The hazard kinds of a file the validator did not read: larger than its limit, an RPM
# database sqlite cannot open, and (read through a link) not a regular file or in a layer
# the second read could not read. The final copy of a package database not read fails
# the image: its packages were not judged.
OVERSIZED = "oversized-file"
UNREADABLE_RPMDB = "unreadable-rpmdb"
UNREAD = "unread-file"
# The evidence kind of CUDA compiler tools a package carries for itself (ptxas, nvlink):
# judged apart by the verdict (kept here, beside the other kinds, so a warm validation
# judges without loading the detectors).
PRIVATE_TOOLCHAIN = "private-toolchain"
# Evidence kinds of builds for a backend (kept here for the same reason): what a shared
# object links (NEEDED libamdhip64.so.7), a shared object named for ROCm, and one of the
# backends a package picks among at run time (libbitsandbytes_cuda128.so).
LINKED, ROCM_BUILD, BACKEND = "linked", "rocm-build", "backend"


@record
class IndexSetting:
    """A wheel index pip or uv is told to use, and where: a config file or a variable."""

    source: str  # "/etc/pip.conf" or "config:Env/PIP_INDEX_URL"
    key: str  # "global.index-url", "extra-index-url", "index.default", "PIP_INDEX_URL"
    url: str


@record
class Hazard:
    """A hostile or broken tar entry: reported, never followed or written."""

    kind: str  # "path-traversal", "absolute-path", "device-file", "setuid", "absurd-size", ...
    path: str
    detail: str
    severe: bool  # severe hazards fail the image


@record
class DeviceCode:
    """The GPU code one ELF file of a layer carries (`device_code`)."""

    path: str
    sass: tuple[str, ...] = ()  # CUDA machine code: "sm_80", "sm_90a"
    ptx: tuple[str, ...] = ()  # CUDA PTX, compiled at load time: "compute_90"
    gfx: tuple[str, ...] = ()  # ROCm code objects: "gfx90a:xnack-", "gfx11-generic"
    detail: str = ""  # the evidence: "3 fatbinaries: 42 entries"
    distribution: Optional[str] = None  # the installed distribution that brought the file


@record
class LayerScan:
    """Everything the verdict needs from one layer, small enough to cache as JSON."""

    digest: str
    entries: int
    evidence: tuple[Evidence, ...] = ()
    # paths this layer deletes from lower layers (not the ones it writes again itself)
    whiteouts: tuple[str, ...] = ()
    opaque_dirs: tuple[str, ...] = ()  # directories whose lower content this layer hides
    content_paths: tuple[str, ...] = ()  # version files read here; they replace lower copies
    # (path, kind, link) of the members the final-tree model keeps (`layers._modelled`):
    # symlinks, hard links to read through, what may replace a lower toolkit directory
    members: tuple[tuple[str, str, str], ...] = ()
    hazards: tuple[Hazard, ...] = ()
    error: Optional[str] = None  # set when the layer could not be read to its end
    index_settings: tuple[IndexSetting, ...] = ()  # from its pip.conf / uv.toml files
    diff_id: Optional[str] = None  # the digest of its tar, for the config's rootfs.diff_ids
    device_code: tuple[DeviceCode, ...] = ()  # the files with GPU code, in path order


@record
class Expectation:
    """What an image should contain. `version` may be "12.8" or "12.8.1"; major.minor counts."""

    accelerator: str  # "cuda", "rocm", "cpu"
    version: Optional[str] = None
    variant: Optional[str] = None  # expected FROMAGER_VARIANT
    source: str = "argument"  # "argument", "matrix", "labels", "inferred"
    index: Optional[str] = None  # the wheel index URL pip and uv must use

    @property
    def release(self) -> Optional[str]:
        return ".".join(self.version.split(".")[:2]) if self.version else None

    def __str__(self) -> str:
        return f"{self.accelerator} {self.release}" if self.release else self.accelerator


@record
class Finding:
    status: str  # ok | allowed | warning | violation
    evidence: str  # kind of evidence, or "config"/"layer" for checks and hazards
    path: str
    reason: str
    toolkit: Optional[str] = None
    version: Optional[str] = None  # the toolkit release the evidence belongs to ("12.9")
    component: Optional[str] = None
    component_version: Optional[str] = None
    layer_digest: Optional[str] = None  # None for the image config
    distribution: Optional[str] = None  # the installed distribution that brought the file

    def line(self) -> str:
        """One line for people: build logs, the console, annotations."""
        what = " ".join(x for x in (self.toolkit, self.version) if x)
        component = " ".join(x for x in (self.component, self.component_version) if x)
        layer = f" [layer {self.layer_digest[:19]}]" if self.layer_digest else ""
        head = f"{what}: " if what else ""
        brought = f" (from {self.distribution})" if self.distribution else ""
        return f"{self.status}: {head}{component} ({self.evidence}) at {self.path}" \
               f"{brought}{layer}: {self.reason}"


@record
class ImageVerdict:
    ref: str
    platform: str  # "linux/amd64"
    digest: Optional[str] = None  # manifest digest when known
    expected: Optional[Expectation] = None
    toolkits: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # present releases
    findings: tuple[Finding, ...] = ()
    stale_rules: tuple[AllowRule, ...] = ()  # allow rules that matched nothing
    layers: int = 0
    cached_layers: int = 0
    error: Optional[str] = None  # the image could not be read completely
    # "in place", "in place (containers-storage, overlay)", "skopeo copy", or "skopeo copy
    # (not read in place: why)"
    layers_read: Optional[str] = None
    # the device code of the files the image ends with, and the GPU architectures it was
    # judged against
    gpu_code: tuple[DeviceCode, ...] = ()
    gpu_archs: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        if self.error:
            return "unreadable"
        if any(f.status in FAILING for f in self.findings):
            return "failed"
        return "ok"

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def count(self, status: str) -> int:
        return sum(1 for f in self.findings if f.status == status)
