"""The file name containers/storage gives an image's big-data item whose key is not all
[0-9a-z.]: "=" and the key in standard base64, made here without the base64 module."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from aipcc_build.imagefs.storage import base64_text


@given(st.binary(max_size=200))
def test_base64_text_is_standard_base64(data: bytes) -> None:
    assert base64_text(data) == base64.b64encode(data).decode()


def test_a_config_key_is_named_as_containers_storage_names_it() -> None:
    # A config's key is its digest: "sha256:" and 64 hex digits.
    key = "sha256:" + "0123456789abcdef" * 4
    assert base64_text(key.encode()) == base64.b64encode(key.encode()).decode()
    assert base64_text(b"") == ""
