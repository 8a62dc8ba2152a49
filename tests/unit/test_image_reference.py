"""The one reader of image references."""

from __future__ import annotations

from aipcc_build.image_reference import below, repository_of, split, tag_of


def test_tag_digest_and_port() -> None:
    assert split("quay.io/aipcc/base/cuda:3.0-1") == ("quay.io/aipcc/base/cuda", "3.0-1", None)
    assert split("127.0.0.1:5000/ns/img") == ("127.0.0.1:5000/ns/img", None, None)
    assert split("127.0.0.1:5000/ns/img:1@sha256:ab") == ("127.0.0.1:5000/ns/img", "1",
                                                          "sha256:ab")
    assert split("h/r@sha256:ab") == ("h/r", None, "sha256:ab")
    assert repository_of("localhost:5000/a/b:c") == "localhost:5000/a/b"
    assert tag_of("localhost:5000/a/b") is None
    assert below("h:1/ns/a/b:t", "h:1/ns/") == "a/b"
    assert below("h:1/nsx/a:t", "h:1/ns") is None
