"""The readers of what registries and layouts hold (`oci`): JSON read by CPython's own
scanner without importing `json`, base64 by binascii without importing `base64`, each held
to the call it stands for (`json.loads`, `base64.b64decode(validate=True)`) on every value
and every refusal: the same value, or the same exception type and message."""

from __future__ import annotations

import base64
import json
import site
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aipcc_build import oci
from aipcc_build.oci import b64decode, load_json

REPO = str(Path(__file__).resolve().parents[2])
FUZZ = settings(max_examples=400, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def json_loads(data: bytes | str) -> Any:
    """What load_json was: json.loads, its RecursionError a ValueError."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


def outcome(read: Callable[[Any], Any], data: Any) -> tuple[str, ...]:
    """READ(DATA)'s value (its repr: ints, floats, bools, -0.0, NaN and key order told
    apart), or its exception's type and message."""
    try:
        return ("value", repr(read(data)))
    except Exception as exc:  # noqa: BLE001 (the refusal is what is compared)
        return ("error", type(exc).__qualname__, str(exc))


def same(data: Any) -> None:
    assert outcome(load_json, data) == outcome(json_loads, data), repr(data)[:200]


# JSON values: huge ints, floats of every kind, text with any code point (lone surrogates
# too), nesting.
SCALARS = (st.none() | st.booleans() | st.integers()
           | st.integers(min_value=10 ** 300, max_value=10 ** 1000)
           | st.floats() | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(st.characters(blacklist_categories=())))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=5),
                      max_leaves=30)
# json's whitespace, and characters that look like it but are not (json refuses them).
SPACE = st.text(st.sampled_from(" \t\n\r"), max_size=4)
NOT_SPACE = st.sampled_from(["\f", "\v", "\x00", "\u00a0", "\u2028", "\ufeff", "x", ",",
                             "]", "}", "0", '"', "\\"])


@st.composite
def documents(draw: st.DrawFn) -> str:
    """A JSON value dumped as json and other writers do (separators, indent, ASCII or not,
    keys sorted or not), between json's whitespace."""
    value = draw(VALUES)
    separators = draw(st.sampled_from([None, (",", ":"), (", ", ": "), (" ,", " : "),
                                       (",\n", ":\t")]))
    text = json.dumps(value, separators=separators, ensure_ascii=draw(st.booleans()),
                      indent=draw(st.sampled_from([None, 0, 1, "\t", "\r\n"])),
                      sort_keys=draw(st.booleans()), allow_nan=True)
    return draw(SPACE) + text + draw(SPACE)


@FUZZ
@given(documents(), st.sampled_from(["str", "utf-8", "utf-8-sig", "utf-16", "utf-16-le",
                                     "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]))
@example("[1, 2] ", "str")
@example('{"a": 1, "a": 2, "b": {"a": [], "a": {}}}', "utf-8")  # duplicate keys: the last
@example('"\\ud800" "x"', "str")
@example('"\\ud800\\udc00\\udfff"', "utf-8")
@example("\ufeff[]", "str")  # json refuses a BOM in text
@example("[NaN, Infinity, -Infinity, -0.0, 1e400, -1e400, 1E-400]", "utf-8")
@example("1" * 5000, "str")  # past int's digit limit where Python has one
def test_a_document_reads_as_json_reads_it(text: str, encoding: str) -> None:
    same(text if encoding == "str" else text.encode(encoding, "surrogatepass"))


@FUZZ
@given(documents(), st.data())
def test_a_spoiled_document_is_refused_as_json_refuses_it(text: str,
                                                          data: st.DataObject) -> None:
    """Cut, or with a character inserted, replaced or added before or after (garbage, or
    whitespace json does not skip): the same value or the same refusal."""
    at = data.draw(st.integers(0, len(text)))
    spoiled = data.draw(st.sampled_from([
        text[:at], text[:at] + data.draw(NOT_SPACE) + text[at:],
        text[:at] + data.draw(NOT_SPACE) + text[at + 1:],
        data.draw(NOT_SPACE) + text, text + data.draw(NOT_SPACE),
        text + data.draw(SPACE) + text]))
    same(spoiled)
    same(spoiled.encode("utf-8", "surrogatepass"))


@FUZZ
@given(st.text(st.sampled_from('{}[],:"\\ntrufalsNIiy0123456789.eE+-\t\r\n u\x00\x1f'),
               max_size=40))
@example("")
@example("   ")
@example('{"a" 1}')
@example('["a\tb"]')  # a control character in a string: json is strict
@example('"\\x"')
@example('"\\u12"')
@example("01")
@example("-")
@example("[1,]")
@example('{"a":1,}')
def test_any_text_of_json_characters_reads_as_json_reads_it(text: str) -> None:
    same(text)
    same(text.encode())


@FUZZ
@given(st.binary(max_size=16))
@example(b"\xef\xbb\xbf[1]")
@example(b"\xff\xfe[\x00]\x00")
@example(b"\x00[")
@example(b"[\x00")
@example(b"\x80")
@example(b'"\xed\xa0\x80"')  # an encoded surrogate: json decodes with surrogatepass
@example(b'"\xc3"')
def test_any_bytes_read_as_json_reads_them(data: bytes) -> None:
    same(data)
    same(bytearray(data))


def test_deep_nesting_is_a_value_error_as_before() -> None:
    for text in ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000,
                 "[" * 100_000]:
        assert outcome(load_json, text) == outcome(json_loads, text) == \
            ("error", "ValueError", "JSON nested too deep")


def test_ten_megabyte_documents() -> None:
    big = "x" * 10_000_000
    same(json.dumps([big, {"k": big}]))
    same(json.dumps(big).encode())
    same('"' + big)  # unterminated
    same("[1]" + " " * 10_000_000)
    same("[1]" + " " * 10_000_000 + "x")
    same("[1]" + big)
    same(" " * 10_000_000)


def test_what_is_not_text_or_bytes_is_refused_as_json_refuses_it() -> None:
    for value in [None, 1, [], memoryview(b"[]")]:
        same(value)


def test_without_the_c_scanner_json_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python without `_json` (or its scanner): every document read by json.loads."""
    monkeypatch.setitem(sys.modules, "_json", None)
    monkeypatch.setattr(oci, "_scanners", [])
    assert load_json(b'{"a": [1, 2.5]}') == {"a": [1, 2.5]}
    assert outcome(load_json, "[1,") == outcome(json_loads, "[1,")
    assert oci._scanners == [None]


def test_a_document_is_read_without_importing_json() -> None:
    """The point of the scanner: `json`, with the `re` and `enum` it loads, stays unloaded
    while what is read is JSON; a refusal is json's own, so json is loaded for it."""
    code = ("import sys\n"
            "from aipcc_build.oci import load_json\n"
            "assert load_json(b' {\"a\": [1, 2.5, null, true, \"\\\\u00e9\"]}\\n') == \\\n"
            "    {'a': [1, 2.5, None, True, '\\u00e9']}\n"
            "assert load_json('[NaN]')[0] != load_json('[NaN]')[0]\n"
            "print(sorted(m for m in ('json', 're', 'enum') if m in sys.modules))\n"
            "try:\n"
            "    load_json('[1,')\n"
            "except ValueError as exc:\n"
            "    print(type(exc).__name__, exc)\n")
    done = subprocess.run([sys.executable, "-S", "-c", code], check=True, text=True,
                          capture_output=True, timeout=60,
                          env={"PYTHONPATH": ":".join([REPO, *site.getsitepackages()])})
    assert done.stdout.splitlines() == [
        "[]", "JSONDecodeError Expecting value: line 1 column 4 (char 3)"]


# ---- base64 ----

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64_outcome(read: Callable[[Any], bytes], text: Any) -> tuple[str, ...]:
    try:
        return ("value", repr(read(text)))
    except Exception as exc:  # noqa: BLE001 (the refusal is what is compared)
        return ("error", type(exc).__module__, type(exc).__qualname__, str(exc))


def same_b64(text: str | bytes) -> None:
    assert b64_outcome(b64decode, text) == \
        b64_outcome(lambda t: base64.b64decode(t, validate=True), text), repr(text)[:200]


@FUZZ
@given(st.binary(max_size=40), st.data())
def test_base64_reads_as_b64decode_validating(data: bytes, draw: st.DataObject) -> None:
    """Encoded bytes, as they are or spoiled (cut, padding added or taken, a character of
    another alphabet, a line break, a space, a character outside ASCII): the same bytes
    or the same refusal."""
    text = base64.b64encode(data).decode()
    at = draw.draw(st.integers(0, len(text)))
    extra = draw.draw(st.sampled_from(["=", "==", "===", "-", "_", "\n", "\r", " ", "A",
                                       "é", "\x00", "."]))
    for case in [text, text[:at], text.rstrip("="), text[:at] + extra + text[at:],
                 text + extra, extra + text, text.replace("+", "-").replace("/", "_")]:
        same_b64(case)
        if case.isascii():
            same_b64(case.encode())


@FUZZ
@given(st.text(st.sampled_from(ALPHABET[:4] + ALPHABET[-2:] + "=\n -_é"), max_size=12))
@example("")
@example("QQ==")
@example("QR==")  # bits past the data that are not zero
@example("QQ=")
@example("QQ===")
@example("QQ==QQ==")
@example("=QQQ")
@example("Q")
@example("QQQ")
@example("QUJD\n")
def test_any_text_of_base64_characters_reads_as_b64decode_validating(text: str) -> None:
    same_b64(text)
