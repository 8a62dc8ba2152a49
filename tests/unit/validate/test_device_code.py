"""Device code read from crafted fatbinaries and offload bundles, hostile ones refused in
one line; coverage of expected GPUs; the scan of a layer and its cache."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
from aipcc_build.toolkit.gpu_archs import (
    BadArch,
    cuda_code_runs_on,
    expected_gpus,
    gfx_code_runs_on,
)
from aipcc_build.validate.cache import LayerCache
from aipcc_build.validate.device_code import (
    BUNDLE_HEADER_LIMIT,
    MAX_BUNDLE_ENTRIES,
    read_device_code,
)
from aipcc_build.validate.gpu_code import coverage_findings, final_device_code, summary
from aipcc_build.validate.layers import scan_layer
from aipcc_build.validate.results import DeviceCode, LayerScan
from aipcc_build.validate.scan_stack import stack_of
from tests.support.device_code import bundle, compressed, elf_with, fatbin, fatbin_entry
from tests.support.elf import dynamic_elf
from tests.support.layers import member, tar_bytes

CHUNKS = (1 << 20, 4096, 7, 1000)


def read(data: bytes):
    results = {read_device_code(data, chunk) for chunk in CHUNKS}
    assert len(results) == 1, "the answer depends on how the bytes were cut"
    return results.pop()


def test_fatbinaries_sass_ptx_and_arch_specific() -> None:
    first = fatbin([fatbin_entry(2, 80), fatbin_entry(2, 90, 0x100000, header=72),
                    fatbin_entry(1, 90, payload=b"PTX" * 7, header=80)])
    second = fatbin([fatbin_entry(2, 120, 0x1000000, header=120)])
    found = read(elf_with((4096, first), (4096 + len(first) + 8 - len(first) % 8, second)))
    assert found.sass == ("sm_80", "sm_90a", "sm_120")
    assert found.ptx == ("compute_90",)
    assert found.detail == "2 fatbinaries: 4 entries" and not found.refusals


def test_family_targets_and_the_narrower_claim_when_both_flags_are_set() -> None:
    """The flags of vLLM's sm_100f entries (cuobjdump: arch = sm_100f) and ONNX Runtime's
    sm_120a ones; both family and arch-specific: the narrower, arch-specific."""
    found = read(elf_with((4096, fatbin([
        fatbin_entry(2, 100, 0x1208011, header=112), fatbin_entry(2, 120, 0x1108011, header=112),
        fatbin_entry(2, 103, 0x1308011, header=112), fatbin_entry(1, 110, 0x200000)]))))
    assert found.sass == ("sm_100f", "sm_103a", "sm_120a") and found.ptx == ("compute_110f",)


def test_a_fatbin_magic_off_its_alignment_or_in_a_payload_is_not_one() -> None:
    inner = fatbin([fatbin_entry(2, 35)])
    outer = fatbin([fatbin_entry(2, 80, payload=inner + b"\0" * 8)])
    found = read(elf_with((100 * 8, outer), (8 * 300 + 4, inner)))
    assert found.sass == ("sm_80",) and not found.refusals


def test_bytes_that_look_like_the_magic_everywhere_still_find_each_fatbinary() -> None:
    # The search picks the magic's 0xBA out of every aligned offset; a window where every
    # one holds it is searched for the whole magic instead, and finds the same.
    decoys = b"\xba" * (8 * 6000)
    first = fatbin([fatbin_entry(2, 80)])
    misaligned = fatbin([fatbin_entry(2, 35)])
    second = fatbin([fatbin_entry(1, 90)])
    found = read(elf_with((4096, first), (8192, decoys), (8192 + len(decoys) + 4, misaligned),
                          (8192 + len(decoys) + 256, second), (65536, decoys)))
    assert (found.sass, found.ptx) == (("sm_80",), ("compute_90",))
    assert found.detail == "2 fatbinaries: 2 entries" and not found.refusals


@pytest.mark.parametrize("data, why", [
    (fatbin([fatbin_entry(2, 80)], size=1 << 40), "past the file's end"),
    (fatbin([fatbin_entry(2, 80, claimed=16)]), "claims a 16-byte header"),
    (fatbin([fatbin_entry(2, 80, claimed=1 << 30)]), "claims a 1073741824-byte header"),
    (fatbin([fatbin_entry(2, 80)[:8] + (1 << 62).to_bytes(8, "little")
             + fatbin_entry(2, 80)[16:]]), "ends past the fatbinary's end"),
    (fatbin([fatbin_entry(2, 80)], size=20), "cut short"),
])
def test_hostile_fatbinaries_are_refused_in_one_line(data: bytes, why: str) -> None:
    found = read(elf_with((8 * 64, data)))
    assert len(found.refusals) == 1 and why in found.refusals[0], found.refusals
    assert "\n" not in found.refusals[0] and "byte 512" in found.refusals[0]


def test_offload_bundles_plain_and_compressed() -> None:
    plain = bundle(["host-x86_64-unknown-linux-gnu-", "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
                    "hipv4-amdgcn-amd-amdhsa--gfx942"])
    data = elf_with((4096, plain), (8192, compressed(bundle(
        ["hipv4-amdgcn-amd-amdhsa--gfx1100"]), version=2)), (12288, compressed(bundle(
            ["hipv4-amdgcn-amd-amdhsa--gfx11-generic"]), version=3, method=0)),
        (16384, compressed(bundle(["hipv4-amdgcn-amd-amdhsa--gfx1030"]), version=1)))
    found = read(data)
    assert found.gfx == ("gfx90a:xnack-", "gfx942", "gfx1030", "gfx11-generic", "gfx1100")
    assert found.detail == "4 offload bundles: 5 entries" and not found.refusals


def test_a_bundle_magic_off_a_page_boundary_is_a_string_not_a_bundle() -> None:
    found = read(elf_with((4096 + 24, bundle(["hipv4-amdgcn-amd-amdhsa--gfx942"]))))
    assert not found.any and not found.refusals


@pytest.mark.parametrize("data, why", [
    (bundle(["hipv4-amdgcn-amd-amdhsa--gfx942"], count=1 << 40), "bundle entries, more"),
    (bundle(["hipv4-amdgcn-amd-amdhsa--gfx942"], count=MAX_BUNDLE_ENTRIES),
     "header lies past"),
    (bundle(["hipv4-amdgcn-amd-amdhsa--gfx942"], offset=1 << 62), "ends past the bundle"),
    (bundle(["x" * 5000]), "more than 1024"),
    (compressed(bundle(["hipv4-amdgcn-amd-amdhsa--gfx942"]), version=3, total=1 << 40),
     "outside the file"),
    (compressed(b"not a bundle" * 10), "no bundle magic"),
    (compressed(bundle(["hipv4-amdgcn-amd-amdhsa--gfx942"]))[:20] + b"garbage" * 9,
     "does not decompress"),
    (b"CCOB\x02\x00\x07\x00" + bytes(40), "compression method 7"),
])
def test_hostile_bundles_are_refused_in_one_line(data: bytes, why: str) -> None:
    found = read(elf_with((8192, data)))
    assert len(found.refusals) == 1 and why in found.refusals[0], found.refusals
    assert not found.gfx


def test_a_compression_bomb_is_decompressed_only_as_far_as_its_header() -> None:
    head = bundle(["hipv4-amdgcn-amd-amdhsa--gfx942"], code=b"")
    plain = head + bytes(256 << 20)  # 256 MB of zeros after a real header
    found = read(elf_with((4096, compressed(plain, version=3))))
    assert found.gfx == ("gfx942",)
    assert len(plain) > 200 * BUNDLE_HEADER_LIMIT


def test_cuda_coverage_rules() -> None:
    assert cuda_code_runs_on("sm_80", "sm_86") and cuda_code_runs_on("sm_80", "sm_80")
    assert not cuda_code_runs_on("sm_86", "sm_80") and not cuda_code_runs_on("sm_80", "sm_90")
    assert cuda_code_runs_on("compute_80", "sm_120") and not cuda_code_runs_on(
        "compute_90", "sm_89")
    assert cuda_code_runs_on("sm_90a", "sm_90") and not cuda_code_runs_on("sm_90a", "sm_100")
    assert not cuda_code_runs_on("compute_90a", "sm_100")
    assert cuda_code_runs_on("sm_100f", "sm_103") and not cuda_code_runs_on(
        "sm_100f", "sm_120")


def test_rocm_coverage_rules() -> None:
    assert gfx_code_runs_on("gfx90a", "gfx90a:xnack+") and gfx_code_runs_on(
        "gfx90a", "gfx90a:xnack-")
    assert gfx_code_runs_on("gfx90a:xnack-", "gfx90a:xnack-")
    assert not gfx_code_runs_on("gfx90a:xnack-", "gfx90a:xnack+")
    assert not gfx_code_runs_on("gfx90a", "gfx942") and not gfx_code_runs_on(
        "gfx1100", "gfx1101")
    assert gfx_code_runs_on("gfx11-generic", "gfx1101") and not gfx_code_runs_on(
        "gfx11-generic", "gfx1030")


def test_expected_archs_spelled_as_the_matrix_allows_and_refused_otherwise() -> None:
    assert expected_gpus(["9.0", "80", "sm_86", "gfx942", "gfx90a:xnack-", "sm_90"]) == (
        "sm_90", "sm_80", "sm_86", "gfx942", "gfx90a:xnack-")
    with pytest.raises(BadArch, match="'volta'"):
        expected_gpus(["volta"])


def test_coverage_names_each_library_without_code_for_an_arch() -> None:
    cuda13 = DeviceCode("/lib/libnew.so", sass=("sm_75", "sm_80"), ptx=("compute_90",))
    old = DeviceCode("/lib/libold.so", sass=("sm_70",))
    rocm = DeviceCode("/lib/libhip.so", gfx=("gfx90a", "gfx942"))
    files = [(cuda13, "sha256:a"), (old, "sha256:b"), (rocm, "sha256:c")]
    found = coverage_findings(files, ("sm_70", "sm_86", "sm_120", "gfx1100"))
    assert sorted((f.path, f.component) for f in found) == [
        ("/lib/libhip.so", "gfx1100"), ("/lib/libnew.so", "sm_70"),
        ("/lib/libold.so", "sm_120"), ("/lib/libold.so", "sm_86")]
    assert all(f.status == "violation" for f in found)
    assert "SASS sm_75, sm_80; PTX compute_90" in found[1].reason or any(
        "SASS sm_75, sm_80; PTX compute_90" in f.reason for f in found)
    assert summary([c for c, _ in files]) == {
        "cuda": {"sass": ["sm_70", "sm_75", "sm_80"], "ptx": ["compute_90"]},
        "rocm": {"gfx": ["gfx90a", "gfx942"]}}
    assert coverage_findings([(DeviceCode("/lib/none.so"), "sha256:d")], ("sm_80",)) == []


def test_a_later_layer_removes_or_replaces_device_code() -> None:
    lower = LayerScan("sha256:1", 1, device_code=(
        DeviceCode("/opt/a/liba.so", sass=("sm_80",)), DeviceCode("/opt/b/libb.so",
                                                                  sass=("sm_80",)),
        DeviceCode("/opt/c/libc.so", sass=("sm_80",))))
    upper = LayerScan("sha256:2", 1, whiteouts=("/opt/a/liba.so",), opaque_dirs=("/opt/b",),
                      device_code=(DeviceCode("/opt/c/libc.so", sass=("sm_90",)),))
    final = final_device_code([lower, upper], stack_of([lower, upper]))
    assert [(c.path, c.sass, d) for c, d in final] == [("/opt/c/libc.so", ("sm_90",),
                                                        "sha256:2")]


def test_a_layer_scan_reads_device_code_of_wheel_libraries_and_caches_it(
        tmp_path: Path) -> None:
    cuda = elf_with((4096, fatbin([fatbin_entry(2, 80), fatbin_entry(1, 90)])))
    hip = elf_with((8192, bundle(["hipv4-amdgcn-amd-amdhsa--gfx942"])))
    hostile = elf_with((4096, fatbin([fatbin_entry(2, 80)], size=1 << 40)))
    site = "usr/lib/python3/site-packages"
    data = tar_bytes([
        member(f"{site}/nvidia/cublas/lib/libcublasLt.so.12", cuda),
        member(f"{site}/mypkg/_kernels.so", hip),
        member(f"{site}/mypkg/libbad.so", hostile),
        member(f"{site}/mypkg/script.so", b"/* GNU ld script */" + bytes(100)),
        member(f"{site}/mypkg-1.0.dist-info/RECORD", b"mypkg/_kernels.so,,\n"),
    ])
    blob = tmp_path / "layer"
    blob.write_bytes(data)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    scan = scan_layer(LayerJob(digest, "", BlobLocation(str(blob))))
    assert [(c.path.rsplit("/", 1)[1], c.sass, c.ptx, c.gfx, c.distribution)
            for c in scan.device_code] == [
        ("_kernels.so", (), (), ("gfx942",), "mypkg 1.0"),
        ("libcublasLt.so.12", ("sm_80",), ("compute_90",), (), None)]
    refused = [h for h in scan.hazards if h.kind == "device-code-limit"]
    assert len(refused) == 1 and refused[0].path.endswith("/libbad.so")
    assert not refused[0].severe
    cache = LayerCache(tmp_path / "cache")
    cache.put(scan)
    assert cache.get(digest) == scan


def test_a_layer_scan_does_not_depend_on_how_the_stream_cuts_its_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The walker hands a shared object's reader what its buffer holds, never a chunk
    # copied whole: the ELF magic, the dynamic section and the device code read the same
    # when the stream's pieces cut through them.
    from aipcc_build.imagefs import tar

    linked = dynamic_elf(b"_C.so", (b"libcudart.so.12",), padding=3000)
    linked += bytes(-len(linked) % 8) + fatbin([fatbin_entry(2, 80), fatbin_entry(1, 90)])
    site = "usr/lib/python3/site-packages"
    data = tar_bytes([
        member(f"{site}/mypkg/_C.so", linked),
        member(f"{site}/mypkg/_kernels.so", elf_with(
            (8192, bundle(["hipv4-amdgcn-amd-amdhsa--gfx942"])))),
        member(f"{site}/nvidia/cublas/lib/libcublasLt.so.12",
               elf_with((4096, fatbin([fatbin_entry(2, 90)])))),
        member(f"{site}/mypkg/script.so", b"/* GNU ld script */"),
        member(f"{site}/mypkg/tiny.so", b"\x7fE"),
    ])
    blob = tmp_path / "layer"
    blob.write_bytes(data)
    job = LayerJob("sha256:" + hashlib.sha256(data).hexdigest(), "", BlobLocation(str(blob)))
    whole = scan_layer(job)
    assert [(c.path.rsplit("/", 1)[1], c.sass, c.gfx) for c in whole.device_code] == [
        ("_C.so", ("sm_80",), ()), ("_kernels.so", (), ("gfx942",)),
        ("libcublasLt.so.12", ("sm_90",), ())]
    assert any(e.kind == "linked" and "libcudart.so.12" in e.detail for e in whole.evidence)
    for size in (1, 3, 7, 512, 4099):
        monkeypatch.setattr(tar, "CHUNK", size)
        assert scan_layer(job) == whole, size


def test_more_containers_or_entries_than_the_limits_are_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from aipcc_build.validate import device_code

    one = fatbin([fatbin_entry(2, 80), fatbin_entry(2, 86)])
    data = elf_with(*[(4096 + 512 * i, one) for i in range(5)])
    monkeypatch.setattr(device_code, "MAX_CONTAINERS", 3)
    found = read(data)
    assert found.detail == "3 fatbinaries: 6 entries"
    assert found.refusals == ("more than 3 fatbinaries and bundles: the rest, from byte "
                              "5632, not read",)
    monkeypatch.setattr(device_code, "MAX_CONTAINERS", 100)
    monkeypatch.setattr(device_code, "MAX_ENTRIES", 7)
    found = read(data)
    assert found.detail == "3 fatbinaries: 6 entries" and len(found.refusals) == 2
    assert "more than 7 entries in the file" in found.refusals[0]


def test_a_gpu_the_code_does_not_run_on_names_where_it_was_expected(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    from tests.support.layers import oci_layout

    library = "usr/lib/python3/site-packages/nvidia/cublas/lib/libcublasLt.so.12"
    cuda = elf_with((4096, fatbin([fatbin_entry(2, 80)])))
    ref = oci_layout(tmp_path / "image", [tar_bytes([member(library, cuda)])])
    result = cli("validate", ref, "--expect", "cpu", "--expect-gpu-archs", "sm_70",
                 "--cache-dir", str(tmp_path / "cache"))
    assert result.code == 1
    [line] = [line for line in result.out.splitlines() if "violation" in line]
    assert f"/{library} [layer " in line and line.endswith(
        "none of its GPU code runs on sm_70 (--expect-gpu-archs): it carries SASS sm_80")
    found = coverage_findings([(DeviceCode("/lib/a.so", sass=("sm_80",)), "sha256:a")],
                              ("sm_70",), "gpu_archs of the matrix's cuda 13.0.2 entry")
    assert [f.reason for f in found] == [
        "none of its GPU code runs on sm_70 (gpu_archs of the matrix's cuda 13.0.2 entry): "
        "it carries SASS sm_80"]
