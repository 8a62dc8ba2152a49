"""The digest of a small document (a manifest, an image config) as OCI names it
(`sha256:<hex>`): what the validator checks every blob it reads against.

Hashes with the interpreter's built-in sha256/sha512 when it has them: importing `hashlib`
loads OpenSSL first, which took several milliseconds of a warm validation that hashes a few
kilobytes. Streams of layers hash through `hashlib` (OpenSSL is faster on gigabytes).
"""

from __future__ import annotations

import importlib
from typing import Optional

# algorithm -> (module, constructor) of CPython's built-in hashes: `_sha2` from 3.12 on,
# `_sha256` / `_sha512` before.
_BUILTIN = {
    "sha256": (("_sha2", "sha256"), ("_sha256", "sha256")),
    "sha512": (("_sha2", "sha512"), ("_sha512", "sha512")),
}


def hexdigest(algorithm: str, data: bytes) -> Optional[str]:
    """DATA's hex digest under ALGORITHM ("sha256"); None for an algorithm unknown here."""
    for module, constructor in _BUILTIN.get(algorithm, ()):
        try:
            return str(getattr(importlib.import_module(module), constructor)(data).hexdigest())
        except (ImportError, AttributeError):
            continue
    import hashlib

    if algorithm not in hashlib.algorithms_available:
        return None
    return hashlib.new(algorithm, data).hexdigest()
