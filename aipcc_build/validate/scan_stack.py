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

from collections.abc import Mapping, Sequence

from ..imagefs.kinds import BLOCKDEV, CHARDEV, FIFO, HARDLINK, REGULAR, SYMLINK
from ..imagefs.overlay import LayerIndex, Stack, ancestors
from .index_config import files_the_tools_load
from .results import OVERSIZED, UNREADABLE_RPMDB, LayerScan

DPKG_STATUS = "/var/lib/dpkg/status"
# Where rpm finds its database: RHEL 9's %_dbpath, and Fedora's and RHEL 10's, which keep
# /var/lib/rpm as a link to it. Read through a link, a database is held in memory: at most
# this many bytes (RHEL 9's, a few hundred packages, is a few MB).
RPM_DATABASES = ("/var/lib/rpm/rpmdb.sqlite", "/usr/lib/sysimage/rpm/rpmdb.sqlite")
RPMDB_READ_LIMIT = 256 << 20
# The files that list an image's installed packages: one the validator could not read
# leaves them unjudged.
PACKAGE_DATABASES = frozenset((DPKG_STATUS, *RPM_DATABASES,
                               *(f"{path}-wal" for path in RPM_DATABASES)))
# A toolkit's root (/usr/local/cuda[-X.Y], /opt/rocm[-X.Y.Z]), whose version file its tools
# read through it: the prefix, and how many numbers its versioned name has. (No patterns:
# compiling them would cost every warm validation more than this check.)
_TOOLKIT_ROOTS = (("/usr/local/cuda", 2), ("/opt/rocm", 3))


def _toolkit_root(path: str) -> str:
    """The toolkit root PATH is or lies under ("" for none): "/usr/local/cuda",
    "/usr/local/cuda-12.9", "/opt/rocm-6.4.1"."""
    for prefix, numbers in _TOOLKIT_ROOTS:
        if path == prefix or path.startswith(prefix + "/"):
            return prefix
        if path.startswith(prefix + "-"):
            version = path[len(prefix) + 1:].split("/", 1)[0]
            parts = version.split(".")
            if len(parts) == numbers and all(part.isdigit() for part in parts):
                return f"{prefix}-{version}"
    return ""


def scan_index(scan: LayerScan) -> LayerIndex:
    index = LayerIndex(whiteouts=set(scan.whiteouts), opaque=set(scan.opaque_dirs))
    for path, kind, link in scan.members:
        index.kinds[path] = kind
        if link:
            index.links[path] = link
    for path in scan.content_paths:
        index.kinds.setdefault(path, REGULAR)
    for code in scan.device_code:  # read from a regular file's bytes
        index.kinds.setdefault(code.path, REGULAR)
    for hazard in scan.hazards:  # a regular file not read: a later copy replaces it
        if hazard.kind in (OVERSIZED, UNREADABLE_RPMDB):
            index.kinds.setdefault(hazard.path, REGULAR)
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
    """The files programs read (dpkg's status, rpm's database, pip's and uv's config
    files, a toolkit's version file, and whatever a layer links at a name the scan reads)
    that a link leads to, or that a hard link shares with a file of another name: their
    bytes are to be read from the layers, as the program reads them (a device or FIFO
    there, which the scan does not read, is named by that read)."""
    wanted = {DPKG_STATUS, *RPM_DATABASES, *files_the_tools_load(env)}
    for scan in scans:
        for path, kind, _ in scan.members:
            if kind in (SYMLINK, HARDLINK) and path in scan.content_paths:
                wanted.add(path)
            elif kind == SYMLINK and _toolkit_root(path) == path:
                wanted.update((f"{path}/.info/version",) if path.startswith("/opt/") else
                              (f"{path}/version.json", f"{path}/version.txt"))
    linked = []
    for path in sorted(wanted):
        found = stack.resolve(path)
        if found.path == path and found.kind not in (HARDLINK, CHARDEV, BLOCKDEV, FIFO):
            continue  # read under its own name, or absent (a device or FIFO: not read)
        if found.layer is not None and found.kind == REGULAR and \
                found.path in scans[found.layer].content_paths:
            continue  # the scan read it where the link leads (/usr/local/cuda -> cuda-12.9)
        if found.layer is None and "-" in _toolkit_root(found.path):
            continue  # the scan reads every version file of a toolkit's root: none there
        linked.append(path)
    return linked
