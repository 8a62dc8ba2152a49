"""The digest of a small document (a manifest, an image config) as OCI names it
(`sha256:<hex>`): what the validator checks every blob it reads against.

Hashes with the interpreter's built-in sha256/sha512 when it has them: importing `hashlib`
loads OpenSSL first, which took several milliseconds of a warm validation that hashes a few
kilobytes. Streams of layers hash through `hashlib` (OpenSSL is faster on gigabytes).
"""

from __future__ import annotations

from .functional import cache

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

# algorithm -> (module, constructor) of CPython's built-in hashes: `_sha2` from 3.12 on,
# `_sha256` / `_sha512` before.
_BUILTIN = {
    "sha256": (("_sha2", "sha256"), ("_sha256", "sha256")),
    "sha512": (("_sha2", "sha512"), ("_sha512", "sha512")),
}


_LOWER_HEX = frozenset("0123456789abcdef")
_ALGORITHM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def is_lower_hex(text: str) -> bool:
    """Whether TEXT is all lowercase hex digits (and not empty): a digest's or an image
    ID's, checked without compiling a pattern (a warm validation checks a few; issue 37)."""
    return bool(text) and _LOWER_HEX.issuperset(text)


def is_algorithm(text: str) -> bool:
    """Whether TEXT can name a digest's algorithm here: lowercase letters and digits."""
    return bool(text) and _ALGORITHM.issuperset(text)


@cache
def _builtin(algorithm: str) -> Optional[Callable[[bytes], Any]]:
    """The built-in hash constructor of ALGORITHM, None when the interpreter has none. Looked
    up once: a module that is not there is searched for along the whole of sys.path."""
    for module, constructor in _BUILTIN.get(algorithm, ()):
        try:
            return getattr(__import__(module), constructor)  # top-level: no importlib
        except (ImportError, AttributeError):
            continue
    return None


def hexdigest(algorithm: str, data: bytes) -> Optional[str]:
    """DATA's hex digest under ALGORITHM ("sha256"); None for an algorithm unknown here."""
    builtin = _builtin(algorithm)
    if builtin is not None:
        return str(builtin(data).hexdigest())
    import hashlib

    if algorithm not in hashlib.algorithms_available:
        return None
    return hashlib.new(algorithm, data).hexdigest()
