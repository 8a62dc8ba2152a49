"""`aipcc-build index`'s one entry point: the request, and the destination ROOT names (a
directory: a static tree; pulp+https://HOST: a Pulp), each fed the same judged wheels.

Index sources (VARIANT=https://.../simple/) are fetched into temporary directories first
and removed afterwards, whatever the destination.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from ..errors import InputError
from ..matrix import Matrix
from .variants import DEFAULT_KEEP, IndexResult

if TYPE_CHECKING:
    from .pulp_api import Client
    from .pulp_config import PulpServer

PULP_SCHEME = "pulp+"


@dataclass(frozen=True)
class IndexRequest:
    root: str  # a directory, or pulp+https://HOST[:PORT]
    wheels: Mapping[str, tuple[str, ...]]  # versioned variant -> directories or index URLs
    dry_run: bool = False
    keep: int = DEFAULT_KEEP  # older generations (Pulp: versions) kept besides the current
    rollback: tuple[str, ...] = ()  # variants to point back at what they served before
    profile: Optional[str] = None  # pulp-cli's profile with the Pulp credentials

    @property
    def pulp(self) -> bool:
        return self.root.startswith(PULP_SCHEME)


def _check(request: IndexRequest) -> None:
    if request.rollback and (request.wheels or not request.pulp or request.dry_run):
        raise InputError("a rollback takes a pulp+https:// server, and no wheels nor dry "
                         "run", field="rollback")
    if not request.rollback and not request.wheels:
        raise InputError("give at least one variant's wheels", field="wheels")
    if request.profile is not None and not request.pulp:
        raise InputError("a pulp-cli profile is for a pulp+https:// server", field="profile")


def publish_indexes(matrix: Matrix, request: IndexRequest,
                    make_client: Optional[Callable[[PulpServer], Client]] = None) -> IndexResult:
    """Publish (or roll back) the request's variants where ROOT says. MAKE_CLIENT makes
    the Pulp client (tests hand in one that talks through a proxy or fails on cue)."""
    _check(request)
    from . import index_source

    if request.pulp:
        from . import pulp
        from .pulp_api import Client
        from .pulp_config import server

        target = server(request.root, request.profile)
        client = make_client or Client
        if request.rollback:
            return pulp.rollback(matrix, target, request.rollback, client)
        with index_source.local(request.wheels) as local:
            return pulp.publish(matrix, pulp.PulpRequest(
                server=target, wheels=local, dry_run=request.dry_run, keep=request.keep),
                client)
    from . import static_tree

    with index_source.local(request.wheels) as local:
        return static_tree.publish(matrix, static_tree.TreeRequest(
            root=request.root, wheels=local, dry_run=request.dry_run, keep=request.keep))
