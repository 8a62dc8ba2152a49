"""The one reader of image references (`HOST/PATH:TAG`, `HOST/PATH@sha256:...`, both):
what promote, mirror, the registry look-up and the validator take apart. A library under
the stages (plain functions: a warm validation imports it, and a class costs start-up)."""

from __future__ import annotations

from .digest import is_lower_hex

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Optional

# The distribution reference grammar: [HOST[:PORT]/]PATH[:TAG][@DIGEST], lower-case path;
# is_reference reads it with str methods (compiling it as a pattern cost `verify` of one
# image 2.5 M instructions, 2%). Its regular expression, which the unit tests compare with:
#   (?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?C(?:/C)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?
#   (?:@sha256:[0-9a-f]{64})?   with C (a path component) [a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*
_DIGITS = frozenset("0123456789")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz") | _DIGITS
_ALNUM = _LOWER | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_HOST = _ALNUM | frozenset(".-")
_TAG = _ALNUM | frozenset("_.-")
# (separator so far, next character) -> the separator with it; a pair not here is none.
_SEPARATED = {("", "."): ".", ("", "_"): "_", ("_", "_"): "__", ("", "-"): "-", ("-", "-"): "-"}


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
    named, at, digest = text.partition("@")
    if at and not (digest.startswith("sha256:") and len(digest) == 71
                   and is_lower_hex(digest[7:])):
        return False
    head, slash, last = named.rpartition("/")
    last, colon, tag = last.partition(":")
    if colon and not (0 < len(tag) <= 128 and _TAG.issuperset(tag) and tag[0] not in ".-"):
        return False
    parts = [*head.split("/"), last] if slash else [last]
    if all(map(_is_component, parts)):
        return True
    return len(parts) > 1 and _is_host(parts[0]) and all(map(_is_component, parts[1:]))


def _is_host(text: str) -> bool:
    """Whether TEXT is HOST[:PORT] as the grammar has it."""
    host, colon, port = text.partition(":")
    return (bool(host) and _HOST.issuperset(host)
            and (not colon or bool(port) and _DIGITS.issuperset(port)))


def _is_component(text: str) -> bool:
    """Whether TEXT is one path component: runs of lower-case letters and digits, each two
    apart by one `.`, one `_`, `__`, or any number of `-`."""
    if not text or text[0] not in _LOWER or text[-1] not in _LOWER:
        return False
    separator = ""  # so far since the last run ("-" for any number of `-`)
    for char in text:
        if char in _LOWER:
            separator = ""
        elif char in "._-":
            longer = _SEPARATED.get((separator, char))
            if longer is None:
                return False
            separator = longer
        else:
            return False
    return True
