"""From layer scans to an image verdict: only the final filesystem decides.

The final filesystem is the one model of it (`imagefs.overlay`), stacked from the layer
scans (`scan_stack`): evidence a later layer hides (a whiteout, an opaque directory, a
non-directory above it, a later copy of the same version file) is still shipped bytes, so it
becomes a warning, or a violation with `strict_layers`; what files programs read through
links hold comes in read from the layers. Then every piece of evidence is compared with the
expectation, and the allowlist turns deliberate exceptions into visible `allowed` findings.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Optional

from .. import image_labels
from ..imagefs.kinds import SYMLINK
from ..patterns import lazy
from ..records import replace
from ..toolkit.spellings import CUDA_ROOT, ROCM_ROOT
from .config_env import config_evidence, major_minor
from .index_config import (
    TOOL_STOPS,
    UNJUDGED_SETTINGS,
    files_the_tools_load,
    index_checks,
)
from .results import (
    ALLOWED,
    BACKEND,
    LINKED,
    OK,
    OVERSIZED,
    PRIVATE_TOOLCHAIN,
    ROCM_BUILD,
    SETUID,
    UNPARSABLE,
    UNREAD,
    UNREADABLE_RPMDB,
    VIOLATION,
    WARNING,
    Evidence,
    Expectation,
    Finding,
    ImageVerdict,
    LayerScan,
)
from .scan_stack import PACKAGE_DATABASES, stack_of

# Why a package database the validator did not read fails the image.
UNJUDGED_PACKAGES = "the image's installed packages were not judged"
# The hazards of a file a program reads that the validator could not judge: they fail the
# image where the program reads that copy.
_UNREAD_KINDS = frozenset((UNPARSABLE, OVERSIZED, UNREADABLE_RPMDB, UNREAD))

# The CUDA component table's module (`toolkit.components`) is imported by the functions
# that place and judge evidence: the judge of an image without toolkit evidence loads none
# of it (issue 37).

if TYPE_CHECKING:
    from ..imagefs.image import PlatformImage
    from ..imagefs.lookup import FileRead
    from ..imagefs.overlay import Stack
    from ..matrix.model import AllowRule

MIXED = "mixed"  # the evidence kind of the finding that reports an unlabelled mix
# Evidence of a build for a family, with or without the release it names.
_BUILDS = frozenset({"cuda-build", ROCM_BUILD, LINKED, "dist-info", "build-info"})
_FAMILY_NAMES = {"cuda": "CUDA", "rocm": "ROCm"}
FAMILIES = ("cuda", "rocm")
# Symlinks whose target names the toolkit the image runs with.
TOOLKIT_LINKS = {"/usr/local/cuda": ("cuda", lazy(rf"^{CUDA_ROOT}$")),
                 "/opt/rocm": ("rocm", lazy(rf"^{ROCM_ROOT}$"))}
_NAME_TOOLKIT = lazy(r"(?:^|[-_/.])(cuda|rocm)-?(\d+\.\d+)(?:$|[-_/.:])")
# A FROMAGER_VARIANT naming a toolkit version ("cuda-12.8-deb12", "rocm6.4-ubi9"): variants
# stay generic, the version lives in the index URL and the labels.
_VERSIONED_VARIANT = lazy(r"(?:^|[-_.])(?:cuda|rocm|cu|hip)-?\d+(?:[._]\d+)?(?:$|[-_.])")


def _copy(evidence: Evidence) -> bool:
    """Whether EVIDENCE is a copy of the toolkit that the image runs with: not a build
    record (a framework built with CUDA 12.2 runs on 12.8), not a private toolchain."""
    return not evidence.built and evidence.kind != PRIVATE_TOOLCHAIN


def place(evidence: Evidence) -> Optional[tuple[str, ...]]:
    """The releases EVIDENCE belongs to (`resolve`); a component on its own scheme takes
    the CUDA major from the distribution that brought it (nvidia-cudnn-cu12)."""
    from ..toolkit.components import OWN_SCHEME, built_for, resolve, scheme

    releases = resolve(evidence)
    if releases is None and evidence.distribution and scheme(evidence.component) == OWN_SCHEME:
        _, build = built_for(evidence.distribution.split(" ")[0].replace("_", "-"))
        if build:
            return (build.split(".")[0],)
    return releases


def _expectation_from_labels(labels: Mapping[str, str]) -> Optional[Expectation]:
    accelerator = labels.get(image_labels.ACCELERATOR)
    if not accelerator:
        return None
    return Expectation(accelerator, labels.get(image_labels.ACCELERATOR_VERSION) or None,
                       labels.get(image_labels.VARIANT) or None, source="labels",
                       index=labels.get(image_labels.WHEEL_INDEX) or None)


def _infer(present: Sequence[tuple[Evidence, Optional[tuple[str, ...]]]],
           env: Mapping[str, str], family: Optional[str] = None) -> Expectation:
    """At most one family and one major.minor: the config's toolkit, else the commonest."""
    for key, toolkit in (("CUDA_VERSION", "cuda"), ("ROCM_VERSION", "rocm")):
        if env.get(key) and family in (None, toolkit):
            return Expectation(toolkit, major_minor(env[key]), source="inferred")
    counts: Counter[tuple[str, str]] = Counter(
        (e.toolkit, r) for e, releases in present if releases and _copy(e)
        for r in releases if "." in r and family in (None, e.toolkit))
    if not counts:
        return Expectation(family or "cpu", source="inferred")
    (toolkit, release), _ = max(
        counts.items(), key=lambda kv: (kv[1], [int(x) for x in kv[0][1].split(".")]))
    return Expectation(toolkit, release, source="inferred")


def _common_release(present: Sequence[tuple[Evidence, Optional[tuple[str, ...]]]],
                    family: str) -> tuple[Optional[str], list[str]]:
    """The one major.minor every piece of FAMILY evidence fits, and the releases present.

    Evidence mapping to several releases (cuSPARSE 12.5.x) or a major only (cupy-cuda12x)
    fits any of them; with no release all evidence fits, the image is a mix."""
    pinned = [r for e, r in present
              if r and e.toolkit == family and _copy(e) and any("." in x for x in r)]
    candidates = sorted({x for r in pinned for x in r if "." in x},
                        key=lambda r: [int(p) for p in r.split(".")])
    if not candidates:
        return None, candidates
    from ..toolkit.components import fits

    common = [c for c in candidates if all(fits(r, c) for r in pinned)]
    return (common[-1] if common else None), candidates


def _mixed_finding(present: Sequence[tuple[Evidence, Optional[tuple[str, ...]]]],
                   family: str, releases: Sequence[str]) -> Finding:
    examples = []
    for release in releases:
        holders = [e for e, r in present
                   if e.toolkit == family and r and release in r]
        first = holders[0]
        more = f" and {len(holders) - 1} more" if len(holders) > 1 else ""
        examples.append(f"{family} {release} ({first.component} {first.version} at "
                        f"{first.path}{more})")
    return Finding(
        VIOLATION, MIXED, "image",
        f"MIXED {family} releases {' and '.join(releases)}: {'; '.join(examples)}; no label, "
        "matrix or expectation says which one the image is meant to hold", toolkit=family,
        version=", ".join(releases), component="releases")


def _unplaced(evidence: Evidence, expected: Expectation) -> tuple[str, str]:
    """A CUDA component version the table cannot place: a warning that says why, unless
    its name places it in another CUDA major."""
    from ..toolkit.components import (
        OWN_SCHEME,
        RELEASE_NUMBERED,
        built_for,
        known_releases,
        knows_release,
        release_components,
        scheme,
    )

    release = expected.release
    what = f"{evidence.component} {evidence.version}".strip()
    if evidence.toolkit != "cuda" or release is None:
        return WARNING, f"{what}: its CUDA release is unknown"
    base, build = built_for(evidence.component)
    major = release.split(".")[0]
    if build and build.split(".")[0] != major:
        return VIOLATION, (f"{what} is built for CUDA {build} (its name says so), not for "
                           f"CUDA {release}")
    if not knows_release(release):
        return WARNING, (f"the component table does not know CUDA {release} yet: cannot tell "
                         f"whether {what} belongs to it (rerun scripts/gen-cuda-components)")
    kind = scheme(base)
    if kind == OWN_SCHEME:
        return WARNING, (f"{base} is versioned on its own scheme and built per CUDA major; "
                         f"nothing names the major this copy was built for (no -cuNN "
                         f"distribution brought it): cannot tell whether it is CUDA {major}'s")
    if kind is None:
        return WARNING, (f"{what}: not a component the table knows (it lists every wheel "
                         "NVIDIA's cuda-toolkit pins): cannot place it")
    numbered = re.match(r"(\d{1,2})\.\d+", evidence.version)
    if kind == RELEASE_NUMBERED and numbered and numbered.group(1) != major:
        # An older or newer CUDA major than the table lists (cudart 11.8.89): the
        # numbering still names it. CUPTI's year numbering (2025.1.1) is not a major.
        return VIOLATION, (f"{what}: {base} follows the CUDA release numbering, so it is "
                           f"CUDA {major_minor(evidence.version)}'s, not CUDA {release}'s")
    if kind == RELEASE_NUMBERED:
        return WARNING, (f"{what}: {base} follows the CUDA release numbering, but "
                         f"{major_minor(evidence.version) or evidence.version} is no CUDA "
                         "release the table knows (a private build or a new numbering?): "
                         "cannot place it")
    listed = sorted({v for full in known_releases() if full.rsplit(".", 1)[0] == release
                     for name, v in release_components(full).items() if name == base})
    table_says = (f"; the table lists {', '.join(listed)} for CUDA {release}"
                  if listed else "")
    return WARNING, (f"{what}: no CUDA release pins this {base} version (its numbering is its "
                     f"own), so it cannot be placed{table_says}")


def _private(evidence: Evidence, releases: Optional[tuple[str, ...]],
             expected: Expectation) -> tuple[str, str]:
    """A toolchain a package keeps for itself (triton's ptxas, CUPTI): not the image's
    runtime; a warning only where it cannot belong."""
    from ..toolkit.components import fits

    whose = evidence.detail or "a private toolchain"
    if expected.accelerator != "cuda":
        return WARNING, (f"{whose}: a CUDA toolchain in a {expected} image, unused without an "
                         "NVIDIA GPU (not loaded as the image's runtime)")
    if not releases:
        return OK, f"{whose}: not the image's toolkit (not loaded as its runtime)"
    if expected.release is None or fits(releases, expected.release):
        return OK, f"{whose}, of CUDA {', '.join(releases)}: not the image's runtime"
    return WARNING, (f"{whose}, of CUDA {', '.join(releases)}, in a {expected} image: not "
                     "loaded as the image's runtime")


def _built(evidence: Evidence, releases: tuple[str, ...], expected: Expectation
           ) -> tuple[str, str]:
    """A build record naming another release than the image's: a build for an older minor
    of the same major runs on the image's runtime (CUDA's minor-version compatibility; a
    HIP runtime keeps its soname, libamdhip64.so.N, across ROCm N.x); a newer minor or
    another major needs another runtime. The same rule for both families."""
    assert expected.release is not None
    built, name = releases[0], _FAMILY_NAMES[evidence.toolkit]
    major, minor = (int(p) for p in expected.release.split("."))
    parts = [int(p) for p in built.split(".")]
    if parts[0] == major and len(parts) > 1 and parts[1] < minor:
        return WARNING, (f"built with {name} {built}: it runs on the image's {name} "
                         f"{expected.release} runtime of the same major")
    return VIOLATION, (f"{evidence.toolkit} {built} in a {expected} image: a build for "
                       f"{name} {built} needs another runtime than the image's")


def _backend_finding(directory: str, found: Sequence[tuple[Evidence, str]],
                     expected: Expectation) -> Finding:
    """One package's backends, picked among at run time (bitsandbytes): ok when one of them
    is for the image's family and release (a CPU one for a CPU image), a violation when
    none is. The same rule in every family: the package loads at most one of them, the
    one for the image it runs in."""
    from ..toolkit.components import fits

    first, digest = found[0]
    names = sorted({(e.toolkit, e.release or "") for e, _ in found},
                   key=lambda n: (n[0], [int(p) for p in n[1].split(".") if p.isdigit()]))
    listed = ", ".join(f"{f} {r}".strip() for f, r in names)
    family, release = expected.accelerator, expected.release
    fitting = [e for e, _ in found if e.toolkit == family and (
        release is None or not e.release or fits((e.release,), release))]
    if fitting:
        status, reason = OK, (f"{len(found)} backends ({listed}); it loads the one for "
                              f"{expected} at run time ({fitting[0].path.rsplit('/', 1)[-1]})")
    else:
        status, reason = VIOLATION, (f"{len(found)} backends ({listed}), none for a "
                                     f"{expected} image: it has nothing to load here")
    return Finding(status, BACKEND, directory, reason, toolkit=family if fitting else None,
                   version=release, component=first.component, layer_digest=digest,
                   distribution=first.distribution)


def judge_evidence(evidence: Evidence, releases: Optional[tuple[str, ...]],
                   expected: Expectation, *, loaded: bool = False) -> tuple[str, str]:
    """(status, reason) of one piece of evidence in an image that should hold EXPECTED; the
    wheel index judges the wheels it publishes with it too. LOADED: the image loads the
    file as its runtime (its directory is on LD_LIBRARY_PATH)."""
    status, reason = _judge(evidence, releases, expected, loaded)
    if evidence.detail and evidence.kind != PRIVATE_TOOLCHAIN:  # _private says it
        reason += f" ({evidence.detail})"
    return status, reason


def _judge(evidence: Evidence, releases: Optional[tuple[str, ...]], expected: Expectation,
           loaded: bool) -> tuple[str, str]:
    from ..toolkit.components import fits

    found = f"{evidence.toolkit} {', '.join(releases)}" if releases else evidence.toolkit
    if evidence.kind == PRIVATE_TOOLCHAIN and not loaded:
        return _private(evidence, releases, expected)
    if expected.accelerator not in FAMILIES:
        return VIOLATION, f"{found} evidence in a {expected.accelerator} image"
    if evidence.toolkit != expected.accelerator:
        return VIOLATION, f"second accelerator family: {found} in a {expected} image"
    if not releases and evidence.built and evidence.kind in _BUILDS:
        return OK, f"a {evidence.toolkit.upper()} build in a {expected} image"
    if not releases:
        return _unplaced(evidence, expected)
    if expected.release is None or fits(releases, expected.release):
        return OK, f"{found} matches the expected {expected}"
    if evidence.built:
        return _built(evidence, releases, expected)
    return VIOLATION, f"{found} in a {expected} image"


def _rule_matches(rule: AllowRule, finding: Finding) -> bool:
    if rule.toolkit and rule.toolkit != finding.toolkit:
        return False
    if rule.component:
        component = finding.component or ""
        if rule.component != component and rule.component != re.sub(r"-cu\d+$", "", component):
            return False
    if rule.versions:
        values = [v for v in (finding.version, finding.component_version) if v]
        if not any(v.startswith(prefix) for v in values for prefix in rule.versions):
            return False
    if not rule.path:
        return True
    import fnmatch  # only a rule with a path needs it: not a warm validation's start

    return fnmatch.fnmatchcase(finding.path, rule.path)


def _apply_allowlist(findings: list[Finding], rules: Sequence[AllowRule]
                     ) -> tuple[list[Finding], tuple[AllowRule, ...]]:
    used: set[int] = set()
    result = []
    for finding in findings:
        if finding.status in (VIOLATION, WARNING):
            for number, rule in enumerate(rules):
                if _rule_matches(rule, finding):
                    used.add(number)
                    finding = replace(finding, status=ALLOWED,
                                      reason=f"{rule.reason} (was {finding.status}: "
                                             f"{finding.reason})")
                    break
        result.append(finding)
    return result, tuple(r for n, r in enumerate(rules) if n not in used)


def _config_checks(image: PlatformImage, ref: str, expected: Expectation) -> list[Finding]:
    findings = []
    env, labels = image.env, image.labels
    actual = env.get("FROMAGER_VARIANT")
    variant = (expected.variant if expected.variant is not None
               else labels.get(image_labels.VARIANT))
    if actual is not None and _VERSIONED_VARIANT.search(actual):
        wanted = f", expected {variant!r}" if variant and variant != actual else ""
        findings.append(Finding(
            VIOLATION, "config", "config:Env/FROMAGER_VARIANT",
            f"FROMAGER_VARIANT {actual!r} names a toolkit version: variants are generic "
            f"(the version belongs in the index URL and the labels){wanted}",
            component="FROMAGER_VARIANT", component_version=actual))
    elif variant is not None and actual != variant:
        findings.append(Finding(
            VIOLATION, "config", "config:Env/FROMAGER_VARIANT",
            f"FROMAGER_VARIANT is {actual!r}, expected the generic {variant!r}"
            if actual is not None else
            f"FROMAGER_VARIANT is not set, expected {variant!r}",
            component="FROMAGER_VARIANT", component_version=actual))
    label_accel = labels.get(image_labels.ACCELERATOR)
    label_version = labels.get(image_labels.ACCELERATOR_VERSION)
    if label_accel and expected.source != "labels":
        label_release = major_minor(label_version) if label_version else None
        if label_accel != expected.accelerator or (
                label_release and expected.release and label_release != expected.release):
            findings.append(Finding(
                VIOLATION, "config", f"config:Labels/{image_labels.ACCELERATOR}",
                f"labels say {label_accel} {label_version or ''}".rstrip()
                + f", expected {expected}", component="labels",
                component_version=f"{label_accel} {label_version or ''}".rstrip()))
    architecture = image.config.get("architecture")
    declared = image.platform.split("/")
    if isinstance(architecture, str) and len(declared) > 1 and (
            declared[1] != architecture or declared[0] != image.config.get("os", declared[0])):
        findings.append(Finding(
            VIOLATION, "config", "config:architecture",
            f"the index declares this image {image.platform}, but its config says "
            f"{image.config.get('os')}/{architecture}: it would be pulled for the wrong "
            "machine", component="platform", component_version=image.platform))
    name = ref.rsplit("/", 1)[-1]
    # The literals first: most names hold neither, and need not compile the pattern.
    named = _NAME_TOOLKIT.search(name) if "cuda" in name or "rocm" in name else None
    if named and label_accel and label_version and (
            (named.group(1), named.group(2)) != (label_accel, major_minor(label_version))):
        findings.append(Finding(
            VIOLATION, "config", f"config:Labels/{image_labels.ACCELERATOR_VERSION}",
            f"image name says {named.group(1)} {named.group(2)}, labels say "
            f"{label_accel} {label_version}", component="labels",
            component_version=label_version))
    return findings


def judge(*, ref: str, image: PlatformImage, scans: Sequence[LayerScan],
          stack: Optional[Stack] = None, expect: Optional[Expectation] = None,
          allow: Sequence[AllowRule] = (), strict_layers: bool = False,
          reads: Optional[Mapping[str, FileRead]] = None,
          read_through: Sequence[LayerScan] = (), rootfs: Sequence[Finding] = (),
          gpu: Sequence[Finding] = (), layers_read: Optional[str] = None,
          cached_layers: int = 0) -> ImageVerdict:
    """The verdict on IMAGE (named REF) from its layer SCANS and their final tree STACK
    (`scan_stack.stack_of(SCANS)` when not given), against EXPECT (else its labels, else
    what it holds); ALLOW turns deliberate exceptions into `allowed`; STRICT_LAYERS fails
    evidence a later layer removes. Read from its layers after the scans: READS, the
    `unread_named_files`; READ_THROUGH, what the files programs read through links hold
    (`linked_files`), one scan each named after the layer holding the bytes. ROOTFS: the
    findings on the config's diff_ids; GPU: the device code's coverage of the expected GPU
    architectures (`gpu_code.coverage_findings`); LAYERS_READ and CACHED_LAYERS: how the layers were
    read."""
    reads = reads or {}
    stack = stack or stack_of(scans)
    # (evidence, releases, layer digest, removed by layer number)
    items: list[tuple[Evidence, Optional[tuple[str, ...]], Optional[str], Optional[int]]] = []
    backends: dict[str, list[tuple[Evidence, str]]] = {}  # directory -> its backends
    for number, scan in enumerate(scans):
        for evidence in scan.evidence:
            gone = stack.hider(number, evidence.path)
            if evidence.kind == BACKEND:
                if gone is None:
                    backends.setdefault(evidence.path.rsplit("/", 1)[0], []).append(
                        (evidence, scan.digest))
                continue
            items.append((evidence, place(evidence), scan.digest, gone))
    for scan in read_through:
        items.extend((evidence, place(evidence), scan.digest, None) for evidence in scan.evidence)
    for link, (toolkit, pattern) in TOOLKIT_LINKS.items():
        if stack.top(link)[1] == SYMLINK:
            target = stack.resolve(link).path
            match = pattern.match(target)
            if match:
                release = major_minor(match.group(1)) or match.group(1)  # X.Y of X.Y[.Z]
                evidence = Evidence("symlink", link, toolkit, "toolkit", target, release)
                items.append((evidence, (release,), None, None))
    configured = config_evidence(image.env)
    if configured:
        from ..toolkit.components import resolve

        items.extend((evidence, resolve(evidence), None, None) for evidence in configured)
    library_path = {p.rstrip("/") for p in image.env.get("LD_LIBRARY_PATH", "").split(":") if p}

    present = [(e, r) for e, r, _, gone in items if gone is None]
    findings: list[Finding] = []
    mixed: dict[str, list[str]] = {}  # family -> its releases, in an unlabelled mix
    expected = expect or _expectation_from_labels(image.labels)
    if expected is None and not any(image.env.get(k) for k in ("CUDA_VERSION", "ROCM_VERSION")):
        # Nothing states what the image is for: when its evidence has no single release in
        # common, it is a mix, and no release is singled out as the expected one.
        for family in FAMILIES:
            common, candidates = _common_release(present, family)
            if common is None and len(candidates) > 1:
                findings.append(_mixed_finding(present, family, candidates))
                mixed[family] = candidates
                expected = expected or Expectation(family, source="inferred")
    if expected is None:
        expected = _infer(present, image.env)
    elif expected.accelerator in FAMILIES and not mixed and (
            expected.release is None or "." not in expected.release):
        # No release, or a major only (cuda=13: any 13.x): the one the evidence holds.
        inferred = _infer(present, image.env, expected.accelerator)
        if expected.release is None or \
                (inferred.release or "").split(".")[0] == expected.release:
            expected = replace(expected, version=inferred.version)

    for evidence, releases, digest, gone in items:
        status, reason = judge_evidence(
            evidence, releases, expected,
            loaded=evidence.path.rsplit("/", 1)[0] in library_path)
        if evidence.toolkit in mixed and releases and status == OK:
            status = WARNING
            reason = (f"{evidence.toolkit} {', '.join(releases)}: part of a mix of "
                      f"{evidence.toolkit} {', '.join(mixed[evidence.toolkit])}")
        if gone is not None:
            reason += f"; removed by layer {gone + 1} ({scans[gone].digest[:19]}) " \
                      "but its bytes still ship in a lower layer"
            if status != OK:
                status = VIOLATION if strict_layers else WARNING
        findings.append(Finding(
            status, evidence.kind, evidence.path, reason, toolkit=evidence.toolkit,
            version=", ".join(releases) if releases else None, component=evidence.component,
            component_version=evidence.version, layer_digest=digest,
            distribution=evidence.distribution))
    loaded = files_the_tools_load(image.env)
    layered: list[tuple[Optional[int], LayerScan]] = [*enumerate(scans)]
    for layer, scan in (*layered, *((None, scan) for scan in read_through)):
        for hazard in scan.hazards:
            status = VIOLATION if hazard.severe else WARNING
            reason = f"{hazard.kind}: {hazard.detail}"
            # Only the copy the image ends with is read: a pip.conf elsewhere (a package's
            # example), or a lower copy a later layer replaces, stays a warning.
            if hazard.kind in _UNREAD_KINDS and \
                    (layer is None or stack.hider(layer, hazard.path) is None):
                tool = loaded.get(hazard.path)
                if tool and hazard.kind == UNPARSABLE:
                    status, reason = VIOLATION, f"{reason}: {TOOL_STOPS[tool]}"
                elif tool and hazard.kind == OVERSIZED:
                    status, reason = VIOLATION, f"{reason}: {UNJUDGED_SETTINGS[tool]}"
                elif hazard.path in PACKAGE_DATABASES and hazard.kind != UNPARSABLE:
                    # What the package manager reads: a gate fails closed.
                    status, reason = VIOLATION, f"{reason}: {UNJUDGED_PACKAGES}"
            if hazard.kind == SETUID and layer == 0:
                # The lowest layer is the distribution's root filesystem, whose su, passwd,
                # mount... are set-user-ID by design: listed, not warned about.
                status, reason = OK, f"{reason}; from the base layer"
            findings.append(Finding(status, "layer", hazard.path, reason,
                                    component=hazard.kind, layer_digest=scan.digest))
    findings.extend(_backend_finding(directory, found, expected)
                    for directory, found in sorted(backends.items()))
    findings.extend(_config_checks(image, ref, expected))
    findings.extend(index_checks(image, scans, stack, expected, reads, read_through))
    findings, stale = _apply_allowlist(findings, allow)
    findings.extend(rootfs)
    findings.extend(gpu)

    toolkits: dict[str, set[str]] = {}
    for evidence, releases in present:
        for release in releases or ():
            if "." in release:
                toolkits.setdefault(evidence.toolkit, set()).add(release)
    errors = [s.error for s in scans if s.error]
    errors += sorted({r.error for r in reads.values() if r.error})
    return ImageVerdict(
        ref=ref, platform=image.platform, digest=image.digest, expected=expected,
        toolkits={k: tuple(sorted(v, key=lambda r: [int(x) for x in r.split(".")]))
                  for k, v in sorted(toolkits.items())},
        findings=tuple(findings), stale_rules=stale, layers=len(scans),
        cached_layers=cached_layers, layers_read=layers_read,
        error="; ".join(errors) if errors else None)
