"""The release of a CUDA runtime read statically from its ELF file (issue 21): small
shared objects built by the test for x86_64 and aarch64, and one compiled by gcc."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from aipcc_build.validate.elf import runtime_release
from tests.support.elf import EM_AARCH64, EM_X86_64, runtime_elf


@pytest.mark.parametrize("machine", [EM_X86_64, EM_AARCH64], ids=["x86_64", "aarch64"])
@pytest.mark.parametrize("via_call", [False, True], ids=["stored-directly", "in-a-callee"])
def test_the_version_cudaRuntimeGetVersion_stores(machine: int, via_call: bool) -> None:
    assert runtime_release(runtime_elf(machine, 12060, via_call)) == "12.6"
    assert runtime_release(runtime_elf(machine, 13000, via_call)) == "13.0"


def test_no_answer_rather_than_a_guess() -> None:
    good = runtime_elf(EM_X86_64, 12080)
    assert runtime_release(b"") is None
    assert runtime_release(b"MZ" + good[2:]) is None  # not ELF
    assert runtime_release(good[:100]) is None  # truncated: sections beyond the end
    assert runtime_release(runtime_elf(EM_X86_64, 12080, symbol=b"cudaDriverGetVersion")) is None
    other = bytearray(good)
    struct.pack_into("<H", other, 18, 40)  # ARM 32-bit: not a machine this reader decodes
    assert runtime_release(bytes(other)) is None
    assert runtime_release(runtime_elf(EM_AARCH64, 123)) is None  # no plausible version
    hostile = bytearray(good)
    struct.pack_into("<Q", hostile, 40, 1 << 60)  # section headers far beyond the file
    assert runtime_release(bytes(hostile)) is None


def test_a_function_calling_itself_ends() -> None:
    elf = bytearray(runtime_elf(EM_X86_64, 5, via_call=False))
    # The code becomes: call itself; ret. The reader follows each call once.
    elf[0x200:0x206] = b"\xe8\xfb\xff\xff\xff\xc3"
    assert runtime_release(bytes(elf)) is None


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on this machine")
def test_a_runtime_compiled_by_gcc(tmp_path: Path) -> None:
    source = tmp_path / "cudart.c"
    source.write_text(
        "__attribute__((noinline)) static int version_of(int *v)\n"
        "{ if (!v) return 1; *v = 12080; return 0; }\n"
        "int cudaRuntimeGetVersion(int *v) { return version_of(v); }\n")
    library = tmp_path / "libcudart.so.12"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(library), str(source)],
                   check=True, timeout=60)
    assert runtime_release(library.read_bytes()) == "12.8"
