"""Scan one layer for evidence and hazards, read by the engine's rules (`imagefs`).

The caller runs one layer per process to use every core. Members are named, placed and
refused as the container engine does it: a member the engine would refuse (a name held
twice, a type it cannot create, a hard link to nothing) ends the scan
with a severe hazard naming the layer and why, since the engine would not run the image.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Optional

from ..imagefs.blobs import LayerJob
from ..imagefs.overlay import LayerRefused, ancestors, place
from ..imagefs.paths import (
    NAME_MAX,
    clean,
    climbs,
    parent_and_base,
    whiteout_of,
)
from ..imagefs.stream import LayerStream, RefusedLayer, read_layer
from ..imagefs.symlinks import STEPS_PER_LINK, Budget, BudgetExceeded, resolve_link
from ..imagefs.tar import (
    BLOCKDEV,
    CHARDEV,
    DIRECTORY,
    FIFO,
    GLOBAL,
    HARDLINK,
    MAX_MEMBER_SIZE,
    REGULAR,
    SYMLINK,
    TarError,
    TarWalker,
)
from .detect import (
    CANDIDATE_BYTES,
    CANDIDATE_SUFFIXES,
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


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _modelled(path: str, kind: str) -> bool:
    """Whether the final-tree model keeps this member of a layer (the cache holds them):
    what can hide evidence of a lower layer, name a toolkit, or lead to a file read."""
    if kind == SYMLINK:
        return path.startswith(TOOLKIT_PREFIXES) or not path.startswith(_LINK_FARMS)
    if path.count("/") <= _SHALLOW or path.endswith(".dist-info"):
        return True
    return kind != REGULAR and kind != DIRECTORY and read_by_name(path)


def read_by_name(path: str) -> bool:
    """Whether the scan reads the bytes of a regular file at PATH (a version, status or
    config file): a link there is read through, as the program that reads it would."""
    return LayerDetector().visit(path, REGULAR, 0) == WANT_MEMORY


def _through_link(raw: bytes, links: set[bytes]) -> bool:
    """Whether a directory above the relative member name RAW is a symlink of the layer."""
    slash = raw.find(b"/")
    while slash != -1:
        if raw[:slash] in links:
            return True
        slash = raw.find(b"/", slash + 1)
    return False


class _Model:
    """What one layer's scan keeps for the final-tree model (`overlay.LayerIndex`): its
    whiteouts and opaque directories, where members land through the layer's own
    symlinks, and the members `_modelled` names."""

    def __init__(self) -> None:
        self.whiteouts: dict[str, int] = {}  # path -> the duplicate key of its name
        self.opaque: list[str] = []
        self.symlinks: dict[str, str] = {}  # every symlink of the layer: path -> target
        self.link_names: set[bytes] = set()  # the same, as relative member names
        self.directories: set[int] = set()  # the duplicate keys of its directory members
        self.members: dict[str, tuple[str, str]] = {}  # path -> (kind, link)
        self.read_through: list[str] = []  # links where the scan would read a file
        self.linked_whiteouts: list[str] = []  # hard links to a whiteout: whiteouts too
        # Placing members through symlinks shares the budget of resolving them.
        self.budget = Budget(0)

    def add_symlink(self, path: str, target: str) -> None:
        self.symlinks[path] = target
        self.link_names.add(path[1:].encode("utf-8", "surrogateescape"))
        self.budget.left += STEPS_PER_LINK
        self.budget.total += STEPS_PER_LINK

    def land(self, path: str) -> str:
        """Where the engine puts a member named PATH: its parent through the layer's own
        symlinks (the engine unpacks into the layer's directory, following them)."""
        if not self.symlinks:
            return path
        parent, base = parent_and_base(path)
        for directory in ancestors(path):
            if directory in self.symlinks:
                through = resolve_link(parent, self.symlinks, self.budget)
                return path if through is None else through.rstrip("/") + "/" + base
        return path

    def finish(self, names: set[int]) -> tuple[list[str], dict[str, tuple[str, str]]]:
        """The whiteouts that stay one (a name the layer writes after its whiteout
        replaces it: a directory merges with the lower one, anything else replaces it),
        and the members kept."""
        whiteouts = list(self.linked_whiteouts)
        for path, key in self.whiteouts.items():
            if key not in names:
                whiteouts.append(path)
            elif key not in self.directories:
                self.members.setdefault(path, (REGULAR, ""))
        return whiteouts, self.members


def _key(path: str) -> int:
    """The hashed duplicate key of the relative name of absolute PATH."""
    return hash(path[1:].encode("utf-8", "surrogateescape"))


def _walk(stream: LayerStream, detector: LayerDetector, workdir: Path,
          hazards: list[Hazard], model: _Model) -> tuple[int, set[int]]:
    entries = 0
    walker = TarWalker(stream)
    looks_interesting = CANDIDATE_BYTES.search
    # The names seen so far (their duplicate keys, hashed: a few bytes each): the engine
    # refuses a layer holding a name twice, and a hard link to a name not yet written.
    names: set[int] = set()
    links = model.link_names
    for entry in walker:
        entries += 1
        kind = entry.kind
        raw = entry.name
        if raw[:2] == b"./":
            raw = raw[2:]
        # Most members are ordinary files no detector cares about: a few bytes checks and
        # one regex decide that before any decoding.
        if (kind in _PLAIN_KINDS and len(raw) < NAME_MAX and raw[:1] != b"/"
                and b".." not in raw
                and b"./" not in raw and b"//" not in raw
                and b".wh." not in raw and entry.size <= MAX_MEMBER_SIZE
                and not entry.mode & ODD_MODE and not looks_interesting(raw)
                and not raw.endswith(CANDIDATE_SUFFIXES)
                and not (links and _through_link(raw, links))):
            key = hash(raw.rstrip(b"/"))  # the duplicate key of a plain relative name
            if key in names:
                raise LayerRefused(f"member {_decode(entry.name)!r} is the layer's second "
                                   "of that name")
            names.add(key)
            if kind == DIRECTORY:
                model.directories.add(key)
            elif raw.count(b"/") < _SHALLOW - 1:  # /opt/venv as a file hides a lower tree
                model.members["/" + _decode(raw)] = (kind, "")
            continue
        name = _decode(entry.name)
        path = place(name, kind, entry.link, names)
        if kind == DIRECTORY:
            model.directories.add(_key(path))
        path = model.land(path)
        if name.startswith("/"):
            hazards.append(Hazard("absolute-path", name, f"tar member name {name!r}",
                                  severe=False))
        elif climbs(name):
            hazards.append(Hazard("path-traversal", name, f"tar member name {name!r} climbs "
                                  f"above the root: the engine puts it at {path}",
                                  severe=False))
        if entry.size > MAX_MEMBER_SIZE:
            hazards.append(Hazard("absurd-size", path,
                                  f"header claims {entry.size} bytes; rest of layer unread",
                                  severe=True))
            break
        if path == "/" or kind == GLOBAL:
            continue
        removal = whiteout_of(path)
        if removal is not None:
            what, where = removal
            if what == "opaque":
                model.opaque.append(where)
            elif what == "remove":
                held = where.encode("utf-8", "surrogateescape")
                if hash(held[1:]) in names or hash(held) in names:
                    # overlay's whiteout is a device node made in its place: it exists
                    raise LayerRefused(f"whiteout {path} of {where}, which the layer holds")
                model.whiteouts[where] = hash(held[1:])
            continue
        if kind in (CHARDEV, BLOCKDEV):
            # debootstrap and mmdebstrap write /dev/console, /dev/null, /dev/ptmx... into
            # real base images: layer hygiene, reported, never a failure by itself (the
            # walker creates nothing, so a device node cannot reach the host).
            where = "in a layer" if path.startswith("/dev/") else "outside /dev"
            hazards.append(Hazard("device-file", path, f"device node {where}",
                                  severe=False))
            continue
        if entry.mode & ODD_MODE:
            odd = mode_hazard(path, kind, entry.mode)
            if odd is not None:
                hazards.append(odd)
        link = _decode(entry.link)
        if _modelled(path, kind):
            model.members[path] = (kind, model.land(clean(link)) if kind == HARDLINK
                                   else link)
            if kind in (SYMLINK, HARDLINK) and read_by_name(path):
                model.read_through.append(path)
        if kind == SYMLINK:
            model.add_symlink(path, link)
            if escapes_root(path, link):
                hazards.append(Hazard("symlink-escape", path,
                                      f"points outside the image: {link}", severe=False))
        elif kind == HARDLINK:
            if model.land(clean(link)) in model.whiteouts:
                # a hard link to a whiteout of the layer: a second whiteout (`overlay`)
                model.members.pop(path, None)
                model.linked_whiteouts.append(path)
                continue
            target = clean(link).encode("utf-8", "surrogateescape")
            if hash(target[1:]) not in names and hash(target) not in names:
                raise LayerRefused(f"hard link {path} to {link!r}, which the layer does "
                                   "not hold before it")
        want = detector.visit(path, kind, entry.size, link)
        if want == WANT_MEMORY:
            detector.content(path, walker.read_data())
        elif want == WANT_PREFIX:
            detector.content_prefix(path, walker.read_more, walker.skip_more)
        elif want == WANT_FILE:
            target_file = workdir / f"{entries}-{parent_and_base(path)[1]}"
            with open(target_file, "wb") as out:
                walker.copy_data(out)
            detector.content_file(path, target_file)
    return entries, names


def scan_layer(job: LayerJob) -> LayerScan:
    """Scan one layer; errors reading it end up in `LayerScan.error`, not raised."""
    hazards: list[Hazard] = []
    model = _Model()
    names: set[int] = set()
    error: Optional[str] = None
    diff_id: Optional[str] = None
    entries = 0
    with tempfile.TemporaryDirectory(prefix="aipcc-validate-") as tmp:
        detector = LayerDetector()

        def walk(stream: LayerStream) -> None:
            nonlocal entries, names
            try:
                entries, names = _walk(stream, detector, Path(tmp), hazards, model)
            except LayerRefused as exc:
                hazards.append(Hazard(REFUSED, "/", f"layer {job.digest} is refused by "
                                      f"the container engine: {exc}", severe=True))
            except BudgetExceeded:
                hazards.append(Hazard("symlink-bound", "/", "placing the layer's members "
                                      f"through its {len(model.symlinks)} symlinks takes "
                                      f"more than {model.budget.total} steps: a hostile "
                                      "layer", severe=True))

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
    symlinks = model.symlinks
    whiteouts, members = model.finish(names)
    budget = Budget(len(symlinks))
    try:
        for path in symlinks:
            if resolve_link(path, symlinks, budget) is None:
                hazards.append(Hazard("symlink-loop", path,
                                      f"-> {symlinks[path]} never resolves", severe=False))
    except BudgetExceeded:
        hazards.append(Hazard("symlink-bound", path, f"resolving the layer's {len(symlinks)} "
                              f"symlinks takes more than {budget.total} steps: a hostile "
                              "layer", severe=True))
    return LayerScan(
        digest=job.digest,
        entries=entries,
        evidence=tuple(evidence),
        whiteouts=tuple(whiteouts),
        opaque_dirs=tuple(model.opaque),
        content_paths=tuple((*content_paths, *model.read_through)),
        members=tuple((path, kind, link) for path, (kind, link) in members.items()),
        hazards=tuple(hazards + found),
        error=error,
        index_settings=tuple(detector.index_settings),
        diff_id=diff_id,
        device_code=tuple(sorted(detector.device_code, key=lambda code: code.path)),
    )




def scan_file(digest: str, path: str, data: bytes) -> LayerScan:
    """What the file at PATH says, read through a link from layer DIGEST (`judge`'s
    READ_THROUGH), as the scan would read a regular file of that name."""
    detector = LayerDetector()
    if detector.visit(path, REGULAR, len(data)) == WANT_MEMORY:
        detector.content(path, data)
    evidence, content_paths, found = detector.finish()
    return LayerScan(digest=digest, entries=1, evidence=tuple(evidence),
                     content_paths=tuple(content_paths), hazards=tuple(found),
                     index_settings=tuple(detector.index_settings))
