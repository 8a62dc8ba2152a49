"""The release of a CUDA runtime read statically from its ELF file (issue 21): small
shared objects built by the test for x86_64 and aarch64, and one compiled by gcc."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

from aipcc_build.validate.elf import (
    DYNAMIC_READ_LIMIT,
    ElfLimit,
    dynamic_entries,
    runtime_release,
)
from tests.support.elf import EM_AARCH64, EM_X86_64, dynamic_elf, dynsym_bomb, runtime_elf


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


def test_many_dynamic_symbol_tables_are_refused_at_once() -> None:
    """Issue 29.2: a 77 kB file of 1,000 SHT_DYNSYM headers over its whole length made the
    symbol search read the file once per header (quadratic; 66 s for such a file)."""
    bomb = dynsym_bomb(1000)
    assert len(bomb) < 80_000
    started = time.monotonic()
    with pytest.raises(ElfLimit) as refused:
        runtime_release(bomb)
    assert time.monotonic() - started < 5  # loose: linear is milliseconds
    assert str(refused.value) == ("1000 dynamic symbol tables (SHT_DYNSYM), where an ELF "
                                  "file has one")
    assert runtime_release(dynsym_bomb(1)) is None  # one table: searched once, no symbol


@pytest.mark.integration  # links a shared object with the real gcc
def test_the_dynamic_section_is_read_from_the_start_only_as_far_as_it_reaches(
        tmp_path: Path) -> None:
    """NEEDED and RUNPATH of a shared object gcc links, read through a reader that counts
    what it hands out."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc on this machine")
    (tmp_path / "dep.c").write_text("int dep(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libamdhip64.so.7"),
                    "-Wl,-soname,libamdhip64.so.7", str(tmp_path / "dep.c")], check=True)
    # 20 MB of constants before the dynamic section (past the prefix held), 1 MB of data
    # after it (never read).
    (tmp_path / "user.c").write_text("int dep(void); int use(void) { return dep(); }\n"
                                     "const char constants[20 << 20] = {1};\n"
                                     "char padding[1 << 20] = {1};\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libuser.so"),
                    str(tmp_path / "user.c"), str(tmp_path / "libamdhip64.so.7"),
                    "-Wl,--enable-new-dtags,-rpath,/opt/rocm/lib:/opt/rocm-7.2.4/lib"],
                   check=True)
    data = (tmp_path / "libuser.so").read_bytes()
    handed = 0

    def read(size: int) -> bytes:
        nonlocal handed
        piece = data[handed:handed + size]
        handed += len(piece)
        return piece

    entries = dynamic_entries(read)
    assert entries is not None
    assert "libamdhip64.so.7" in entries.needed
    assert entries.search_path == ("/opt/rocm/lib", "/opt/rocm-7.2.4/lib")
    assert handed < len(data) - (1 << 20)  # the data after the dynamic section is not read
    handed, passed = 0, 0

    def skip(size: int) -> int:
        nonlocal handed, passed
        size = min(size, len(data) - handed)
        handed += size
        passed += size
        return size

    assert dynamic_entries(read, skip) == entries
    assert passed > 4 << 20  # the constants past the held prefix are passed over, not read
    assert dynamic_entries(io.BytesIO(b"MZ" + bytes(100)).read) is None


def test_a_dynamic_section_past_the_limit_is_refused() -> None:
    header = bytearray(runtime_elf(EM_X86_64, 12080, via_call=False)[:64 + 56])
    struct.pack_into("<IIQQQQQQ", header, 64, 2, 6, DYNAMIC_READ_LIMIT, 0, 0, 64, 64, 8)
    with pytest.raises(ElfLimit, match=f"dynamic section or strings end past byte "
                                       f"{DYNAMIC_READ_LIMIT}$"):
        dynamic_entries(io.BytesIO(bytes(header)).read)


def test_the_soname_is_read_beside_needed() -> None:
    data = dynamic_elf(b"libamdhip64.so.7", (b"libhsa-runtime64.so.1",))
    entries = dynamic_entries(io.BytesIO(data).read)
    assert entries is not None
    assert entries.soname == "libamdhip64.so.7"
    assert entries.needed == ("libhsa-runtime64.so.1",)
