"""Scan one layer for evidence and hazards, read by the engine's rules (`imagefs`).

The caller runs one layer per process to use every core. Members are named, placed and
refused as the container engine does it: a member the engine would refuse (a name held
twice, a type it cannot create, a hard link to nothing) ends the scan
with a severe hazard naming the layer and why, since the engine would not run the image.
"""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path
from typing import Optional

from ..imagefs.blobs import LayerJob
from ..imagefs.overlay import (
    IMPLIED_DIRECTORY_MODE,
    WHITEOUT,
    LayerRefused,
    Node,
    Tree,
    Unpacker,
    member_of,
)
from ..imagefs.paths import climbs, parent_and_base
from ..imagefs.stream import LayerStream, RefusedLayer, read_layer
from ..imagefs.symlinks import Budget, BudgetExceeded, resolve_link
from ..imagefs.tar import (
    BLOCKDEV,
    CHARDEV,
    DIRECTORY,
    FIFO,
    HARDLINK,
    MAX_MEMBER_SIZE,
    REGULAR,
    SYMLINK,
    TarError,
    TarWalker,
)
from .detect import (
    CANDIDATE,
    CANDIDATE_BYTES,
    WANT_FILE,
    WANT_MEMORY,
    WANT_PREFIX,
    LayerDetector,
)
from .results import REFUSED_LAYER, SETUID, Hazard, LayerScan

_PLAIN_KINDS = (REGULAR, DIRECTORY, FIFO)
REFUSED = REFUSED_LAYER
# Symlinks that can name a toolkit (/usr/local/cuda -> /etc/alternatives/cuda ->
# /usr/local/cuda-12.9) or lead to a file the verdict reads (/var/lib/dpkg, /etc/pip.conf);
# the library farms below these prefixes lead to neither, and are only checked for loops.
TOOLKIT_PREFIXES = ("/usr/local/", "/opt/", "/etc/alternatives/")
_LINK_FARMS = ("/usr/lib/", "/usr/lib64/", "/usr/share/", "/usr/bin/", "/usr/sbin/",
               "/usr/include/", "/usr/libexec/", "/lib/", "/lib64/", "/bin/", "/sbin/",
               "/etc/ssl/", "/etc/rc", "/etc/systemd/", "/etc/fonts/")
# Fedora's and RHEL 10's rpm keep their database here, below a library farm: a link on the
# way to it is kept like a toolkit's.
_RPM_HOME = "/usr/lib/sysimage"
# A member this shallow (or named like a directory evidence sits in) may stand where a lower
# layer holds the directory of a toolkit: /usr/local/cuda-12.9 as a file or a directory.
_SHALLOW = 3


def escapes_root(path: str, target: str) -> bool:
    """Whether a relative symlink target climbs above the image root (absolute ones cannot)."""
    if target.startswith("/"):
        return False
    depth = path.count("/") - 1  # directories above the link: "/a/b/link" -> 2
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


# Mode bits that make a member worth a look: set-user-ID, set-group-ID, writable by others.
ODD_MODE = 0o6002
# Directories where files writable by everyone are the point (all sticky on real systems).
SHARED_DIRS = ("/tmp/", "/var/tmp/", "/dev/shm/", "/run/lock/", "/var/lock/")


def mode_hazard(path: str, kind: str, mode: int) -> Optional[Hazard]:
    """Layer hygiene from a member's mode: a set-user-ID or set-group-ID file, a file
    writable by everyone outside the shared temporary directories, a directory writable
    by everyone without the sticky bit (anyone may delete anyone's files in it). Never
    severe: real base images ship /usr/bin/su and passwd set-user-ID."""
    if kind == REGULAR and mode & 0o6000:
        bits = " and ".join(name for bit, name in ((0o4000, "set-user-ID"),
                                                   (0o2000, "set-group-ID")) if mode & bit)
        return Hazard(SETUID, path, f"{bits} file (mode {mode:04o})", severe=False)
    if kind == REGULAR and mode & 0o002 and not path.startswith(SHARED_DIRS):
        return Hazard("world-writable", path, f"file writable by everyone (mode {mode:04o})",
                      severe=False)
    if kind == DIRECTORY and mode & 0o002 and not mode & 0o1000:
        return Hazard("world-writable", path, "directory writable by everyone without the "
                      f"sticky bit (mode {mode:04o})", severe=False)
    return None


def _modelled(path: str, kind: str) -> bool:
    """Whether the final-tree model keeps this member of a layer (the cache holds them):
    what can hide evidence of a lower layer, name a toolkit, or lead to a file read."""
    if kind == SYMLINK:
        return path.startswith(TOOLKIT_PREFIXES) or not path.startswith(_LINK_FARMS) \
            or path.startswith(_RPM_HOME)
    if path.endswith(".dist-info"):
        return True
    depth = path.count("/")
    if depth < _SHALLOW and kind != DIRECTORY:  # /opt/venv as a file hides a lower tree
        return True
    if depth <= _SHALLOW:  # /usr/local/cuda-12.9, not each of /usr/bin's files
        return CANDIDATE_BYTES.search(path.encode("utf-8", "surrogateescape")) is not None
    return kind != REGULAR and kind != DIRECTORY and read_by_name(path)


def read_by_name(path: str) -> bool:
    """Whether the scan reads the bytes of a regular file at PATH (a version, status or
    config file, an RPM database): a link there is read through, as the program that
    reads it would."""
    return LayerDetector().visit(path, REGULAR, 0) in (WANT_MEMORY, WANT_FILE)


def _walk(stream: LayerStream, detector: LayerDetector, workdir: Path,
          hazards: list[Hazard], unpacker: Unpacker) -> int:
    """Unpack the layer's members into the model (`Unpacker`, the engine's rules) and show
    each to the detector where the engine puts it; the number of members. The cyclic
    garbage collector waits until the walk ends: the walk makes a node, an entry and a few
    strings per member and no cycle, and the collector's passes over the growing tree were
    4-5% of a walk of 56,000 members (reference counting still frees what the walk
    drops)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _walk_members(stream, detector, workdir, hazards, unpacker)
    finally:
        if collecting:
            gc.enable()


def _walk_members(stream: LayerStream, detector: LayerDetector, workdir: Path,
                  hazards: list[Hazard], unpacker: Unpacker) -> int:
    walker = TarWalker(stream)
    visit = detector.visit
    looks_interesting = CANDIDATE.search
    # The unpacker places the members this loop would pass over without showing them:
    # those the detector's first test does not take, plain files and directories of no
    # odd mode, and symlinks whose target has no ".." (`escapes_root` needs one; a
    # symlink's mode makes no hazard).
    for entry, name, path in unpacker.walk(walker, looks_interesting, ODD_MODE):
        kind = entry.kind
        raw = entry.name
        if path is None:
            continue  # a whiteout, an opaque marker, a global header, the root
        if raw[:1] == b"/" or b".." in raw:
            if name.startswith("/"):
                hazards.append(Hazard("absolute-path", name, f"tar member name {name!r}",
                                      severe=False))
            elif climbs(name):
                hazards.append(Hazard("path-traversal", name, f"tar member name {name!r} "
                                      f"climbs above the root: the engine puts it at {path}",
                                      severe=False))
        if entry.size > MAX_MEMBER_SIZE:
            hazards.append(Hazard("absurd-size", path,
                                  f"header claims {entry.size} bytes; rest of layer unread",
                                  severe=True))
            break
        # Most members are ordinary files no detector cares about: the detector's own
        # first test on where they land decides it before it is called.
        if kind in _PLAIN_KINDS and not entry.mode & ODD_MODE:
            if not looks_interesting(path):
                continue
            want = visit(path, kind, entry.size)
        else:
            if kind in (CHARDEV, BLOCKDEV):
                # debootstrap and mmdebstrap write /dev/console, /dev/null, /dev/ptmx...
                # into real base images: layer hygiene, reported, never a failure by itself
                # (the walker creates nothing, so a device node cannot reach the host).
                where = "in a layer" if path.startswith("/dev/") else "outside /dev"
                hazards.append(Hazard("device-file", path, f"device node {where}",
                                      severe=False))
                continue
            if entry.mode & ODD_MODE:
                odd = mode_hazard(path, kind, entry.mode)
                if odd is not None:
                    hazards.append(odd)
            link = entry.link.decode("utf-8", "surrogateescape")
            if kind == SYMLINK and escapes_root(path, link):
                hazards.append(Hazard("symlink-escape", path,
                                      f"points outside the image: {link}", severe=False))
            want = visit(path, kind, entry.size, link)
        if want == WANT_MEMORY:
            detector.content(path, walker.read_data())
        elif want == WANT_PREFIX:
            detector.content_prefix(path, walker.read_more, walker.skip_more)
        elif want == WANT_FILE:
            target_file = workdir / f"{walker.members}-{parent_and_base(path)[1]}"
            with open(target_file, "wb") as out:
                walker.copy_data(out)
            detector.content_file(path, target_file)
    unpacker.finish()
    return walker.members


def _kept(tree: Tree) -> tuple[list[str], list[str], list[tuple[str, str, str]], list[str],
                               dict[str, str]]:
    """What the cache keeps of a layer's unpacked TREE for the final-tree model: its
    whiteouts, opaque directories, the members `_modelled` names (path, kind, link), the
    links where the scan would read a file (read through, as the programs do), and every
    symlink (path -> target)."""
    whiteouts = []
    opaque = []
    members = []
    read_through = []
    symlinks = {}
    for path, node in tree.items():
        kind = node.kind
        if kind == REGULAR and node.first == path and path.count("/") > _SHALLOW \
                and not path.endswith(".dist-info"):
            continue  # most of a layer: a file the model need not keep
        if node.opaque:
            opaque.append(path)
        if kind == WHITEOUT:
            whiteouts.append(path)
            continue
        if path == "/":
            continue
        kind, link = member_of(path, node)
        if kind == SYMLINK:
            symlinks[path] = link
        if _modelled(path, kind):
            members.append((path, kind, link))
            if kind in (SYMLINK, HARDLINK) and read_by_name(path):
                read_through.append(path)
    return whiteouts, opaque, members, read_through, symlinks


def scan_layer(job: LayerJob) -> LayerScan:
    """Scan one layer; errors reading it end up in `LayerScan.error`, not raised."""
    hazards: list[Hazard] = []
    tree = Tree()
    tree["/"] = Node(DIRECTORY, IMPLIED_DIRECTORY_MODE)
    # Following the layer's symlinks to place its members: within steps linear in their
    # number, which bounds every real layer (a hostile one is reported instead).
    budget = Budget(0)
    unpacker = Unpacker(tree, budget)
    error: Optional[str] = None
    diff_id: Optional[str] = None
    entries = 0
    with tempfile.TemporaryDirectory(prefix="aipcc-validate-") as tmp:
        detector = LayerDetector()

        def walk(stream: LayerStream) -> None:
            nonlocal entries
            try:
                entries = _walk(stream, detector, Path(tmp), hazards, unpacker)
            except LayerRefused as exc:
                hazards.append(Hazard(REFUSED, "/", f"layer {job.digest} is refused by "
                                      f"the container engine: {exc}", severe=True))
            except BudgetExceeded:
                hazards.append(Hazard("symlink-bound", "/", "placing the layer's members "
                                      "through its symlinks takes more than "
                                      f"{budget.total} steps: a hostile layer", severe=True))

        try:
            read = read_layer(job, walk)
            diff_id = read.diff_id
            hazards.extend(Hazard("unsafe-content-path", name, f"content not read: {why}",
                                  severe=True) for name, why in read.refused)
        except RefusedLayer as exc:
            hazards.append(Hazard(REFUSED, "/", str(exc), severe=True))
        except TarError as exc:
            error = str(exc)
        evidence, content_paths, found = detector.finish()
    whiteouts, opaque, members, read_through, symlinks = _kept(tree)
    loops = Budget(len(symlinks))
    try:
        for path in symlinks:
            if resolve_link(path, symlinks, loops) is None:
                hazards.append(Hazard("symlink-loop", path,
                                      f"-> {symlinks[path]} never resolves", severe=False))
    except BudgetExceeded:
        hazards.append(Hazard("symlink-bound", path, f"resolving the layer's {len(symlinks)} "
                              f"symlinks takes more than {loops.total} steps: a hostile "
                              "layer", severe=True))
    return LayerScan(
        digest=job.digest,
        entries=entries,
        evidence=tuple(evidence),
        whiteouts=tuple(whiteouts),
        opaque_dirs=tuple(opaque),
        content_paths=tuple((*content_paths, *read_through)),
        members=tuple(members),
        hazards=tuple(hazards + found),
        error=error,
        index_settings=tuple(detector.index_settings),
        diff_id=diff_id,
        device_code=tuple(sorted(detector.device_code, key=lambda code: code.path)),
    )


def scan_file(digest: str, path: str, data: bytes, wal: Optional[bytes] = None) -> LayerScan:
    """What the file at PATH says, read through a link from layer DIGEST (`judge`'s
    READ_THROUGH), as the scan would read a regular file of that name (an RPM database
    through a temporary copy, as sqlite needs, with its write-ahead log WAL beside it)."""
    detector = LayerDetector()
    with tempfile.TemporaryDirectory(prefix="aipcc-validate-") as tmp:
        files = [(path, data)] + ([(f"{path}-wal", wal)] if wal is not None else [])
        for name, content in files:
            want = detector.visit(name, REGULAR, len(content))
            if want == WANT_MEMORY:
                detector.content(name, content)
            elif want == WANT_FILE:
                copy = Path(tmp) / parent_and_base(name)[1]
                copy.write_bytes(content)
                detector.content_file(name, copy)
        evidence, content_paths, found = detector.finish()
    return LayerScan(digest=digest, entries=len(files), evidence=tuple(evidence),
                     content_paths=tuple(content_paths), hazards=tuple(found),
                     index_settings=tuple(detector.index_settings))
