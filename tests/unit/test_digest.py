"""Small documents' digests, with or without OpenSSL, agree with hashlib."""

from __future__ import annotations

import hashlib

from aipcc_build.digest import hexdigest


def test_builtin_hashes_agree_with_hashlib() -> None:
    data = b'{"schemaVersion": 2}'
    assert hexdigest("sha256", data) == hashlib.sha256(data).hexdigest()
    assert hexdigest("sha512", data) == hashlib.sha512(data).hexdigest()
    assert hexdigest("md5", data) == hashlib.md5(data).hexdigest()  # through hashlib
    assert hexdigest("no-such-hash", data) is None
