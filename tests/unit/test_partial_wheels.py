"""tests/support/partial_wheels: a member fetched by range requests is taken only as the
wheel PyPI publishes holds it (the address named by the file's blake2b digest, the length
in every range answer, the member's CRC-32 and its sha256 in RECORD); a served index of
our own stands in for PyPI."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support import partial_wheels
from tests.support.http_server import serving

MEMBER = "pkg/lib.so"
CONTENT = b"\x7fELF" + bytes(range(256)) * 64


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


def wheel_bytes(recorded: bytes = CONTENT, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A wheel holding CONTENT at MEMBER whose RECORD gives the hash of RECORDED."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        archive.writestr(MEMBER, CONTENT)
        archive.writestr("pkg-1.0.dist-info/METADATA", "Name: pkg\nVersion: 1.0\n")
        archive.writestr("pkg-1.0.dist-info/RECORD",
                         f"{MEMBER},{_hash(recorded)},{len(recorded)}\n"
                         "pkg-1.0.dist-info/METADATA,,\npkg-1.0.dist-info/RECORD,,\n")
    return out.getvalue()


@pytest.fixture(scope="module")
def pypi() -> Iterator[tuple[str, dict[str, Any]]]:
    """A stand-in for PyPI on 127.0.0.1: its JSON API and the file host's range answers,
    serving what the dict it yields holds."""
    served: dict[str, Any] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (the http.server name)
            if self.path.endswith("/json"):
                body = json.dumps(served["json"]).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            data = served["wheel"]
            first, _, last = self.headers["Range"].removeprefix("bytes=").partition("-")
            piece = data[int(first):int(last) + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{served['length']}")
            self.send_header("Content-Length", str(len(piece)))
            self.end_headers()
            self.wfile.write(piece)

    with serving(Handler) as origin:
        yield origin, served


@pytest.fixture
def index(pypi: tuple[str, dict[str, Any]], tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Serves the wheel given to the returned function as PyPI would, PyPI's JSON API
    pointing at it (at the address ADDRESS_DIGEST names, and giving LENGTH as its length
    in range answers, when given); the cache is TMP_PATH's."""
    origin, served = pypi
    monkeypatch.setenv("AIPCC_CACHE", str(tmp_path))
    monkeypatch.setattr(partial_wheels, "PYPI", f"{origin}/pypi")

    def serve(data: bytes, address_digest: str = "", length: int = 0) -> None:
        blake2b = hashlib.blake2b(data, digest_size=32).hexdigest()
        digest = address_digest or blake2b
        served.update(wheel=data, length=length or len(data), json={"releases": {"1.0": [{
            "filename": "pkg-1.0-py3-none-any.whl", "size": len(data),
            "digests": {"blake2b_256": blake2b},
            "url": f"/packages/{digest[:2]}/{digest[2:4]}/{digest[4:]}/"
                   "pkg-1.0-py3-none-any.whl"}]}})

    return serve


def fetch() -> Path:
    return partial_wheels.partial_wheel("pkg", "1.0", "py3-none-any", [MEMBER])


def test_a_member_as_the_published_wheel_holds_it(index: Callable[..., None]) -> None:
    index(wheel_bytes())
    with zipfile.ZipFile(fetch()) as copy:
        assert copy.read(MEMBER) == CONTENT
        assert sorted(copy.namelist()) == sorted(
            [MEMBER, "pkg-1.0.dist-info/METADATA", "pkg-1.0.dist-info/RECORD"])


def test_a_member_its_record_disowns_is_refused(index: Callable[..., None]) -> None:
    index(wheel_bytes(recorded=b"other bytes"))
    with pytest.raises(ValueError, match="pkg/lib.so does not match the sha256"):
        fetch()


def test_a_member_whose_bytes_fail_their_crc_is_refused(index: Callable[..., None]) -> None:
    data = bytearray(wheel_bytes(compression=zipfile.ZIP_STORED))
    data[data.index(CONTENT) + 100] ^= 0x01  # the member's bytes, as stored
    index(bytes(data))
    with pytest.raises(zipfile.BadZipFile, match="CRC"):
        fetch()


def test_an_address_not_named_by_the_published_digest_is_refused(
        index: Callable[..., None]) -> None:
    index(wheel_bytes(), address_digest="0" * 64)
    with pytest.raises(ValueError, match="is not the address of the file PyPI publishes"):
        fetch()


def test_a_range_answer_naming_another_length_is_refused(index: Callable[..., None]) -> None:
    data = wheel_bytes()
    index(data, length=len(data) + 1)
    with pytest.raises(ValueError, match="names the file's length"):
        fetch()
