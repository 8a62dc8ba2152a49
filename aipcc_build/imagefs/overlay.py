"""The one model of an image's final filesystem, exactly as the container engine builds it
from its layers: each layer unpacked on its own (`unpack`, a `Tree`), summed up as a
`LayerIndex`, and the indexes stacked (`Stack`). The scan, the judge, the lookup and
`tree.final_tree` all ask a `Stack`.

The model is containers/storage's overlay driver, the default of podman and buildah: each
layer is unpacked on its own into a directory (pkg/archive `Unpack`, run chrooted in it),
then overlayfs stacks the directories. Per member, in tar order:

- the name is Go's (`tar`), cleaned (`paths.clean`: `..` stops at the root); a name the
  layer holds twice refuses it (`paths.duplicate_key`);
- missing parent directories are made (mode 0755), following this layer's own symlinks
  inside its root; a parent that is a file, or a symlink to nothing, refuses the layer;
- what stands at the path is removed, unless both are directories (then they merge);
- `.wh.NAME` becomes a whiteout of NAME (refused when NAME already exists in this layer),
  `.wh..wh..opq` marks its directory opaque; a global header removes what its name names
  and creates nothing;
- a hard link shares the inode of a member already unpacked in this layer (refused when
  there is none, or it is a directory); the member's mode is then set on that inode.

overlayfs then shows, from the top layer down, the first entry of each path; a whiteout
hides lower entries, an opaque directory all lower entries below it, a directory above a
non-directory hides it. (The vfs driver instead unpacks each layer onto a copy of the one
below, following lower symlinks: images that rely on the difference are not modelled.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Callable, Optional

from ..records import record
from .kinds import BLOCKDEV, CHARDEV, DIRECTORY, FIFO, GLOBAL, HARDLINK, REGULAR, SYMLINK
from .paths import NAME_MAX, clean, duplicate_key, engine_name_problem, parent_and_base
from .symlinks import (
    MAX_HOPS,
    PATH_MAX,
    STEPS_PER_LINK,
    Budget,
    BudgetExceeded,
    follow,
    spend,
)

# The reader and the inflaters: only a model that unpacks a layer needs them (a warm
# judge does not).
if TYPE_CHECKING:
    from .stream import LayerStream
    from .tar import TarEntry, TarWalker

WHITEOUT = "whiteout"
IMPLIED_DIRECTORY_MODE = 0o755


class LayerRefused(Exception):
    """The engine would refuse to unpack this layer; the message says why."""


# The member types containers/storage creates; it refuses a layer holding any other.
ENGINE_KINDS = frozenset((REGULAR, HARDLINK, SYMLINK, CHARDEV, BLOCKDEV, DIRECTORY, FIFO,
                          GLOBAL))


def place(name: str, kind: str, link: bytes, seen: set[str]) -> str:
    """Where the engine puts member NAME of type KIND (linking to LINK), SEEN holding the
    duplicate keys of the layer's members so far (this one is added). Raises
    LayerRefused for a name held twice, one Linux cannot create, a type the engine does
    not create."""
    key = duplicate_key(name)
    if key in seen:
        raise LayerRefused(f"member {name!r} is the layer's second of that name")
    seen.add(key)
    path = clean(name)
    too_long = engine_name_problem(path, link)
    if too_long:
        raise LayerRefused(f"member {name[:200]!r}...: {too_long}")
    if kind not in ENGINE_KINDS:
        raise LayerRefused(f"member {name!r} has tar type {kind!r}, which the engine does "
                           "not create")
    return path


class NotADirectory(LayerRefused):
    """A member's parent is not a directory (ENOTDIR): the engine refuses the layer,
    except for a whiteout, which it then leaves out."""


class Node:
    """An inode: hard links share one, so a chmod through either shows in both."""

    __slots__ = ("kind", "mode", "digest", "link", "opaque", "first")

    def __init__(self, kind: str, mode: int, digest: Optional[str] = None,
                 link: str = "", first: str = "") -> None:
        self.kind = kind
        self.mode = mode
        self.digest = digest  # sha256 of a regular file's content
        self.link = link  # a symlink's target, as written
        self.opaque = False
        self.first = first  # the path a regular file was written at (hard links share it)


class _Hasher:
    def __init__(self) -> None:
        import hashlib  # only an unpacking that hashes content needs it, not the judge

        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        return len(data)


class Tree(dict[str, Node]):
    """Paths to inodes. Removing a directory costs what it holds, not the whole tree (a
    hostile layer cannot make unpacking quadratic): each directory's children are indexed
    from the first removal on (most layers remove nothing, and pay nothing for it)."""

    def __init__(self) -> None:
        super().__init__()
        self._children: Optional[dict[str, set[str]]] = None

    def __setitem__(self, path: str, node: Node) -> None:
        if self._children is not None and path != "/":
            self._children.setdefault(parent_and_base(path)[0], set()).add(path)
        super().__setitem__(path, node)

    def _index(self) -> dict[str, set[str]]:
        if self._children is None:
            self._children = {}
            for path in self:
                if path != "/":
                    self._children.setdefault(parent_and_base(path)[0], set()).add(path)
        return self._children

    def remove_below(self, path: str) -> None:
        """Everything below PATH."""
        children = self._index()
        pending = list(children.pop(path, ()))
        while pending:
            current = pending.pop()
            super().pop(current, None)
            pending.extend(children.pop(current, ()))

    def remove(self, path: str) -> None:
        """PATH and everything below it."""
        self.remove_below(path)
        super().pop(path, None)
        if path != "/":
            self._index().get(parent_and_base(path)[0], set()).discard(path)

    def clear(self) -> None:
        super().clear()
        self._children = None


def _resolve_parent(tree: Tree, parent: str, create: bool = True,
                    budget: Optional[Budget] = None, member: Optional[str] = None
                    ) -> Optional[str]:
    """Where PARENT is inside this layer's root, following its symlinks, making missing
    directories as MkdirAll does (with CREATE; else None when one is missing). The
    components a symlink adds are spent from BUDGET (BudgetExceeded past it). A refusal
    names MEMBER, the path below PARENT being placed (else PARENT), and what blocks it."""
    wanted = member or parent

    def look(candidate: str, _: list[str]) -> Optional[str]:
        node = tree.get(candidate)
        if node is None:
            if not create:
                raise _Missing
            tree[candidate] = Node(DIRECTORY, IMPLIED_DIRECTORY_MODE)
            return None
        if node.kind == SYMLINK:
            if tree.get(clean(f"{parent_and_base(candidate)[0]}/{node.link}")) is None:
                raise LayerRefused(f"{candidate} on the way to {wanted} is a symlink to "
                                   "nothing")
            return node.link
        if node.kind != DIRECTORY:
            raise NotADirectory(f"{candidate} on the way to {wanted} is not a directory")
        return None

    try:
        found = follow(parent, look, budget)
    except _Missing:
        return None
    if found is None:
        raise LayerRefused(f"the symlinks on the way to {wanted} never resolve (more than "
                           f"{MAX_HOPS} hops, or a path of {PATH_MAX} bytes or more)")
    return found


class _Missing(Exception):
    """A directory on the way is missing, and the walk makes none."""


def _exists(tree: Tree, path: str, hops: int = 0) -> bool:
    """Whether PATH can be opened in the layer now, following its symlinks."""
    parent, base = parent_and_base(path)
    try:
        directory = _resolve_parent(tree, parent, create=False)
    except LayerRefused:
        return False
    node = None if directory is None else tree.get(directory.rstrip("/") + "/" + base)
    if node is None or node.kind == WHITEOUT:
        return False
    if node.kind == SYMLINK:
        return hops < MAX_HOPS and _exists(tree, clean(f"{directory}/{node.link}"), hops + 1)
    return True


class Wanted:
    """The one regular file whose bytes an unpacking keeps (PATH, when at most LIMIT)."""

    __slots__ = ("path", "limit", "size", "content")

    def __init__(self, path: str, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.size = 0
        self.content: Optional[bytes] = None


class Unpacker:
    """One layer unpacked into TREE (which holds "/") member by member, as the engine does
    it: the one set of member rules, for `unpack` and the validator's scan alike. `add`
    places a member; `finish` checks what the engine checks after the last one. With
    BUDGET, resolving parents through the layer's symlinks is bounded (a scan of a hostile
    layer stops with BudgetExceeded instead of going quadratic)."""

    __slots__ = ("tree", "budget", "_seen", "_directories", "_parents", "_removed")

    def __init__(self, tree: Tree, budget: Optional[Budget] = None) -> None:
        self.tree = tree
        self.budget = budget
        self._seen: set[str] = set()
        self._directories: list[str] = []  # directory members, whose times are set last
        # Parents resolved so far: valid until something is removed from the tree (a new
        # entry never lies on a path already resolved, which made each of its parts).
        self._parents: dict[str, str] = {}
        self._removed = False

    def _parent(self, parent: str, member: str) -> str:
        directory = self._parents.get(parent)
        if directory is None:
            # Most parents: a directory (or none yet) in a directory already resolved to
            # itself, which the walk from the root would find (or make) there, at the
            # same cost to the budget.
            above = parent.rpartition("/")[0] or "/"
            node = self.tree.get(parent)
            if self._parents.get(above) == above and len(parent) < PATH_MAX \
                    and (node is None or node.kind == DIRECTORY):
                spend(self.budget, parent.count("/"))
                if node is None:
                    self.tree[parent] = Node(DIRECTORY, IMPLIED_DIRECTORY_MODE)
                directory = self._parents[parent] = parent
            else:
                directory = self._parents[parent] = _resolve_parent(
                    self.tree, parent, budget=self.budget, member=member) or "/"
        return directory

    def add(self, entry: TarEntry, name: str) -> Optional[str]:
        """Place member ENTRY (NAME decoded): the path where a node of its kind now stands
        (through the layer's own symlinks), or None when it makes none (a whiteout, an
        opaque marker, a global header, the root). Raises LayerRefused as the engine
        refuses the layer."""
        tree = self.tree
        kind = entry.kind
        relative = name[2:] if name[:2] == "./" else name
        key = relative.rstrip("/")
        path = "/" + key
        # Most names are plain ("usr/lib/x", "./usr/lib/x/"): `place`'s answer without its
        # work (their duplicate key is the name without "./" and trailing slashes, they
        # land at it, no part of them is too long).
        if relative and relative[0] != "/" and len(path) <= NAME_MAX and path.isascii() \
                and "//" not in path and "/." not in path and kind in ENGINE_KINDS \
                and len(entry.link) < PATH_MAX:
            seen = self._seen
            held = len(seen)
            seen.add(key)
            if len(seen) == held:
                raise LayerRefused(f"member {name!r} is the layer's second of that name")
        else:
            path = place(name, kind, entry.link, self._seen)
        parent, _, base = path.rpartition("/")
        if not parent:
            if not base:
                if kind not in (DIRECTORY, GLOBAL):
                    raise LayerRefused(f"member {name!r} would replace the root")
                return None
            parent = "/"
        whiteout = base[:4] == ".wh." and kind != GLOBAL
        directory = self._parents.get(parent)
        if directory is None:
            try:
                directory = self._parent(parent, path)
            except NotADirectory:
                if not whiteout:
                    raise
                if base == ".wh..wh..opq":
                    # setxattr on the directory: on a file it succeeds (and hides
                    # nothing), through a file it fails, and the layer with it.
                    _resolve_parent(tree, parent_and_base(parent)[0], budget=self.budget,
                                    member=path)
                return None  # mknod of a whiteout below a file: ENOTDIR, which is ignored
        if directory == parent:
            where = path  # no symlink on the way: most members
        else:
            where = directory + "/" + base if directory != "/" else "/" + base
        existing = tree.get(where)
        if existing is None and kind == REGULAR and not whiteout:
            # the common case, without the general path's checks
            node = Node(REGULAR, entry.mode & 0o7777, None, "", where)
            if tree._children is None:
                dict.__setitem__(tree, where, node)
            else:
                tree[where] = node
            return where
        if whiteout:
            if base == ".wh..wh..opq":
                tree[directory].opaque = True
                return None
            hidden = where[:-len(base)] + base[4:]
            if hidden in tree:
                raise LayerRefused(f"whiteout {path} of {hidden}, which the layer holds")
            tree[hidden] = Node(WHITEOUT, 0)
            return None
        if existing is not None and not (existing.kind == DIRECTORY and kind == DIRECTORY):
            tree.remove(where)
            self._parents.clear()
            self._removed = True
        if kind == GLOBAL:
            return None
        mode = entry.mode & 0o7777
        if kind == DIRECTORY:
            self._directories.append(path)
            if existing is not None and existing.kind == DIRECTORY:
                existing.mode = mode
            else:
                tree[where] = Node(DIRECTORY, mode)
        elif kind == REGULAR:
            tree[where] = Node(REGULAR, mode, None, "", where)
        elif kind == SYMLINK:
            tree[where] = Node(SYMLINK, 0o777, link=entry.link.decode("utf-8",
                                                                      "surrogateescape"))
            if self.budget is not None:  # each symlink may be followed a few times
                self.budget.left += STEPS_PER_LINK
                self.budget.total += STEPS_PER_LINK
        elif kind == HARDLINK:
            link = entry.link.decode("utf-8", "surrogateescape")
            lparent, lbase = parent_and_base(clean(link))
            found = _resolve_parent(tree, lparent, create=False, budget=self.budget,
                                    member=clean(link))
            target = None if found is None else tree.get(found.rstrip("/") + "/" + lbase)
            if target is not None and target.kind == WHITEOUT:
                # overlay's whiteout is a device node: a hard link to it is a second one,
                # which hides what lower layers hold at its own path.
                tree[where] = Node(WHITEOUT, 0)
                return None
            if target is None or target.kind == DIRECTORY:
                raise LayerRefused(f"hard link {path} to {link!r}, which the layer does "
                                   "not hold as a file before it")
            if target.kind != SYMLINK:
                target.mode = mode
            tree[where] = target
        else:  # FIFO, CHARDEV, BLOCKDEV: `place` refused the rest
            tree[where] = Node(kind, mode)
        return where

    def walk(self, walker: TarWalker, shown: Callable[[str], object], odd: int
             ) -> Iterator[tuple[TarEntry, str, Optional[str]]]:
        """Place every member WALKER reads, as `add` places it; yield (entry, its name
        decoded, what `add` answered) for each member but the common one that the caller
        passes over: at a path where SHOWN is false (a detector's first test), a regular
        file or directory of mode without ODD bits, or a symlink whose target has no ".."
        (it cannot climb out of the image). `walker.members` counts them all.

        The common member is placed here, in one loop over the headers in the walker's
        buffer, without a call or an object per member but its node: the Python work of
        the reader, `add` and the caller's test per member was most of a cold scan's
        beyond inflating and hashing. It is `add`'s own fast case, taken only where
        every step of the full path is known to answer as it does here:

        - the header: `PLAIN_HEADER` (the reader's plain header), of type "0", NUL or "5"
          with no link name or a symlink ("2") with one, not star's, every byte ASCII and
          its checksum the unsigned sum: the reader's first branch, which reads the name
          and link from the header alone (no prefix, no extension record: the reader
          returns every member with its records applied, so none waits here) and a size
          of octal digits (below `MAX_MEMBER_SIZE`; a directory's and symlink's taken as
          0);
        - the name: `add`'s plain name (relative, ASCII, no "//" and no "/.", so no
          whiteout, opaque marker, "." or ".."; at most 100 bytes, below NAME_MAX; a link
          of at most 100, below PATH_MAX), its key not held yet (else the full path
          refuses it);
        - the place: the parent already resolved to itself (`_parents`, `add`'s first
          look, made by `_parent` for the first member below it), and nothing at the
          path (a directory may merge with a directory): the nodes `add` makes, in the
          same tree, seen set, directory list and budget.

        Anything else (and any member whose header spans the buffer's end) goes to the
        reader's and `add`'s full code, which decide it as for every member before this
        loop existed."""
        from .tar import BLOCK, PLAIN_HEADER, STAR_TRAILER, adler32

        plain = PLAIN_HEADER.match
        tree = self.tree
        nodes = tree.get
        seen = self._seen
        resolved = self._parents.get
        directories = self._directories
        budget = self.budget
        while True:
            buf = walker._buf
            at = walker._pos + walker._pending  # where the next header starts
            placed = 0
            while at + BLOCK <= len(buf) and not walker._stopped:
                header = buf[at:at + BLOCK]
                if plain(header, 100) is None or header[508:512] == STAR_TRAILER \
                        or not header.isascii() or int(header[148:154], 8) \
                        != (adler32(header) & 0xFFFF) + 255 - sum(header[148:156]):
                    break
                flag = header[156]
                if flag == 50:
                    kind = SYMLINK
                    field = header[157:257]
                    end = field.find(0)
                    link = (field if end < 0 else field[:end]).decode("ascii")
                    if not link or ".." in link:
                        break
                elif header[157] or not (flag == 48 or flag == 53 or not flag):
                    break
                else:
                    kind = REGULAR if flag != 53 else DIRECTORY
                field = header[:100]
                end = field.find(0)
                text = (field if end < 0 else field[:end]).decode("ascii")
                if not flag and text[-1:] == "/":
                    kind = DIRECTORY  # the reader's legacy directory
                relative = text[2:] if text[:2] == "./" else text
                key = relative.rstrip("/")
                path = "/" + key
                if not relative or relative[0] == "/" or "//" in path or "/." in path \
                        or key in seen:
                    break
                parent = path.rpartition("/")[0] or "/"
                mode = int(header[100:107], 8) & 0o7777
                if (mode & odd and kind != SYMLINK) or shown(path):
                    break
                directory = resolved(parent)
                if directory is None:  # the first member below it: `add`'s first step
                    try:
                        directory = self._parent(parent, path)
                    except (LayerRefused, BudgetExceeded):
                        walker.members += placed + 1  # this one was read, as `add` reads it
                        raise
                if directory != parent:
                    break
                existing = nodes(path)
                if existing is None:
                    if kind == REGULAR:
                        node = Node(REGULAR, mode, None, "", path)
                        size = int(header[124:135], 8)
                        at += BLOCK + size + (-size % BLOCK)
                    elif kind == DIRECTORY:
                        node = Node(DIRECTORY, mode)
                        directories.append(path)
                        at += BLOCK
                    else:
                        node = Node(SYMLINK, 0o777, None, link)
                        if budget is not None:  # each symlink may be followed a few times
                            budget.left += STEPS_PER_LINK
                            budget.total += STEPS_PER_LINK
                        at += BLOCK
                    if tree._children is None:
                        dict.__setitem__(tree, path, node)
                    else:
                        tree[path] = node
                elif kind == DIRECTORY and existing.kind == DIRECTORY:
                    existing.mode = mode  # directories merge
                    directories.append(path)
                    at += BLOCK
                else:
                    break
                seen.add(key)
                placed += 1
            if placed:  # what the reader has not consumed: the members placed here
                walker._pending = at - walker._pos
                walker._unread = 0
                walker.members += placed
            entry = walker.next_entry()
            if entry is None:
                return
            name = entry.name.decode("utf-8", "surrogateescape")
            yield entry, name, self.add(entry, name)

    def finish(self) -> None:
        """The engine sets each directory member's times after the last member: one a
        later member removed (or replaced a directory above) refuses the layer."""
        if not self._removed:
            return  # every directory member still stands where it was made
        for path in self._directories:
            if not _exists(self.tree, path):
                raise LayerRefused(f"directory {path} is gone when the engine sets its "
                                   "times: a later member replaced a directory above it")


def unpack(stream: LayerStream, tree: Tree, wanted: Optional[Wanted] = None) -> None:
    """Unpack one layer's STREAM into TREE (which holds "/"). With WANTED, content is not
    hashed; the bytes of the regular file at WANTED.path are kept in it."""
    from .tar import TarWalker

    walker = TarWalker(stream)
    unpacker = Unpacker(tree)
    for entry in walker:
        where = unpacker.add(entry, entry.name.decode("utf-8", "surrogateescape"))
        if where is None or entry.kind != REGULAR:
            continue
        if wanted is None:
            sink = _Hasher()
            walker.copy_data(sink)  # type: ignore[arg-type]
            tree[where].digest = sink.hash.hexdigest()
        elif where == wanted.path:
            wanted.size = entry.size
            wanted.content = walker.read_data() if entry.size <= wanted.limit else None
    unpacker.finish()


def member_of(path: str, node: Node) -> tuple[str, str]:
    """(kind, link) of the entry NODE at PATH of an unpacked layer (not a whiteout): a
    regular file's second name is a HARDLINK to its first, a symlink links its target."""
    kind = node.kind
    if kind == REGULAR and node.first != path:
        return HARDLINK, node.first
    return kind, node.link


class LayerIndex:
    """What one layer says about each path, once unpacked on its own: each path's kind (a
    tar type; HARDLINK for a second name of a regular file), the targets of its symlinks
    and the first name of each hard-linked file (`links`), its whiteouts and opaque
    directories. A complete index (from `unpack`) holds every path; a scan's holds the
    paths a verdict asks about and the directories above them (`directories`), and says
    nothing of the rest. (A plain class: a warm validation builds no dataclass for it.)"""

    __slots__ = ("kinds", "links", "whiteouts", "opaque", "directories")

    def __init__(self, kinds: Optional[dict[str, str]] = None,
                 links: Optional[dict[str, str]] = None,
                 whiteouts: Optional[set[str]] = None, opaque: Optional[set[str]] = None,
                 directories: Optional[set[str]] = None) -> None:
        self.kinds = kinds if kinds is not None else {}
        self.links = links if links is not None else {}
        self.whiteouts = whiteouts if whiteouts is not None else set()
        self.opaque = opaque if opaque is not None else set()
        self.directories = directories if directories is not None else set()

    def kind(self, path: str) -> Optional[str]:
        kind = self.kinds.get(path)
        if kind is None and path in self.directories:
            return DIRECTORY
        return kind


def index_of(tree: Tree) -> LayerIndex:
    """The index of one unpacked layer."""
    index = LayerIndex()
    for path, node in tree.items():
        if node.opaque:
            index.opaque.add(path)
        if node.kind == WHITEOUT:
            index.whiteouts.add(path)
        elif path != "/":
            kind, link = member_of(path, node)
            index.kinds[path] = kind
            if kind in (SYMLINK, HARDLINK):
                index.links[path] = link
    return index


def ancestors(path: str) -> list[str]:
    """The directories above PATH, "/" excluded: "/a/b/c" -> ["/a", "/a/b"]."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(2, len(parts))]


@record
class Holders:
    """Who decides PATH in the final tree: the layers whose entries there show, topmost
    first (one for a non-directory; the directories overlayfs merges), or none and
    `problem`, why the path is absent."""

    layers: tuple[int, ...]
    kind: Optional[str]
    problem: str = ""


@record
class Resolved:
    """Where a process that opens PATH ends up: `path` after the symlinks, the `layer`
    holding it and its `kind`, `member`: the path in that layer holding the bytes (the
    first name of a hard link); `problem` when it cannot be opened."""

    path: str
    layer: Optional[int] = None
    kind: Optional[str] = None
    member: str = ""
    problem: str = ""


NEVER_RESOLVES = (f"its symlinks never resolve (a loop, more than {MAX_HOPS} hops, or a path "
                  "longer than PATH_MAX)")


# Directories a question may go down: the walk recurses once per directory (Python's stack),
# and the model answers "absent" below it. Real images go a few dozen deep.
MAX_DEPTH = 400


class _Stopped(Exception):
    """A path cannot be opened: `resolved` says where and why."""

    def __init__(self, resolved: Resolved) -> None:
        super().__init__(resolved.problem)
        self.resolved = resolved


class Stack:
    """The overlayfs view of layer indexes, bottom first, asked one path at a time
    (containers/storage's overlay driver): from the top layer down, a whiteout hides lower
    entries, an opaque directory all lower entries below it, a non-directory everything
    below it, a directory a lower non-directory; directories merge. An index is loaded
    when a question first reaches its layer."""

    def __init__(self, count: int, load: Callable[[int], LayerIndex]) -> None:
        self.count = count
        self._load = load
        self._indexes: dict[int, LayerIndex] = {}
        self._held: dict[str, Holders] = {}  # the paths `holders` answered, for their children

    @classmethod
    def of(cls, indexes: Sequence[LayerIndex]) -> Stack:
        return cls(len(indexes), indexes.__getitem__)

    def index(self, number: int) -> LayerIndex:
        index = self._indexes.get(number)
        if index is None:
            index = self._indexes[number] = self._load(number)
        return index

    def _shown(self, path: str, why: list[str]) -> Iterator[tuple[int, str]]:
        """(layer, kind) of the entries at PATH that show, topmost first, loading layers
        only as far as they are asked for: one non-directory, or the directories overlayfs
        merges. WHY gets the reason when a whiteout or an opaque directory stops them."""
        if path == "/":
            for number in reversed(range(self.count)):
                yield number, DIRECTORY
                if "/" in self.index(number).opaque:
                    if number:
                        why.append(f"layer {number + 1} makes / opaque")
                    return
            return
        merged = False
        parent = parent_and_base(path)[0]
        known = self._held.get(parent)
        if known is None:
            above = self._shown(parent, why)
        elif known.layers:
            above = iter([(number, known.kind or DIRECTORY) for number in known.layers])
        else:
            why.append(known.problem)
            return
        for number, kind in above:
            if kind != DIRECTORY:
                why.append(f"{parent_and_base(path)[0]} is "
                           + ("a symlink" if kind == SYMLINK else "not a directory"))
                return
            index = self.index(number)
            if path in index.whiteouts:
                why.append(f"{path} is removed by layer {number + 1}")
                return
            found = index.kind(path)
            if found is None:
                continue
            if found != DIRECTORY:
                if not merged:
                    yield number, found
                return  # a directory above hides it, and all below
            merged = True
            yield number, DIRECTORY
            if path in index.opaque:
                if number:
                    why.append(f"layer {number + 1} makes {path} opaque")
                return

    def holders(self, path: str) -> Holders:
        """Who decides PATH (absolute, clean), its symlinks not followed: every layer
        whose entry shows there."""
        if path.count("/") > MAX_DEPTH:
            return Holders((), None, problem=f"more than {MAX_DEPTH} directories deep")
        known = self._held.get(path)
        if known is not None:
            return known
        why: list[str] = []
        shown = list(self._shown(path, why))
        if not shown:
            known = Holders((), None, problem=why[-1] if why else "no such file")
        else:
            known = Holders(tuple(n for n, _ in shown), shown[0][1])
        self._held[path] = known
        return known

    def top(self, path: str) -> tuple[Optional[int], Optional[str], str]:
        """(the layer whose entry at PATH shows on top, its kind, why there is none),
        loading no layer below it."""
        if path.count("/") > MAX_DEPTH:
            return None, None, f"more than {MAX_DEPTH} directories deep"
        why: list[str] = []
        for number, kind in self._shown(path, why):
            return number, kind, ""
        return None, None, why[-1] if why else "no such file"

    def hider(self, layer: int, path: str) -> Optional[int]:
        """The layer that removes or replaces LAYER's entry at PATH (a whiteout, an opaque
        directory, a non-directory above it, an entry of another kind at it); None when
        the entry shows in the final tree, or LAYER holds nothing there."""
        for current in (*ancestors(path), path):
            if layer in self.holders(current).layers:
                continue
            own = self.index(layer).kind(current)
            if own is None:
                return None
            for number in range(layer + 1, self.count):
                index = self.index(number)
                if current in index.whiteouts or "/" in index.opaque:
                    return number
                found = index.kind(current)
                if found is not None and (found != DIRECTORY or own != DIRECTORY
                                          or current in index.opaque):
                    return number
            return None
        return None

    def resolve(self, path: str, hop: Optional[Callable[[str], None]] = None) -> Resolved:
        """Where a process that opens PATH lands (symlinks followed as Linux does, at most
        MAX_HOPS, `..` stopping at the root); HOP is told each path a symlink leads to."""
        last: list[tuple[int, Optional[str]]] = [(self.count - 1, DIRECTORY)]
        looked = ["/"]

        def look(candidate: str, rest: list[str]) -> Optional[str]:
            looked[0] = candidate
            number, kind, why = self.top(candidate)
            if number is None:
                raise _Stopped(Resolved(clean(candidate + "/" + "/".join(reversed(rest))),
                                        problem=why))
            if kind == SYMLINK:
                return self.index(number).links[candidate]
            if kind != DIRECTORY and rest:
                raise _Stopped(Resolved(candidate, problem=f"{candidate} is not a directory"))
            last[0] = (number, kind)
            return None

        try:
            resolved = follow(path, look, hop=None if hop is None else
                              lambda target: hop(clean(target)))
        except _Stopped as stopped:
            return stopped.resolved
        if resolved is None:
            return Resolved(looked[0], problem=NEVER_RESOLVES)
        if resolved == "/":
            return Resolved("/", self.count - 1, DIRECTORY)
        number, kind = last[0]
        member = self.index(number).links.get(resolved, resolved) \
            if kind == HARDLINK else resolved
        return Resolved(resolved, number, kind, member)

    def paths(self) -> dict[str, tuple[int, str]]:
        """Every path of the final tree: (the layer deciding it, its kind)."""
        found: dict[str, tuple[int, str]] = {}
        for number in range(self.count):
            index = self.index(number)
            for path in (*index.kinds, *index.directories):
                if path in found:
                    continue
                held = self.holders(path)
                if held.layers and held.kind is not None:
                    found[path] = (held.layers[0], held.kind)
        return found

