"""Issue 29.2: a shared object built to make the ELF reader slow is refused at once, with
a warning naming the file, and the validation goes on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.elf import dynsym_bomb
from tests.support.layers import member, oci_layout, sha256, tar_bytes

RUNTIME = "opt/venv/lib/python3.11/site-packages/pkg.libs/libcudart-0123abcd.so.12"


def test_a_symbol_table_bomb_is_a_warning_naming_the_file(  # type: ignore[no-untyped-def]
        tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    layer = tar_bytes([member(RUNTIME, dynsym_bomb(1000))])
    ref = oci_layout(tmp_path / "oci", [layer], env={"CUDA_VERSION": "12.8.1"})
    started = time.monotonic()
    result = cli("validate", ref, "--cache-dir", str(tmp_path / "cache"))
    assert time.monotonic() - started < 30  # loose: the quadratic read took minutes
    assert result.code == 0, result.out
    assert "Traceback" not in result.err
    lines = (result.out + result.err).splitlines()
    assert lines[0] == f"{ref} linux/amd64: ok (expected cuda 12.8; found cuda 12.8; 3 evidence)"
    assert (f"  {ref} linux/amd64: warning: elf-limit (layer) at /{RUNTIME} "
            f"[layer {sha256(layer)[:19]}]: elf-limit: 1000 dynamic symbol tables "
            "(SHT_DYNSYM), where an ELF file has one: not read") in lines
