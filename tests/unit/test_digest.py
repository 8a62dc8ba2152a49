"""Small documents' digests, with or without OpenSSL, agree with hashlib."""

from __future__ import annotations

import hashlib

from aipcc_build.digest import hexdigest, is_algorithm, is_lower_hex


def test_builtin_hashes_agree_with_hashlib() -> None:
    data = b'{"schemaVersion": 2}'
    assert hexdigest("sha256", data) == hashlib.sha256(data).hexdigest()
    assert hexdigest("sha512", data) == hashlib.sha512(data).hexdigest()
    assert hexdigest("md5", data) == hashlib.md5(data).hexdigest()  # through hashlib
    assert hexdigest("no-such-hash", data) is None


def test_hex_and_algorithm_checks_take_exactly_their_characters() -> None:
    assert is_lower_hex("0123456789abcdef")
    for text in ("", "ABCDEF", "abcg", "ab\n", " ab", "\u0661\u0662"):  # Arabic-Indic digits
        assert not is_lower_hex(text), text
    assert is_algorithm("sha256") and is_algorithm("blake3")
    for text in ("", "SHA256", "sha-256", "sha_256", "sha256\n", "sha\u00b2"):
        assert not is_algorithm(text), text
