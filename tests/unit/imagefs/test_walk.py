"""`Unpacker.walk`, the scan's one loop over tar headers, is a shortcut of the reader's and
`Unpacker.add`'s full code, not a second model: on random layers both give the same tree,
refusals (type and message), budget and member count, and `walk` passes over only the
members a caller of the full code would have passed over itself."""

from __future__ import annotations

from typing import Optional, Union

from hypothesis import HealthCheck, given, settings

from aipcc_build.imagefs.overlay import (
    IMPLIED_DIRECTORY_MODE,
    LayerRefused,
    Node,
    Tree,
    Unpacker,
)
from aipcc_build.imagefs.symlinks import Budget, BudgetExceeded
from aipcc_build.imagefs.tar import DIRECTORY, REGULAR, SYMLINK, TarError, TarWalker
from aipcc_build.validate.detect import CANDIDATE
from aipcc_build.validate.layers import ODD_MODE
from tests.support.random_layers import Pieces, layers, pieces
from tests.support.raw_tar import Member, raw_tar

Seen = list[tuple[bytes, str, int, bytes, str, Optional[str]]]


def _snapshot(tree: Tree) -> list[tuple[object, ...]]:
    """Each path's node, and the paths sharing it (hard links)."""
    sharing: dict[int, list[str]] = {}
    for path, node in tree.items():
        sharing.setdefault(id(node), []).append(path)
    return sorted((path, node.kind, node.mode, node.digest, node.link, node.opaque,
                   node.first, tuple(sharing[id(node)])) for path, node in tree.items())


def _unpack(data: bytes, sizes: list[int], seekable: bool, fast: bool
            ) -> tuple[Union[str, None], Seen, int, tuple[object, ...]]:
    tree = Tree()
    tree["/"] = Node(DIRECTORY, IMPLIED_DIRECTORY_MODE)
    budget = Budget(0)
    unpacker = Unpacker(tree, budget)
    walker = TarWalker(Pieces(data, sizes, seekable))
    seen: Seen = []
    error = None
    try:
        if fast:
            members = unpacker.walk(walker, CANDIDATE.search, ODD_MODE)
        else:
            members = ((entry, name, unpacker.add(entry, name)) for entry, name in
                       ((entry, entry.name.decode("utf-8", "surrogateescape"))
                        for entry in walker))
        for entry, name, where in members:
            seen.append((entry.name, entry.kind, entry.mode, entry.link, name, where))
        unpacker.finish()
    except (TarError, LayerRefused, BudgetExceeded) as exc:
        error = f"{type(exc).__name__}: {exc}"
    # The names seen so far serve later members: after a refusal there are none.
    state = (_snapshot(tree), unpacker._directories,
             sorted(unpacker._seen) if error is None else None, budget.left, budget.total)
    return error, seen, walker.members, state


def _passed_over(kind: str, mode: int, link: bytes, where: Optional[str]) -> bool:
    """What the scan's loop passes over without a look, where the detector's first test
    does not take it: a plain file or directory of a mode without odd bits, a symlink
    whose target has no "..". """
    return where is not None and not CANDIDATE.search(where) and (
        (kind in (REGULAR, DIRECTORY) and not mode & ODD_MODE)
        or (kind == SYMLINK and b".." not in link))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=layers(), reading=pieces)
def test_the_fast_case_places_and_refuses_as_the_full_code(
        data: bytes, reading: tuple[list[int], bool]) -> None:
    sizes, seekable = reading
    error, shown, count, state = _unpack(data, sizes, seekable, fast=True)
    full_error, full, full_count, full_state = _unpack(data, sizes, seekable, fast=False)
    assert (error, count, state) == (full_error, full_count, full_state)
    # What walk shows is what the full code yields, less members the scan passes over.
    left = iter(full)
    for member in shown:
        for other in left:
            if other == member:
                break
            assert _passed_over(other[1], other[2], other[3], other[5]), other
        else:
            raise AssertionError(f"{member} is not one of the full code's, in order")
    for other in left:
        if error is None:
            assert _passed_over(other[1], other[2], other[3], other[5]), other


def test_a_plain_layer_is_placed_without_showing_a_member() -> None:
    """The common layer (directories, then plain files in them) shows the caller only what
    it wants, and the first member, read before the reader holds a buffer; the first
    member below each directory is placed too (its parent resolved once, as `add` resolves
    it)."""
    members = [Member(b"usr/", b"5", mode=0o755), Member(b"usr/lib/", b"5", mode=0o755)]
    members += [Member(b"usr/lib/f%d" % n, data=b"x" * n) for n in range(200)]
    members += [Member(b"usr/local/cuda-12.8/version.json", data=b"{}")]
    walker = TarWalker(Pieces(raw_tar(members), [1 << 20], False))
    tree = Tree()
    tree["/"] = Node(DIRECTORY, IMPLIED_DIRECTORY_MODE)
    unpacker = Unpacker(tree, Budget(0))
    shown = [where for _, _, where in unpacker.walk(walker, CANDIDATE.search, ODD_MODE)]
    assert shown == ["/usr", "/usr/local/cuda-12.8/version.json"]
    assert walker.members == 203 and len(tree) == 206  # with "/" and the two made
