"""Names the OCI image spec and Docker's registry API give manifests and annotations: read by
the validator, the local-storage reader, the registry client and the mirror's layout."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Any

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
# A manifest that lists other manifests (one per platform).
INDEX_TYPES = (OCI_INDEX, DOCKER_MANIFEST_LIST)
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
# The tag of an image in an OCI layout's index.json.
REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name"


def load_json(data: bytes | str) -> Any:
    """DATA (a registry's answer, a layout's file) as JSON; ValueError when it is not, JSON
    nested past Python's recursion limit included (`json` raises RecursionError for it,
    a traceback where every caller expects ValueError).

    Read by CPython's own scanner (`_json`'s, the one `json.loads` reads with) without
    importing `json`, whose package compiles patterns as it is imported and loads `re` and
    `enum` (a sixth of a `verify` of one image). Whatever that read does not take -- a
    document json refuses, text json would not decode as UTF-8, a Python without `_json`
    -- `json.loads` reads again: its value, or its refusal (type and message), is the
    answer. tests/unit/test_oci.py holds the two to the same on every document."""
    try:
        return _scanned(data)
    except Exception:  # json's own reading decides, and words, every refusal
        pass
    import json

    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


# What json skips around a document (its decoder's pattern: [ \t\n\r]*).
_WHITESPACE = " \t\n\r"
_scanners: list[Any] = []  # the scanner, made once; None without `_json`


class _Declined(Exception):
    """A document the fast read leaves to `json.loads`."""


class _Reading:
    """json.loads's settings as `_json.make_scanner` reads them from its decoder: strict
    strings, no hooks, numbers as int and float, NaN and the infinities as floats."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"),
                      "-Infinity": float("-inf")}.__getitem__


def _scanned(data: bytes | str) -> Any:
    if not _scanners:
        try:
            from _json import make_scanner
        except ImportError:
            _scanners.append(None)
        else:
            # Any object with the decoder's settings (json's passes its JSONDecoder).
            _scanners.append(make_scanner(_Reading()))  # type: ignore[arg-type]
    scan = _scanners[0]
    if scan is None:
        raise _Declined
    if isinstance(data, bytes):
        # UTF-8 as json.loads decodes it: bytes it would read as another encoding (a BOM,
        # a zero among the first two: UTF-16 or UTF-32) are left to it.
        if not data or not 0 < data[0] < 0x80 or data[1:2] == b"\0":
            raise _Declined
        text = data.decode("utf-8", "surrogatepass")
    elif isinstance(data, str) and not data.startswith("\ufeff"):  # json refuses a BOM
        text = data
    else:
        raise _Declined
    value, end = scan(text, len(text) - len(text.lstrip(_WHITESPACE)))
    if end != len(text) and text[end:].lstrip(_WHITESPACE):  # json's "Extra data"
        raise _Declined
    return value


# The standard base64 alphabet.
_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64decode(text: str | bytes) -> bytes:
    """`base64.b64decode(TEXT, validate=True)` (a signature or a payload in a document),
    decoded by binascii as it is there, without importing `base64` (which imports `re`):
    the standard alphabet alone, padding only at the end. Its value and its refusal,
    binascii.Error (a ValueError; ValueError for a str outside ASCII), as that call's on
    this Python: Python 3.11 made it binascii's strict mode, before it a pattern's check."""
    import binascii
    import sys

    if isinstance(text, str):
        try:
            data = text.encode("ascii")
        except UnicodeEncodeError:
            raise ValueError("string argument should contain only ASCII characters") \
                from None
    else:
        data = text
    if sys.version_info >= (3, 11):
        return binascii.a2b_base64(data, strict_mode=True)
    body = data.rstrip(b"=")  # [A-Za-z0-9+/]*={0,2}
    if len(data) - len(body) > 2 or body.translate(None, _BASE64):
        raise binascii.Error("Non-base64 digit found")
    return binascii.a2b_base64(data)
