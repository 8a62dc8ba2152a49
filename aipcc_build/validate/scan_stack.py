"""The final-tree model (`imagefs.overlay`) of an image from its cached layer scans: each
scan's members, whiteouts and opaque directories as a `LayerIndex`, stacked. The judge
asks it which layer hides each piece of evidence and where a file a program reads lands.

A scan keeps what can decide those questions (`layers._modelled`), not every path: the
directories above what it holds count as directories of its layer, and evidence whose
kind the scan did not keep counts as a directory, which merges with what is below it and
hides less; a path the scan did not keep is one the layer says nothing about. Both err
towards showing lower evidence: a false failure, never a false pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..imagefs.overlay import LayerIndex, Stack, ancestors
from ..imagefs.tar import HARDLINK, REGULAR, SYMLINK
from ..toolkit.spellings import CUDA_ROOT, ROCM_ROOT
from .index_config import files_the_tools_load
from .results import LayerScan

DPKG_STATUS = "/var/lib/dpkg/status"
# A toolkit's root, whose version file its tools read through it.
_CUDA_LINK = re.compile(rf"^(?:/usr/local/cuda|{CUDA_ROOT})$")
_ROCM_LINK = re.compile(rf"^(?:/opt/rocm|{ROCM_ROOT})$")
_TOOLKIT_FILE = re.compile(rf"^(?:{CUDA_ROOT}|{ROCM_ROOT})/")


def scan_index(scan: LayerScan) -> LayerIndex:
    index = LayerIndex(whiteouts=set(scan.whiteouts), opaque=set(scan.opaque_dirs))
    for path, kind, link in scan.members:
        index.kinds[path] = kind
        if link:
            index.links[path] = link
    for path in scan.content_paths:
        index.kinds.setdefault(path, REGULAR)
    held = [*index.kinds, *index.whiteouts, *index.opaque]
    for evidence in scan.evidence:
        if evidence.path not in index.kinds:
            index.directories.add(evidence.path)
        held.append(evidence.path)
    for setting in scan.index_settings:
        held.append(setting.source)
    for hazard in scan.hazards:
        held.append(hazard.path)
    for path in held:
        index.directories.update(ancestors(path))
    index.directories.update(index.opaque)
    index.directories.discard("/")
    return index


def stack_of(scans: Sequence[LayerScan]) -> Stack:
    """The final tree of an image of SCANS (bottom first)."""
    return Stack.of([scan_index(scan) for scan in scans])


def read_through_links(env: Mapping[str, str], scans: Sequence[LayerScan],
                       stack: Stack) -> list[str]:
    """The files programs read (dpkg's status, pip's and uv's config files, a toolkit's
    version file, and whatever a layer links at a name the scan reads) that a link leads
    to, or that a hard link shares with a file of another name: their bytes are to be
    read from the layers, as the program reads them."""
    wanted = {DPKG_STATUS, *files_the_tools_load(env)}
    for scan in scans:
        for path, kind, _ in scan.members:
            if kind in (SYMLINK, HARDLINK) and path in scan.content_paths:
                wanted.add(path)
            elif kind == SYMLINK and _CUDA_LINK.match(path):
                wanted.update((f"{path}/version.json", f"{path}/version.txt"))
            elif kind == SYMLINK and _ROCM_LINK.match(path):
                wanted.add(f"{path}/.info/version")
    linked = []
    for path in sorted(wanted):
        found = stack.resolve(path)
        if found.path == path and found.kind != HARDLINK:
            continue  # read under its own name, or absent
        if found.layer is not None and found.kind == REGULAR and \
                found.path in scans[found.layer].content_paths:
            continue  # the scan read it where the link leads (/usr/local/cuda -> cuda-12.9)
        if found.layer is None and _TOOLKIT_FILE.match(found.path):
            continue  # the scan reads every version file of a toolkit's root: none there
        linked.append(path)
    return linked
