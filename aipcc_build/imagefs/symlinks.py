"""Resolve symlinks lexically inside an image's own tree, never on the host.

Resolution is bounded the way Linux bounds a path lookup (40 links, PATH_MAX bytes), and a
layer's links share one budget of steps linear in their number: a hostile layer (chains,
targets that wander up and down) cannot make the scan quadratic; past the budget the layer
is reported as hostile instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable, Optional

MAX_HOPS = 40  # Linux's own limit for following symlinks in one path lookup
PATH_MAX = 4096  # Linux's: a longer path or link target fails (ENAMETOOLONG)
# Path components one layer's resolution may look at: per link (a real link takes a few
# hops of a few components), plus a floor for layers with few links.
STEPS_PER_LINK = 32
MIN_STEPS = 100_000


class BudgetExceeded(Exception):
    """Resolving a layer's symlinks needs more steps than its budget."""


class Budget:
    """Steps left for resolving the symlinks of one layer of LINKS links."""

    def __init__(self, links: int) -> None:
        self.total = STEPS_PER_LINK * links + MIN_STEPS
        self.left = self.total


def follow(path: str, look: Callable[[str, list[str]], Optional[str]],
           budget: Optional[Budget] = None,
           hop: Optional[Callable[[str], None]] = None) -> Optional[str]:
    """Where PATH leads, walked component by component as Linux walks it: LOOK(candidate,
    rest) gives the target of a symlink at each path on the way (None: go into it; it
    raises to stop the walk), REST being the components still to walk, last first. `..`
    goes up from where the walk stands and stays at the root, as in a container's mount
    namespace. None when Linux gives up too (more than MAX_HOPS links, a path of PATH_MAX
    or more). HOP is told the path each link leads to (not cleaned). Raises
    BudgetExceeded when BUDGET runs out."""
    if len(path) >= PATH_MAX:
        return None
    prefixes: list[str] = []  # prefixes[i]: the resolved path up to component i
    pending = [p for p in path.split("/") if p]
    pending.reverse()
    spend(budget, len(pending))
    hops = 0
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":
            if prefixes:
                prefixes.pop()
            continue
        candidate = (prefixes[-1] if prefixes else "") + "/" + part
        if len(candidate) >= PATH_MAX:
            return None
        target = look(candidate, pending)
        if target is None:
            prefixes.append(candidate)
            continue
        hops += 1
        if hops > MAX_HOPS or len(target) >= PATH_MAX:
            return None
        if target.startswith("/"):
            prefixes = []
        parts = [p for p in target.split("/") if p]
        spend(budget, len(parts) + 1)
        pending.extend(reversed(parts))
        if hop is not None:
            hop((prefixes[-1] if prefixes else "") + "/" + "/".join(reversed(pending)))
    return prefixes[-1] if prefixes else "/"


def resolve_link(path: str, links: Mapping[str, str],
                 budget: Optional[Budget] = None) -> Optional[str]:
    """The path PATH leads to inside the image, LINKS mapping each symlink to its target;
    None when Linux would give up too (a loop, too many links, a path of PATH_MAX or
    more). Raises BudgetExceeded when BUDGET runs out."""
    return follow(path, lambda candidate, _: links.get(candidate), budget)


def spend(budget: Optional[Budget], steps: int) -> None:
    if budget is not None:
        budget.left -= steps
        if budget.left < 0:
            raise BudgetExceeded
