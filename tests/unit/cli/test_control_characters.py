"""A reference, path or value holding a line break (or another control character) is
echoed in an error quoted as Python writes it (`errors.quoted`, verify's quoting), so the
message stays one line: one reading for a log reader. `--json` keeps the exact string."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipcc_build.cli import os_error_message
from aipcc_build.errors import quoted
from aipcc_build.publish.signing import write_private_key
from tests.conftest import REPO

BROKEN = "reg.example/a\nb:1"
MATRIX = str(REPO / "matrix" / "demo.yaml")


def _one_line_naming(err: str, value: str) -> None:
    """ERR's error lines quote VALUE: none holds its line break, one names it quoted."""
    errors = [line for line in err.splitlines() if line.startswith("aipcc-build: error:")]
    assert errors, err
    assert all(line.startswith(("aipcc-build: ", "1 image(s)")) for line in err.splitlines())
    assert quoted(value) in errors[0] and value not in err, err


def test_quoted_is_verifys_quoting_only_where_needed() -> None:
    assert quoted("a\nb") == repr("a\nb") == "'a\\nb'"
    assert quoted("a\x1bb") == "'a\\x1bb'"
    assert quoted("oci:/a b") == "oci:/a b"
    assert quoted("main", always=True) == "'main'"


@pytest.mark.parametrize("words", [
    [],  # the click-free reading
    ["--"],  # declined by it: the click command reads the line
])
def test_validate_quotes_a_reference_holding_a_line_break(cli, words: list[str]) -> None:
    result = cli("validate", *words, BROKEN)
    assert result.code == 2
    _one_line_naming(result.err, BROKEN)


def test_validate_quotes_a_layout_path_holding_a_line_break(cli, tmp_path: Path) -> None:
    ref = f"oci:{tmp_path}/a\nb"
    result = cli("validate", ref)
    assert result.code == 2
    _one_line_naming(result.err, ref)
    assert quoted(f"{tmp_path}/a\nb") in result.err


def test_validate_json_keeps_the_exact_reference(cli) -> None:
    result = cli("validate", "--json", BROKEN)
    unreadable = json.loads(result.out)["unreadable"]
    assert [u["ref"] for u in unreadable] == [BROKEN]


def test_verify_quotes_a_reference_holding_a_line_break(cli, tmp_path: Path) -> None:
    write_private_key(str(tmp_path / "k.key"), b"p", n=1 << 10)
    result = cli("verify", "--key", str(tmp_path / "k.pub"), "a\nb")
    assert result.code == 2
    _one_line_naming(result.err, "a\nb")


@pytest.mark.parametrize("args, value", [
    (["--matrix", MATRIX, "plan", "--changed-since", "main\nx"], "main\nx"),
    (["--matrix", MATRIX, "plan", "--changed-since=main\nx"], "main\nx"),
    (["--matrix", MATRIX, "list", "--kind", "a\nb"], "a\nb"),
    (["--matrix", MATRIX, "promote", "--build-id", "1", "--to", "x\ny"], "x\ny"),
    # refused, not handed to skopeo as a namespace
    (["--matrix", MATRIX, "promote", "--build-id", "1", "--to", "reg\n/x"], "reg\n/x"),
    (["--matrix", MATRIX, "mirror", "--build-id", "1", "--to", "x\ny"], "x\ny"),
    (["--matrix", MATRIX, "mirror", "--to", "dir:x", BROKEN], BROKEN),  # click's message
    (["--matrix", "/nonexistent/a\nb.yaml", "list"], "/nonexistent/a\nb.yaml"),
])
def test_other_commands_quote_a_value_holding_a_line_break(
        cli, monkeypatch: pytest.MonkeyPatch, args: list[str], value: str) -> None:
    monkeypatch.chdir(REPO)
    result = cli(*args)
    assert result.code == 2
    _one_line_naming(result.err, value)


def test_a_file_system_error_quotes_its_path() -> None:
    message = os_error_message(FileNotFoundError(2, "No such file or directory", "/a\nb"))
    assert message == "'/a\\nb': No such file or directory"
