"""`verify`'s click-free reading against hostile words (issue 40's break list): a
reference with a leading `-` or a line break, `--key=` and `--authfile=` empty, an option
value that is an option (`--key=--json`), a value given twice, `--`, argv bytes that are
no UTF-8 (as Python decodes them: lone surrogates). For every line made of them the fast
reading declines it or makes exactly the request the click command makes."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from aipcc_build.cli import verify_args
from tests.unit.cli.test_verify_args import REF, by_click

NOT_UTF8 = os.fsdecode(b"\xff\xfe")  # what sys.argv holds for those bytes
WORDS = ["--key", "--key=", "--authfile=", "--key=-x", "--key=--json", "-x/a:1",
         REF + "\nrel/b:1", f"registry.example/a/b:{NOT_UTF8}", f"--key={NOT_UTF8}.pub",
         f"{NOT_UTF8}.pub", "k.pub", "--json", "--tls-verify", REF, "--authfile", "-", "--",
         "--authfile=dir", "--tls-verify=No"]


@pytest.mark.parametrize("length", [1, 2, 3])
def test_hostile_lines_are_declined_or_read_as_click_reads_them(
        length: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "k.pub").write_text("key\n")
    (tmp_path / "dir").mkdir()
    monkeypatch.chdir(tmp_path)
    read = 0
    for args in itertools.product(WORDS, repeat=length):
        fast = verify_args.parse(list(args))
        if fast is not None:
            read += 1
            assert fast == by_click(list(args), monkeypatch), args
    assert read  # some lines are the fast path's, or the comparison compared nothing
