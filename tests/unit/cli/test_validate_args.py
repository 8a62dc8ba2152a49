"""`validate REF...` read without click (issue 37's warm validation): for every command
line, the fast reading either declines it or makes exactly the call the click command
makes; and a warm run on the fast path imports neither click nor rich."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aipcc_build.cli import validate as validate_command
from aipcc_build.cli import validate_args
from aipcc_build.cli.options import cli
from tests.support.fast_reading import declines_or_agrees, make_files, run_main
from tests.support.layers import member, oci_layout, tar_bytes

REF = "oci:layout:tag"
# The files the words name (a name: its text, or None for a directory).
FILES = {"file": "{}\n", "dir": None}
# Words a command line is made of: the options in every spelling, values, references, and
# what the click command (or the group) reads otherwise or refuses.
WORDS = ["--json", "--json=1", "--strict-layers", "--expect", "--expect=cuda=12.9",
         "cuda=12.9", "cpu", "--expect=cuda", "cuda", "--expect=", "--platform",
         "linux/arm64", "--platform=", "--cache-dir", "--cache-dir=dir", "dir",
         "--cache-dir=file", "file", "--cache-dir=", "--copy-timeout", "--copy-timeout=5",
         "0", "-1", "1e3", "nan", "inf", "x", "--tls-verify", "--no-tls-verify",
         "--tls-verify=false", "--tls-verify=TRUE", "--tls-verify=maybe", "--tls-verify=",
         "--no-tls-verify=false", "false", "yes", "--authfile", "--authfile=file",
         "--authfile=dir", "--expect-gpu-archs", "sm_90,gfx942", "--expect-gpu-archs=sm_9",
         "--expect-gpu-archs=", "--expect-gpu-archs=,", "sm_90", "--matrix", "m.yaml",
         "--pushed", "--allow-missing", "--requirements", "--index-url", "--accelerator",
         "--only", "--build-id", "--registry", "--", "-", "-h", "--help", "--debug",
         "--jso", "--JSON", REF, "docker://registry.example/a/b:1", "", "x y"]


def by_click(args: list[str], monkeypatch: pytest.MonkeyPatch
             ) -> Optional[tuple[dict[str, Any], Optional[str]]]:
    """(the arguments of `run_references`, REGISTRY_AUTH_FILE while it runs) the click
    command makes of `validate ARGS`; None when it refuses the line or runs another path."""
    made: list[tuple[dict[str, Any], Optional[str]]] = []

    def record(**arguments: Any) -> int:
        made.append((arguments, os.environ.get("REGISTRY_AUTH_FILE")))
        return 0

    monkeypatch.setattr(validate_command, "run_references", record)
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.delenv("AIPCC_BUILD_MATRIX", raising=False)
    try:
        cli.main(args=["validate", *args], prog_name="aipcc-build", standalone_mode=False)
    except (click.ClickException, click.exceptions.Exit):  # refused, or --help
        return None
    except Exception:  # another path (a matrix, a requirements set) that fails here
        return None
    return made[0] if made else None


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_files(tmp_path, FILES)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("args", [
    [REF],
    [REF, "--json", "--cache-dir", "dir"],
    ["--cache-dir=missing", REF, "docker://registry.example/a/b:1", "--strict-layers"],
    ["--expect", "cuda=12.9", REF, "--platform", "linux/arm64"],
    ["--expect=cpu", "--no-tls-verify", REF, "--copy-timeout", "1e3"],
    ["--tls-verify=false", REF, "--authfile", "file", "--json"],
    ["--tls-verify=TRUE", "--authfile=missing.json", REF, "--platform="],
    ["--tls-verify", REF],
    ["--expect", "cuda=12.9", "--expect-gpu-archs", "sm_90,sm_80", REF],
    [REF, "--expect-gpu-archs=gfx942,sm_90a"],
])
def test_the_common_lines_are_read_as_click_reads_them(
        args: list[str], files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = validate_args.parse(args)
    assert fast is not None
    assert fast == by_click(args, monkeypatch)


@pytest.mark.parametrize("args", [
    [], ["--help"], ["-h", REF], ["--debug", REF], ["--", REF], ["--cache-dir", "file", REF],
    ["--authfile", "dir", REF], ["--expect"], ["--expect", "cuda", REF],
    ["--expect", "--json", REF], ["--tls-verify", "false", REF], [REF, "--tls-verify", "0"],
    ["--tls-verify=maybe", REF], ["--json=1", REF], ["--json", "--json", REF],
    ["--platform", "a", "--platform", "b", REF], ["--no-tls-verify", "--tls-verify", REF],
    ["--matrix", "m.yaml", REF], ["--pushed", REF], ["--accelerator", "cuda", REF],
    ["--expect-gpu-archs", "sm_9", REF], ["--requirements", "file", "--expect", "cpu"],
    ["--copy-timeout", "0", REF], ["--copy-timeout", "nan", REF], ["-", REF],
    ["--jso", REF],
])
def test_anything_else_is_left_to_click(args: list[str], files: Path) -> None:
    assert validate_args.parse(args) is None


@pytest.fixture(scope="module")
def files_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FILES, for every example of the hypothesis test below (which checks they stay)."""
    where = tmp_path_factory.mktemp("files")
    make_files(where, FILES)
    return where


@settings(max_examples=1500, deadline=None)
@given(args=st.lists(st.sampled_from(WORDS), max_size=7))
def test_the_fast_reading_declines_or_agrees_with_click(args: list[str],
                                                        files_once: Path) -> None:
    declines_or_agrees(validate_args.parse, by_click, args, FILES, files_once)


def test_a_warm_fast_validate_loads_neither_click_nor_rich(tmp_path: Path) -> None:
    """A warm run of the common `validate` line imports neither click nor rich, and
    reports what the click command reports; `validate --help` still reads through click."""
    ref = oci_layout(tmp_path / "image",
                     [tar_bytes([member("usr/lib/libfoo.so.1", b"\x7fELF not really")])])
    line = ["validate", ref, "--cache-dir", str(tmp_path / "cache"), "--json"]
    cold = run_main(*line)[2]
    code, modules, warm = run_main(*line)
    assert code == "0", warm.stderr
    assert not modules & {"click", "rich"}
    # The same report as the click command's (its line with --debug, which only click reads).
    _, clicked, by_click = run_main(*line, "--debug")
    assert "click" in clicked
    assert warm.stdout == by_click.stdout  # warm both
    assert cold.stdout == warm.stdout.replace('"cached_layers": 1', '"cached_layers": 0')
    assert "click" in run_main("validate", "--help")[1]


def test_a_matrix_named_in_the_environment_turns_no_ref_away(
        files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CI job may export AIPCC_BUILD_MATRIX: the click command still validates the REFs
    given, as the fast reading does (without REFs, the matrix's run is click's)."""
    made: list[dict[str, Any]] = []

    def record(**arguments: Any) -> int:
        made.append(arguments)
        return 0

    monkeypatch.setattr(validate_command, "run_references", record)
    monkeypatch.setenv("AIPCC_BUILD_MATRIX", "m.yaml")
    fast = validate_args.parse([REF, "--json"])
    cli.main(args=["validate", REF, "--json"], prog_name="aipcc-build", standalone_mode=False)
    assert fast is not None and made == [fast[0]]
    assert validate_args.parse(["--json"]) is None
