"""The one reader of image references (`HOST/PATH:TAG`, `HOST/PATH@sha256:...`, both):
what promote, mirror, the registry look-up and the validator take apart. A library under
the stages (plain functions: a warm validation imports it, and a class costs start-up)."""

from __future__ import annotations

from .patterns import lazy

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Optional

# The distribution reference grammar: [HOST[:PORT]/]PATH[:TAG][@DIGEST], lower-case path.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = lazy(
    rf"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?")


def split(reference: str) -> tuple[str, Optional[str], Optional[str]]:
    """(repository, tag, digest) of REFERENCE: HOST/PATH without tag or digest, then each
    when present. A colon in the host part (a port) is never a tag."""
    named, _, digest = reference.partition("@")
    tag = None
    if ":" in named.rsplit("/", 1)[-1]:
        named, _, tag = named.rpartition(":")
    return named, tag, digest or None


def repository_of(reference: str) -> str:
    """REFERENCE without its tag or digest."""
    return split(reference)[0]


def tag_of(reference: str) -> Optional[str]:
    return split(reference)[1]


def below(reference: str, registry: str) -> Optional[str]:
    """The repository path of REFERENCE below REGISTRY, without tag or digest
    ("quay.io/aipcc/base/cuda:3.0-1", "quay.io/aipcc" -> "base/cuda"); None when outside."""
    repository = repository_of(reference)
    prefix = registry.rstrip("/") + "/"
    return repository[len(prefix):] if repository.startswith(prefix) else None


def is_reference(text: str) -> bool:
    """Whether TEXT is an image reference as podman takes one (quay.io/ns/name:tag)."""
    return _REFERENCE.fullmatch(text) is not None
