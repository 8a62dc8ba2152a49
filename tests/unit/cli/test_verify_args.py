"""`verify` read without click (issue 40's speed): for every command line, the fast reading
either declines it or makes exactly the request the click command makes; and a run on the
fast path imports neither click nor rich."""

from __future__ import annotations

import http.server
from pathlib import Path
from typing import Any, Optional

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aipcc_build.cli import verify_args
from aipcc_build.cli.options import cli
from tests.support.fast_reading import declines_or_agrees, make_files, run_main
from tests.support.http_server import serving

REF = "registry.example/rel/cuda-12.9-ubi9:3.0-42"
# The files the words name (a name: its text, or None for a directory).
FILES = {"k.pub": "key\n", "a.json": "{}\n", "dir": None}
# Words a command line is made of: the options in every spelling, values, references, and
# what the click command (or the group) reads otherwise or refuses.
WORDS = ["--key", "--key=k.pub", "k.pub", "--key=dir", "dir", "--key=", "missing.pub",
         "--json", "--json=1", "--tls-verify", "--no-tls-verify", "--tls-verify=false",
         "--tls-verify=TRUE", "--tls-verify=yes", "--tls-verify=maybe", "--tls-verify=",
         "--no-tls-verify=false", "false", "yes", "--authfile", "--authfile=a.json",
         "a.json", "--", "-", "-h", "--help", "--debug", "--matrix", "--format", "json",
         "--ke", "--KEY", "-k", REF, "other.example/a/b@sha256:" + "0" * 64, "", "x y",
         "--verify", "docker://registry.example/a/b:1"]


def by_click(args: list[str], monkeypatch: pytest.MonkeyPatch) -> Optional[tuple[Any, bool]]:
    """(the request, --json) the click command makes of `verify ARGS`; None when it
    refuses the line."""
    made: list[tuple[Any, bool]] = []

    def record(request: Any, as_json: bool) -> int:
        made.append((request, as_json))
        return 0

    monkeypatch.setattr(verify_args, "run", record)
    try:
        cli.main(args=["verify", *args], prog_name="aipcc-build", standalone_mode=False)
    except click.ClickException:
        return None
    except click.exceptions.Exit:  # --help
        return None
    assert len(made) == 1
    return made[0]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_files(tmp_path, FILES)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("args", [
    [REF],
    ["--key", "k.pub", REF],
    [REF, "--key=k.pub", "--json"],
    ["--no-tls-verify", "--key", "missing.pub", REF, "other.example/a/b:1"],
    ["--tls-verify=false", REF, "--authfile", "a.json", "--key", "k.pub"],
    ["--tls-verify=TRUE", "--authfile=a.json", REF],
    ["--tls-verify", REF, "--json"],
    ["docker://" + REF, "--key=k.pub"],
])
def test_the_common_lines_are_read_as_click_reads_them(
        args: list[str], files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = verify_args.parse(args)
    assert fast is not None
    assert fast == by_click(args, monkeypatch)


@pytest.mark.parametrize("args", [
    [], ["--help"], ["-h", REF], ["--debug", REF], ["--", REF], ["--key", "dir", REF],
    ["--key"], ["--key", "--json", REF], ["--tls-verify", "false", REF],
    ["--tls-verify", "yes", REF], [REF, "--tls-verify", "0"],
    ["--tls-verify=maybe", REF], ["--json=1", REF], ["--format", "json", REF],
    ["--key", "k.pub", "--key", "k.pub", REF], ["--no-tls-verify", "--tls-verify", REF],
    ["--matrix", "m.yaml", REF], ["-", REF], ["--ke", "k.pub", REF],
])
def test_anything_else_is_left_to_click(args: list[str], files: Path) -> None:
    assert verify_args.parse(args) is None


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
    declines_or_agrees(verify_args.parse, by_click, args, FILES, files_once)


class BusyOnceThenNoImage(http.server.BaseHTTPRequestHandler):
    """A registry over plain HTTP that answers its first manifest request 503 (retried
    after tools.retry's first wait) and every request after it 404: no such image."""

    busy = True

    def do_GET(self) -> None:
        status = 404
        if self.path.startswith("/v2/rel/") and BusyOnceThenNoImage.busy:
            BusyOnceThenNoImage.busy, status = False, 503
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


def test_a_fast_verify_loads_neither_click_nor_rich(tmp_path: Path) -> None:
    """A run of the common `verify` line (here against a registry busy once, then without
    the image: a retry, then exit 1) imports neither click nor rich; `verify --help` still
    reads through click. (A port nothing listens on made the same run wait out every retry:
    15 s.)"""
    from aipcc_build.publish.signing import write_private_key

    write_private_key(str(tmp_path / "release.key"), b"p", n=2)
    BusyOnceThenNoImage.busy = True
    with serving(BusyOnceThenNoImage) as origin:
        code, modules, done = run_main("verify", "--no-tls-verify", "--key",
                                       str(tmp_path / "release.pub"),
                                       origin.split("//", 1)[1] + "/rel/x:1", "--json")
    assert code == "1", done.stderr
    assert not modules & {"click", "rich"}
    assert not BusyOnceThenNoImage.busy  # the busy answer was retried
    assert '"ok": false' in done.stdout and "no such image" in done.stdout
    assert "click" in run_main("verify", "--help")[1]


def test_the_collector_waits_for_the_check(files: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """The cyclic collector is off while a check runs; back on after it in a process that
    goes on (tests, a caller of `main(argv)`), and after a line left to click; off for
    good where the check ends the process (the CLI's own start)."""
    import gc

    during: list[bool] = []

    def record(request: Any, as_json: bool) -> int:
        during.append(gc.isenabled())
        return 0

    monkeypatch.setattr(verify_args, "run", record)
    assert gc.isenabled()
    try:
        assert verify_args.fast_main([REF]) == 0
        assert during == [False] and gc.isenabled()
        assert verify_args.fast_main(["--help"], ends_process=True) is None
        assert gc.isenabled()
        assert verify_args.fast_main([REF], ends_process=True) == 0
        assert during == [False, False] and not gc.isenabled()
    finally:
        gc.enable()
