"""The one reader of image references (`HOST/PATH:TAG`, `HOST/PATH@sha256:...`, both):
what promote, mirror, the registry look-up and the validator take apart. A library under
the stages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Reference:
    repository: str  # HOST/PATH, without tag or digest
    tag: Optional[str]
    digest: Optional[str]

    @property
    def host(self) -> str:
        """The first component: a registry host when it holds a dot or a port, or is
        localhost (the rule docker and containers/image follow)."""
        return self.repository.split("/", 1)[0]

    @property
    def path(self) -> str:
        """The repository below the host."""
        return self.repository.split("/", 1)[1] if "/" in self.repository else ""


def parse(reference: str) -> Reference:
    """REFERENCE taken apart; a colon in the host part (a port) is never a tag."""
    named, _, digest = reference.partition("@")
    last = named.rsplit("/", 1)[-1]
    tag = None
    if ":" in last:
        named, _, tag = named.rpartition(":")
    return Reference(repository=named, tag=tag, digest=digest or None)


def repository_of(reference: str) -> str:
    """REFERENCE without its tag or digest."""
    return parse(reference).repository


def tag_of(reference: str) -> Optional[str]:
    return parse(reference).tag


def below(reference: str, registry: str) -> Optional[str]:
    """The repository path of REFERENCE below REGISTRY, without tag or digest
    ("quay.io/aipcc/base/cuda:3.0-1", "quay.io/aipcc" -> "base/cuda"); None when outside."""
    repository = repository_of(reference)
    prefix = registry.rstrip("/") + "/"
    return repository[len(prefix):] if repository.startswith(prefix) else None
