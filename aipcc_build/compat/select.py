"""Which images run on a node: by GPU (or compute capability), driver, and EOL.

A node is described by flags or read from a Kubernetes node object, using the labels NVIDIA's
GPU feature discovery, Node Feature Discovery and AMD's node labeller put there. Nothing here
prints: `select_images` returns a frozen `Selection` for the reporting module.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

import yaml

from ..errors import InputError
from ..fsutil import read_regular
from ..matrix import ImageSpec
from ..toolkit.driver_branches import load_driver_branches
from ..toolkit.facts import DriverVersion, ToolkitFacts
from ..toolkit.gpu_archs import (
    BadArch,
    code_runs_on,
    expected_gpus,
    parse_arch,
    parse_compute_capability,
)
from .table import (
    DEFAULT_WARN_DAYS,
    EOL,
    BuiltImage,
    MatrixImagesOn,
    Requirements,
    eol_status,
    report_images,
    requirements,
    version_sort_key,
)

if TYPE_CHECKING:
    from ..validate.results import DeviceCode

# How an image runs on a node, best first. NVIDIA's three ways (its CUDA compatibility
# guide): the node's driver is at least the release's own (`native_driver`); it is older but
# of the same major's minor-version-compatible range (no JIT of newer PTX); or older still,
# and the image's forward-compat package (cuda-compat-X-Y) supplies the newer user-mode
# driver, which works on data-center GPUs only.
NATIVE = "native"
MINOR_VERSION_COMPAT = "minor-version-compatibility"
FORWARD_COMPAT = "forward-compat-package"
CPU_ONLY = "cpu-only"
_MODE_RANK = {NATIVE: 0, MINOR_VERSION_COMPAT: 1, FORWARD_COMPAT: 2, CPU_ONLY: 3}

# Why an image does not run on a node.
DRIVER_TOO_OLD = "driver too old"
ARCH_NOT_SUPPORTED = "architecture not supported"
ARCH_UNKNOWN = "architectures unknown"
PLATFORM_NOT_BUILT = "CPU platform not built"
NO_MATCHING_GPU = "no matching GPU"
PAST_EOL = "eol"
CODE_LACKS_ARCH = "no GPU code for the node"

_VENDOR_NAME = {"nvidia": "NVIDIA", "amd": "AMD"}


@dataclass(frozen=True)
class Node:
    vendor: str  # "nvidia" or "amd"
    arch: str  # compute capability "9.0" or gfx target "gfx942"
    gpu: Optional[str]  # product name when known
    driver: Optional[DriverVersion]  # NVIDIA driver; None for AMD
    source: str  # "flags" or the node's name and file
    platform: Optional[str] = None  # "linux/arm64" (kubernetes.io/arch); None: any

    def describe(self) -> str:
        what = f"{self.gpu} " if self.gpu else ""
        arch = f"compute capability {self.arch}" if self.vendor == "nvidia" else self.arch
        driver = f", driver {self.driver}" if self.driver else ""
        platform = f", {self.platform}" if self.platform else ""
        return f"{what}({arch}){driver}{platform}"


@dataclass(frozen=True)
class Candidate:
    image: ImageSpec
    requirements: Requirements
    mode: str  # NATIVE, MINOR_VERSION_COMPAT or CPU_ONLY
    eol_status: str


@dataclass(frozen=True)
class Reason:
    code: str  # DRIVER_TOO_OLD, ARCH_NOT_SUPPORTED, ...
    detail: str

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


@dataclass(frozen=True)
class Exclusion:
    image: ImageSpec
    reasons: tuple[Reason, ...]


@dataclass(frozen=True)
class Selection:
    node: Node
    runnable: tuple[Candidate, ...]  # best first
    excluded: tuple[Exclusion, ...]
    today: dt.date


def parse_driver(text: str) -> DriverVersion:
    """A node's driver: a bare branch ("550") is not enough to compare with 550.54.15."""
    try:
        driver = DriverVersion.parse(text)
    except ValueError as err:
        raise InputError(str(err), field="driver") from err
    if len(driver.parts) < 2:
        raise InputError(f"{text!r} is not a driver version (expected e.g. 550.54.15)",
                         field="driver")
    return driver


def node_from_flags(
    facts: ToolkitFacts,
    *,
    gpu: Optional[str] = None,
    compute_capability: Optional[str] = None,
    driver: Optional[str] = None,
) -> Node:
    if (gpu is None) == (compute_capability is None):
        raise InputError("give exactly one GPU: a product name or a compute capability",
                         field="gpu")
    platform = None
    if gpu is not None:
        found = facts.find_gpu(gpu)
        vendor, arch, name, platform = found.vendor, found.arch, found.name, found.platform
    else:
        try:
            arch = parse_compute_capability(str(compute_capability).strip())
        except BadArch as exc:
            raise InputError(str(exc), field="compute_capability") from None
        vendor, name = "nvidia", None
    parsed = parse_driver(driver) if driver is not None else None
    if vendor == "nvidia" and parsed is None:
        raise InputError("an NVIDIA GPU needs a driver version (e.g. 550.54.15)", field="driver")
    return Node(vendor, arch, name, parsed, "flags", platform)


# Labels, newest name first where GPU feature discovery renamed them.
_NVIDIA_PRODUCT = "nvidia.com/gpu.product"
_NVIDIA_COMPUTE = ("nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor")
_NVIDIA_DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
_NVIDIA_DRIVER_PARTS = (
    ("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver-version.minor",
     "nvidia.com/cuda.driver-version.revision"),
    ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"),
)
_NVIDIA_PRESENT = ("feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present")
_AMD_PRODUCT = ("amd.com/gpu.product-name", "beta.amd.com/gpu.product-name")
_AMD_DEVICE_ID = ("amd.com/gpu.device-id", "beta.amd.com/gpu.device-id")
_AMD_PRESENT = ("amd.com/gpu.family", "beta.amd.com/gpu.family",
                "feature.node.kubernetes.io/pci-1002.present")


def node_from_k8s(facts: ToolkitFacts, path: Union[str, Path]) -> Node:
    """Read a node object (`kubectl get node NAME -o json`, or YAML) and describe its GPU."""
    path = Path(path)
    try:
        obj = yaml.safe_load(read_regular(path).decode("utf-8"))  # JSON is YAML
    except OSError as err:
        raise InputError(f"cannot read node: {err.strerror}", file=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("cannot read node: not UTF-8 text", file=str(path)) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        raise InputError(f"cannot read node: {err.problem or err.context}", file=str(path),
                         line=mark.line + 1 if mark else None) from None
    except (yaml.YAMLError, RecursionError) as err:
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise InputError(f"cannot read node: {why}", file=str(path)) from None
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(metadata, dict):
        raise InputError("not a Kubernetes node object (no metadata)", file=str(path))
    raw_labels = metadata.get("labels") or {}
    if not isinstance(raw_labels, dict):
        raise InputError("not a Kubernetes node object (metadata.labels is not a mapping)",
                         file=str(path))
    labels = {str(k): str(v) for k, v in raw_labels.items()}
    source = f"node {metadata.get('name', '?')} ({path})"
    if any(key.startswith("nvidia.com/") for key in labels) or _present(labels, _NVIDIA_PRESENT):
        return replace(_nvidia_node(facts, labels, source, str(path)),
                       platform=_node_platform(labels))
    if any(_amd_label(key) for key in labels):
        return replace(_amd_node(facts, labels, source, str(path)),
                       platform=_node_platform(labels))
    raise InputError(
        "no GPU labels found; looked for NVIDIA GPU feature discovery (nvidia.com/gpu.product, "
        "nvidia.com/gpu.compute.major/minor, nvidia.com/cuda.driver.major/minor/rev), Node Feature "
        "Discovery (feature.node.kubernetes.io/pci-10de.present) and AMD (amd.com/gpu.family)",
        file=str(path), field="metadata.labels",
    )


def _node_platform(labels: Mapping[str, str]) -> Optional[str]:
    """The kubelet's well-known labels: kubernetes.io/os and kubernetes.io/arch (GOARCH
    spelling, as OCI platforms: amd64, arm64)."""
    arch = labels.get("kubernetes.io/arch") or labels.get("beta.kubernetes.io/arch")
    if not arch:
        return None
    system = labels.get("kubernetes.io/os") or labels.get("beta.kubernetes.io/os") or "linux"
    return f"{system}/{arch}"


def _present(labels: Mapping[str, str], keys: Iterable[str]) -> bool:
    return any(labels.get(key, "").lower() == "true" for key in keys)


def _amd_label(key: str) -> bool:
    return key.startswith(("amd.com/gpu.", "beta.amd.com/gpu.")) or key in _AMD_PRESENT


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> Optional[str]:
    return next((labels[key] for key in keys if labels.get(key)), None)


def _nvidia_node(facts: ToolkitFacts, labels: Mapping[str, str], source: str, file: str) -> Node:
    product = labels.get(_NVIDIA_PRODUCT)
    major, minor = (labels.get(key) for key in _NVIDIA_COMPUTE)
    if major is not None and minor is not None:
        try:  # read as --compute-capability is: no major of 0, no leading zero
            arch = parse_compute_capability(f"{major}.{minor}")
        except BadArch as exc:
            raise InputError(f"nvidia.com/gpu.compute.major/minor: {exc}", file=file,
                             field="metadata.labels") from None
        gpu = product
    elif product:
        found = facts.find_gpu(product)
        arch, gpu = found.arch, found.name
    else:
        raise InputError("NVIDIA GPU present but neither nvidia.com/gpu.compute.major/minor nor "
                         "nvidia.com/gpu.product is set: is GPU feature discovery running?",
                         file=file, field="metadata.labels")
    driver_text = labels.get(_NVIDIA_DRIVER_FULL)
    if not driver_text:
        for keys in _NVIDIA_DRIVER_PARTS:
            parts = [labels.get(key) for key in keys]
            if parts[0] and parts[1]:
                driver_text = ".".join(p for p in parts if p)
                break
    if not driver_text:
        raise InputError("no driver labels (nvidia.com/cuda.driver.major/minor/rev)",
                         file=file, field="metadata.labels")
    try:
        driver = parse_driver(driver_text)
    except InputError as err:
        raise InputError(err.message, file=file, field="metadata.labels") from err
    return Node("nvidia", arch, gpu, driver, source)


def _amd_node(facts: ToolkitFacts, labels: Mapping[str, str], source: str, file: str) -> Node:
    product = _first(labels, _AMD_PRODUCT)
    if product:
        found = facts.find_gpu(product)
        return Node("amd", found.arch, found.name, None, source)
    device_id = _first(labels, _AMD_DEVICE_ID)
    by_id = facts.find_gpu_by_pci_id(device_id) if device_id else None
    if by_id is not None:
        return Node("amd", by_id.arch, by_id.name, None, source)
    family = _first(labels, _AMD_PRESENT[:2])
    raise InputError(
        f"AMD GPU present (family {family or '?'}) but no known amd.com/gpu.product-name or "
        f"amd.com/gpu.device-id{f' ({device_id})' if device_id else ''} tells its gfx target",
        file=file, field="metadata.labels",
    )


def arch_runs_on(archs: Iterable[str], node_arch: str) -> bool:
    """Whether code for `archs` (the declared ones, as SASS) runs on a GPU of `node_arch`
    (compute capability 9.0 or a gfx processor), by `toolkit.gpu_archs`' rules: sm_XY on
    X.Z with Z >= Y (binary compatibility within a major), arch-specific "a" targets only
    on X.Y, gfx targets on their processor."""
    try:
        [gpu] = expected_gpus([node_arch])
    except BadArch:
        return False
    return any(code_runs_on(arch, gpu) for arch in archs)


def select_images(
    images: Iterable[ImageSpec],
    facts: ToolkitFacts,
    node: Node,
    *,
    today: dt.date,
    warn_days: int = DEFAULT_WARN_DAYS,
    measured: Optional[Mapping[str, Sequence[DeviceCode]]] = None,
) -> Selection:
    """Split `images` (already narrowed by the matrix filters) into runnable and excluded;
    with MEASURED (by image key: the device code a build's validator read), an image with a
    library whose code runs not on the node's GPU is excluded, naming the library."""
    runnable = []
    excluded = []
    data_center = any(gpu.name == node.gpu and gpu.data_center for gpu in facts.gpus)
    for image in images:
        req = requirements(image, facts)
        mode, reasons = _fit(image, req, node, data_center)
        if measured and image.key in measured and req.vendor == node.vendor:
            reasons.extend(_code_lacks_arch(measured[image.key], node))
        if node.platform and image.platforms and node.platform not in image.platforms:
            reasons.insert(0, Reason(PLATFORM_NOT_BUILT, f"built for "
                                     f"{', '.join(image.platforms)}, the node is "
                                     f"{node.platform}"))
        status = eol_status(image, today, warn_days)
        if status == EOL and image.toolkit and image.toolkit.eol:
            reasons.append(Reason(PAST_EOL, f"end of life since {image.toolkit.eol.isoformat()}"))
        if reasons:
            excluded.append(Exclusion(image, tuple(reasons)))
        else:
            runnable.append(Candidate(image, req, mode, status))
    runnable.sort(key=lambda c: (_MODE_RANK[c.mode], version_sort_key(c.image)))
    excluded.sort(key=lambda e: version_sort_key(e.image))
    return Selection(node, tuple(runnable), tuple(excluded), today)


def _code_lacks_arch(files: Sequence[DeviceCode], node: Node) -> list[Reason]:
    """A reason per library whose device code runs not on NODE's GPU."""
    from ..validate.gpu_code import coverage_findings, describe

    try:
        target = expected_gpus([node.arch])
    except BadArch:
        return []
    by_path = {code.path: code for code in files}
    return [Reason(CODE_LACKS_ARCH, f"{f.path} has no code that runs on {target[0]} "
                                    f"({describe(by_path[f.path])})")
            for f in coverage_findings([(c, "") for c in files], target)]


def _fit(image: ImageSpec, req: Requirements, node: Node,
         data_center: bool) -> tuple[str, list[Reason]]:
    vendor = req.vendor
    if vendor is None:
        return CPU_ONLY, []
    if vendor != node.vendor:
        return NATIVE, [Reason(NO_MATCHING_GPU, f"{image.accelerator} needs an "
                                                f"{_VENDOR_NAME[vendor]} GPU, the node has "
                                                f"{_VENDOR_NAME[node.vendor]}")]
    reasons = []
    mode = NATIVE
    if vendor == "nvidia" and node.driver is not None and req.min_driver is not None:
        if req.native_driver is not None and node.driver >= req.native_driver:
            mode = NATIVE
        elif node.driver >= req.min_driver:
            # Without the shipped driver in the data file, only the floor is certain.
            mode = MINOR_VERSION_COMPAT
        elif data_center and forward_compat_package(image) and \
                _branch_supported(image, node.driver):
            mode = FORWARD_COMPAT
        else:
            reasons.append(Reason(DRIVER_TOO_OLD, _driver_too_old(image, req, node,
                                                                  data_center)))
    if not req.archs:
        reasons.append(Reason(ARCH_UNKNOWN, f"the data file does not know which GPUs "
                                            f"{image.accelerator} {image.version} supports"))
    elif not arch_runs_on(req.archs, node.arch):
        shown = f"sm_{node.arch.replace('.', '')}" if vendor == "nvidia" else node.arch
        reasons.append(Reason(ARCH_NOT_SUPPORTED, f"{shown} not in {' '.join(req.archs)}"))
    return mode, reasons


def _driver_too_old(image: ImageSpec, req: Requirements, node: Node, data_center: bool) -> str:
    needs = f"needs >= {req.native_driver} natively" if req.native_driver else "needs"
    if req.native_driver != req.min_driver:
        needs += f", >= {req.min_driver} under minor-version compatibility"
    if not forward_compat_package(image):
        why = "the image carries no forward-compat package"
    elif not data_center:
        why = "its forward-compat package needs a data-center GPU"
    elif node.driver is not None and not _branch_supported(image, node.driver):
        release = ".".join((image.version or "").split(".")[:2])
        branches = load_driver_branches().supported(release)
        why = (f"driver branch R{node.driver.major} is not one cuda-compat-"
               f"{release.replace('.', '-')} supports: "
               + (", ".join(f"R{b}" for b in branches) if branches else
                  f"the driver-branch table does not list CUDA {release}"))
    else:
        why = ""
    return f"{needs}; node has {node.driver}" + (f" ({why})" if why else "")


def _branch_supported(image: ImageSpec, driver: DriverVersion) -> bool:
    """Whether the forward-compat package of IMAGE's release supports DRIVER's branch
    (data/driver-branches.yaml, NVIDIA's table: never inferred)."""
    release = ".".join((image.version or "").split(".")[:2])
    return load_driver_branches().supports(release, driver.major)


def forward_compat_package(image: ImageSpec) -> bool:
    """Whether the image's rendered Containerfile installs NVIDIA's forward-compat package
    of its own release (cuda-compat-12-9 in a CUDA 12.9 image)."""
    if image.accelerator != "cuda" or not image.version:
        return False
    major, minor = image.version.split(".")[:2]
    package = f"cuda-compat-{major}-{minor}"
    for path in image.containerfiles.values():
        try:
            if package in Path(path).read_text(encoding="utf-8", errors="replace"):
                return True
        except OSError:
            continue
    return False


def scheduling_constraints(image: ImageSpec, facts: ToolkitFacts) -> dict[str, Any]:
    """A pod-spec fragment (nodeSelector + nodeAffinity) keeping `image` on nodes able to run it.

    Uses the labels GPU feature discovery sets; Kubernetes ORs nodeSelectorTerms and ANDs the
    expressions inside one, so "driver >= floor and compute capability supported" becomes the
    cross product of the driver terms and the architecture terms.
    """
    req = requirements(image, facts)
    vendor = req.vendor
    if vendor == "nvidia":
        driver_terms = _driver_terms(req.min_driver) if req.min_driver else [[]]
        arch_terms = _compute_capability_terms(req.archs)
        # Fresh dicts per term: shared objects would serialise as YAML anchors.
        terms = [copy.deepcopy(d + a) for d, a in itertools.product(driver_terms, arch_terms)]
        return _pod_fragment({"nvidia.com/gpu.present": "true", **_cpu_selector(image)}, terms)
    if vendor == "amd":
        ids = sorted({i for gpu in facts.gpus if gpu.vendor == "amd" and gpu.arch in req.archs
                      for i in gpu.pci_device_ids})
        terms = [[_expr("amd.com/gpu.device-id", "In", ids)]] if ids else []
        return _pod_fragment({"feature.node.kubernetes.io/pci-1002.present": "true",
                              **_cpu_selector(image)}, terms)
    return {"nodeSelector": _cpu_selector(image)} if _cpu_selector(image) else {}


def _cpu_selector(image: ImageSpec) -> dict[str, str]:
    """An image built for one CPU platform runs only on nodes of it (a manifest list of
    several lets the runtime pick)."""
    if len(image.platforms) != 1:
        return {}
    system, _, arch = image.platforms[0].partition("/")
    return {"kubernetes.io/os": system, "kubernetes.io/arch": arch}


def _expr(key: str, operator: str, values: list[str]) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": values}


def _driver_terms(floor: DriverVersion) -> list[list[dict[str, Any]]]:
    # driver >= a.b.c  ==  major > a  or  (major == a and minor > b)  or  (... and rev >= c).
    # Equality uses the label's own spelling ("06"), Gt compares integers.
    keys = _NVIDIA_DRIVER_PARTS[1]
    texts = floor.text.split(".")
    terms = []
    for i, part in enumerate(floor.parts):
        threshold = part - 1 if i == len(floor.parts) - 1 else part
        term = [_expr(keys[j], "In", [texts[j]]) for j in range(i)]
        term.append(_expr(keys[i], "Gt", [str(threshold)]))
        terms.append(term)
    return terms


def _compute_capability_terms(archs: Iterable[str]) -> list[list[dict[str, Any]]]:
    allowed: dict[int, set[int]] = {}
    for arch in archs:
        if not arch.startswith("sm_"):
            continue
        parsed = parse_arch(arch)
        major, minor, suffix = parsed.major, parsed.minor, parsed.suffix
        runs_on = {minor} if suffix == "a" else set(range(minor, 10))
        allowed.setdefault(major, set()).update(runs_on)
    # Majors with the same minor constraint share one term: "major In [8, 9, 10, 12]".
    by_constraint: dict[tuple[int, ...], list[int]] = {}
    for major in sorted(allowed):
        by_constraint.setdefault(tuple(sorted(allowed[major])), []).append(major)
    major_key, minor_key = _NVIDIA_COMPUTE
    terms = []
    for minors, majors in by_constraint.items():
        term = [_expr(major_key, "In", [str(m) for m in majors])]
        if minors == tuple(range(minors[0], 10)):
            if minors[0] > 0:
                term.append(_expr(minor_key, "Gt", [str(minors[0] - 1)]))
        else:
            term.append(_expr(minor_key, "In", [str(m) for m in minors]))
        terms.append(term)
    return terms


def _pod_fragment(node_selector: dict[str, str],
                  terms: list[list[dict[str, Any]]]) -> dict[str, Any]:
    fragment: dict[str, Any] = {"nodeSelector": node_selector}
    if terms:
        fragment["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": term} for term in terms]}}}
    return fragment


@dataclass(frozen=True)
class SelectRequest(MatrixImagesOn):
    """Which of a matrix's images run on one node: the node from a Kubernetes Node's JSON
    (NODE_FILE) or from its GPU, compute capability and driver."""

    node_file: Optional[str] = None
    gpu: Optional[str] = None
    compute_capability: Optional[str] = None
    driver: Optional[str] = None
    scheduling: bool = False  # also the nodeSelector/affinity fragment of the best image
    # Build reports (joined, as compat's): the GPU code the validator read.
    report: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeAnswer:
    node: Node
    selection: Selection
    scheduling: Optional[dict[str, Any]]  # of the best image, when asked and one runs


def as_built(image: ImageSpec, built: BuiltImage) -> ImageSpec:
    """IMAGE under the reference a build pushed it to and with the platforms it built."""
    from ..image_reference import split

    repository, tag, _ = split(built.reference)
    return replace(image, repository=repository, tag=tag or image.tag,
                   platforms=built.platforms or image.platforms)


def select_for_node(request: SelectRequest) -> NodeAnswer:
    """The answer to REQUEST: the node it describes, the images that run on it (best first)
    and why every other does not."""
    from ..matrix import EVERYTHING, expand, load
    from ..toolkit.facts import load_facts

    facts = load_facts()
    node = node_from_k8s(facts, request.node_file) if request.node_file else node_from_flags(
        facts, gpu=request.gpu, compute_capability=request.compute_capability,
        driver=request.driver)
    given = request.filters.platforms if request.filters else ()
    if len(given) == 1 and not request.node_file:
        # The platform asked for is the node's: a Grace GPU on an x86 host, say.
        node = replace(node, platform=given[0])
    matrix = load(request.matrix_path)
    images = expand(matrix, build_id=request.build_id, registry=request.registry,
                    filters=request.filters or EVERYTHING)
    measured = None
    if request.report:
        # The images the build made, as it made them: their references (not the matrix's
        # tags), their platforms, and the device code it measured.
        built = report_images(matrix, request, request.report)[1]
        images = [as_built(image, built[image.key]) for image in images if image.key in built]
        measured = {key: image.gpu_code for key, image in built.items()
                    if image.gpu_code is not None}
    selection = select_images(images, facts, node, today=request.today,
                              warn_days=request.warn_days, measured=measured)
    best = selection.runnable[0].image if selection.runnable else None
    fragment = scheduling_constraints(best, facts) \
        if request.scheduling and best is not None else None
    return NodeAnswer(node, selection, fragment)
