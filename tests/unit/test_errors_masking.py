"""errors.without_credentials: what every message may show of a URL's user information."""

from __future__ import annotations

import pytest

from aipcc_build.errors import without_credentials


@pytest.mark.parametrize("text, shown", [
    ("https://user:PW@host/simple/", "https://***@host/simple/"),
    ("https://TOKEN@host/simple/", "https://***@host/simple/"),
    ("docker://me:s3cret@host/ns", "docker://***@host/ns"),
    ("copy me:s3cret@host/ns failed", "copy ***@host/ns failed"),
    ("mail admin@example.com", "mail admin@example.com"),
    ("https://host/simple/", "https://host/simple/"),
])
def test_user_information_is_masked(text: str, shown: str) -> None:
    assert without_credentials(text) == shown
