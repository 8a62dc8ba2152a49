"""A path option holding a NUL byte (which no command line of a shell can pass, but a
caller of `main([...])` can) is an input error naming the option, exit 2, one line: not
the traceback of the ValueError that open() and os.stat() raise for it (cli.main maps it
for every option, click's path types and core readers alike)."""

from __future__ import annotations

import pytest

from aipcc_build.cli import option_holding_nul

REF = "registry.example/a/b:1"


@pytest.mark.parametrize("args, option", [
    (["verify", "--key", "a\0b", REF], "--key"),
    (["verify", "--key=a\0b", REF], "--key"),
    (["verify", "--key", "/dev/null", "--authfile", "a\0b", REF], "--authfile"),
    (["validate", "--authfile", "a\0b", "oci:x"], "--authfile"),
    (["validate", "--cache-dir", "a\0b", "oci:x"], "--cache-dir"),
    (["validate", "--requirements", "a\0b", "--expect", "cpu"], "--requirements"),
    (["--matrix", "a\0b", "list"], "--matrix"),
])
def test_a_path_holding_a_nul_byte_is_an_input_error_naming_its_option(
        cli, args: list[str], option: str) -> None:
    result = cli(*args)
    assert result.code == 2
    assert result.err == f"aipcc-build: error: {option}: a path cannot hold a NUL byte\n"


def test_the_option_is_found_in_either_spelling() -> None:
    assert option_holding_nul(["x", "--key", "a\0"]) == "--key"
    assert option_holding_nul(["--authfile=\0"]) == "--authfile"
    assert option_holding_nul(["\0"]) == "a path argument"
    assert option_holding_nul(["--key", "a"]) is None
