"""Unit tests for what real OS images hold: dpkg databases, device nodes, CUDA 13 and CuPy
wheels, variants from labels, unlabelled mixes, and the component table's say."""

from __future__ import annotations

import tarfile
from pathlib import Path

from aipcc_build.validate.distributions import wheel_evidence
from aipcc_build.validate.packages import dpkg_packages, package_evidence
from aipcc_build.validate.results import OK, VIOLATION, WARNING, Expectation
from aipcc_build.validate.verdict import judge
from tests.support.layers import member, tar_bytes

from .test_validate_units import image, scan

# As dpkg writes them: NVIDIA's Ubuntu/Debian CUDA packages, Debian's own (non-free), a
# removed package and an ordinary one.
STATUS = """\
Package: cuda-cudart-12-8
Status: install ok installed
Priority: optional
Section: devel
Installed-Size: 756
Maintainer: cudatools <cudatools@nvidia.com>
Architecture: amd64
Version: 12.8.90-1
Depends: cuda-toolkit-config-common, cuda-toolkit-12-config-common
Description: CUDA Runtime native Libraries
 CUDA Runtime native Libraries

Package: libnccl2
Status: install ok installed
Architecture: amd64
Source: nccl
Version: 2.26.5-1+cuda12.8
Description: NVIDIA Collective Communication Library (NCCL) Runtime

Package: libcudnn9-cuda-12
Status: install ok installed
Architecture: amd64
Source: cudnn9
Version: 9.8.0.87-1

Package: libcudart11.0
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Source: nvidia-cuda-toolkit
Version: 11.8.89~11.8.0-5~deb12u1
Description: NVIDIA CUDA Runtime Library

Package: libcublas11
Status: install ok installed
Architecture: amd64
Source: nvidia-cuda-toolkit (11.8.0-5~deb12u1)
Version: 11.11.3.6~11.8.0-5~deb12u1

Package: cuda-nvtx-12-9
Status: deinstall ok config-files
Architecture: amd64
Version: 12.9.79-1

Package: bash
Essential: yes
Status: install ok installed
Architecture: amd64
Version: 5.2.15-2+b7
"""


def evidence_of(status: str, path: str = "/var/lib/dpkg/status") -> dict[str, tuple]:
    found = {}
    for name, version, source in dpkg_packages(status, path != "/var/lib/dpkg/status"):
        evidence = package_evidence("dpkg", path, name, version, source)
        if evidence:
            found[evidence.component] = (evidence.version, evidence.release)
    return found


def test_dpkg_status_nvidia_and_debian_naming() -> None:
    packages = dpkg_packages(STATUS)
    assert [p[0] for p in packages] == ["cuda-cudart-12-8", "libnccl2", "libcudnn9-cuda-12",
                                        "libcudart11.0", "libcublas11", "bash"]
    assert packages[3] == ("libcudart11.0", "11.8.89~11.8.0-5~deb12u1", "nvidia-cuda-toolkit")
    assert evidence_of(STATUS) == {
        "cuda-cudart-12-8": ("12.8.90-1", "12.8"),
        "nccl": ("2.26.5-1+cuda12.8", "12.8"),
        "libcudnn9-cuda-12": ("9.8.0.87-1", "12"),
        "libcudart11.0": ("11.8.89~11.8.0-5~deb12u1", "11.8"),
        "libcublas11": ("11.11.3.6~11.8.0-5~deb12u1", "11.8"),
    }
    # Debian's packages are known by name too, when a status.d file has no Source.
    for name, version in (("nvidia-cuda-toolkit", "11.8.0-5~deb12u1"),
                          ("libcufft10", "11.8.0.?~11.8.0-5~deb12u1"),
                          ("cuda-libraries-12-8", "12.8.1-1"), ("libcublas-12-8", "12.8.4.1-1"),
                          ("cuda-compat-12-8", "570.124.06-1")):
        found = package_evidence("dpkg", "/s", name, version)
        assert found is not None and found.release in ("11.8", "12.8"), name
    assert package_evidence("dpkg", "/s", "libcurl4", "7.88.1-10+deb12u8") is None


def test_distroless_status_d_files_and_layer_scan(tmp_path: Path) -> None:
    # distroless: one file per package, sometimes without Status; md5sums files beside them.
    result = scan(tmp_path, tar_bytes([
        member("var/lib/dpkg/status.d/libcudart11.0",
               b"Package: libcudart11.0\nVersion: 11.8.89~11.8.0-5~deb12u1\n"
               b"Architecture: amd64\nSource: nvidia-cuda-toolkit\n"),
        member("var/lib/dpkg/status.d/libcudart11.0.md5sums", b"abc  usr/lib/x\n"),
        member("var/lib/dpkg/status.d/cuda-cudart-12-8",
               b"Package: cuda-cudart-12-8\r\nStatus: install ok installed\r\n"
               b"Version: 12.8.90-1\r\n"),
        member("var/lib/dpkg/status", STATUS.encode()),
    ]))
    found = {(e.path, e.component, e.release) for e in result.evidence}
    assert ("/var/lib/dpkg/status.d/libcudart11.0", "libcudart11.0", "11.8") in found
    assert ("/var/lib/dpkg/status.d/cuda-cudart-12-8", "cuda-cudart-12-8", "12.8") in found
    assert ("/var/lib/dpkg/status", "libcublas11", "11.8") in found
    verdict = judge(ref="r", image=image(), scans=[result], expect=Expectation("cuda", "12.8.1"))
    bad = {f.component for f in verdict.findings if f.status == VIOLATION}
    assert bad == {"libcudart11.0", "libcublas11"}


def test_device_nodes_and_names_climbing_above_the_root_are_warnings(tmp_path: Path) -> None:
    hygiene = scan(tmp_path, tar_bytes([
        member("dev/console", kind=tarfile.CHRTYPE), member("dev/null", kind=tarfile.CHRTYPE),
        member("dev/loop0", kind=tarfile.BLKTYPE),
        member("usr/bin/su", b"elf")]), "hygiene")
    verdict = judge(ref="r", image=image(labels={"ai.aipcc.accelerator": "cpu"}), scans=[hygiene])
    assert verdict.verdict == "ok"
    assert {(f.path, f.status) for f in verdict.findings} == {
        ("/dev/console", WARNING), ("/dev/null", WARNING), ("/dev/loop0", WARNING)}
    hostile = scan(tmp_path, tar_bytes([member("../../etc/x", b"x"),
                                        member("dev/null", kind=tarfile.CHRTYPE)]), "hostile")
    failed = judge(ref="r", image=image(), scans=[hostile], expect=Expectation("cpu"))
    # The engine unpacks chrooted: the name lands at /etc/x, and the layer is unpacked.
    assert [(f.component, f.status, f.path, f.reason) for f in failed.findings] == [
        ("path-traversal", WARNING, "../../etc/x", "path-traversal: tar member name "
         "'../../etc/x' climbs above the root: the engine puts it at /etc/x"),
        ("device-file", WARNING, "/dev/null", "device-file: device node in a layer")]


def moded(name: str, mode: int, kind: bytes = tarfile.REGTYPE,
          data: bytes = b"") -> tuple[tarfile.TarInfo, bytes]:
    info, data = member(name, data, kind=kind)
    info.mode = mode
    return info, data


def test_setuid_and_odd_permissions_are_warnings_the_base_layers_setuid_listed(
        tmp_path: Path) -> None:
    base = scan(tmp_path, tar_bytes([
        moded("usr/bin/su", 0o4755, data=b"elf"), moded("usr/bin/passwd", 0o4755),
        moded("var/mail", 0o2775, tarfile.DIRTYPE),  # set-group-ID directory: inheritance
        moded("tmp", 0o1777, tarfile.DIRTYPE), moded("tmp/scratch", 0o666),
        moded("usr/bin/ls", 0o755)]), "base")
    upper = scan(tmp_path, tar_bytes([
        moded("opt/app/helper", 0o4755), moded("usr/bin/wall", 0o2755),
        moded("etc/app.conf", 0o666), moded("srv/drop", 0o777, tarfile.DIRTYPE),
        moded("srv/null", 0o666, tarfile.CHRTYPE), moded("dev/null", 0o666, tarfile.CHRTYPE),
        moded("usr/share/doc", 0o755, tarfile.DIRTYPE)]), "upper")
    verdict = judge(ref="r", image=image(labels={"ai.aipcc.accelerator": "cpu"}),
                    scans=[base, upper])
    assert verdict.verdict == "ok"
    layer = {base.digest: "base", upper.digest: "upper"}
    found = {(f.path, f.status, f.component, layer[f.layer_digest]) for f in verdict.findings
             if f.layer_digest}
    assert found == {
        ("/usr/bin/su", OK, "setuid", "base"), ("/usr/bin/passwd", OK, "setuid", "base"),
        ("/opt/app/helper", WARNING, "setuid", "upper"),
        ("/usr/bin/wall", WARNING, "setuid", "upper"),
        ("/etc/app.conf", WARNING, "world-writable", "upper"),
        ("/srv/drop", WARNING, "world-writable", "upper"),
        ("/srv/null", WARNING, "device-file", "upper"),
        ("/dev/null", WARNING, "device-file", "upper")}
    reasons = {f.path: f.reason for f in verdict.findings}
    assert "set-user-ID file (mode 4755)" in reasons["/opt/app/helper"]
    assert "set-group-ID file (mode 2755)" in reasons["/usr/bin/wall"]
    assert "from the base layer" in reasons["/usr/bin/su"]
    assert "without the sticky bit" in reasons["/srv/drop"]
    assert "outside /dev" in reasons["/srv/null"]
    assert "outside /dev" not in reasons["/dev/null"]


def test_cuda_13_and_cupy_wheels(tmp_path: Path) -> None:
    site = "opt/venv/lib/python3.11/site-packages"
    assert wheel_evidence("/x", "cupy_cuda12x", "13.6.0").release == "12"  # type: ignore[union-attr]
    assert wheel_evidence("/x", "cupy-cuda117", "10.6.0").release == "11.7"  # type: ignore[union-attr]
    layer = scan(tmp_path, tar_bytes([
        member(f"{site}/nvidia_cuda_runtime-13.0.88.dist-info/METADATA", b"x"),
        member(f"{site}/nvidia/cu13/lib/libcudart.so.13", b"x"),
        member(f"{site}/cupy_cuda12x-13.6.0.dist-info/METADATA", b"x"),
    ]))
    found = {(e.component, e.version, e.release) for e in layer.evidence}
    assert found == {("cuda-runtime", "13.0.88", None), ("nvidia-cu13", "13", "13"),
                     ("cupy-cuda12x", "13.6.0", "12")}

    def bad(release: str) -> set[str]:
        verdict = judge(ref="r", image=image(), scans=[layer], expect=Expectation("cuda", release))
        return {f.component or "" for f in verdict.findings if f.status == VIOLATION}

    assert bad("12.8") == {"cuda-runtime", "nvidia-cu13"}
    assert bad("13.0") == {"cupy-cuda12x"}


def test_variant_from_labels_and_versioned_variants(tmp_path: Path) -> None:
    layer = scan(tmp_path, tar_bytes([member("usr/bin/x", b"x")]))
    labels = {"ai.aipcc.accelerator": "cuda", "ai.aipcc.accelerator.version": "12.8.1",
              "ai.aipcc.variant": "cuda-deb12"}

    def variant_findings(env: dict[str, str], labels: dict[str, str],
                         expect: Expectation | None = None) -> list[str]:
        verdict = judge(ref="r", image=image(env, labels), scans=[layer], expect=expect)
        return [f.reason for f in verdict.findings
                if f.component == "FROMAGER_VARIANT" and f.status == VIOLATION]

    assert variant_findings({"FROMAGER_VARIANT": "cuda-deb12"}, labels) == []
    [wrong] = variant_findings({"FROMAGER_VARIANT": "cuda-ubi9"}, labels)
    assert "'cuda-ubi9'" in wrong and "'cuda-deb12'" in wrong
    [versioned] = variant_findings({"FROMAGER_VARIANT": "cuda-12.8-deb12"}, labels)
    assert "names a toolkit version" in versioned and "'cuda-deb12'" in versioned
    # Without labels or an expectation a versioned variant still fails.
    [bare] = variant_findings({"FROMAGER_VARIANT": "cuda12.8-ubi9"}, {})
    assert "names a toolkit version" in bare
    assert variant_findings({"FROMAGER_VARIANT": "cpu-ubi9"}, {}) == []
    assert variant_findings({"FROMAGER_VARIANT": "rocm6.4-ubi9"},
                            {}, Expectation("rocm", "6.4", variant="rocm6.4-ubi9")) != []


def test_unlabelled_mix_names_both_releases_and_expects_neither(tmp_path: Path) -> None:
    site = "opt/venv/lib/python3.11/site-packages"
    layer = scan(tmp_path, tar_bytes([
        member(f"{site}/nvidia_cuda_runtime_cu12-12.9.79.dist-info/METADATA", b"x"),
        member(f"{site}/nvidia_nvtx_cu12-12.8.90.dist-info/METADATA", b"x"),
        member(f"{site}/nvidia_cuda_cupti_cu12-12.8.90.dist-info/METADATA", b"x"),
        member(f"{site}/cupy_cuda12x-13.6.0.dist-info/METADATA", b"x"),
    ]))
    verdict = judge(ref="r", image=image(), scans=[layer])
    assert verdict.verdict == "failed"
    assert verdict.expected == Expectation("cuda", None, source="inferred")
    [mix] = [f for f in verdict.findings if f.status == VIOLATION]
    assert mix.evidence == "mixed" and mix.version == "12.8, 12.9"
    assert mix.reason.startswith("MIXED cuda releases 12.8 and 12.9: ")
    assert "cuda 12.8 (nvtx-cu12 12.8.90" in mix.reason and "1 more" in mix.reason
    assert "cuda 12.9 (cuda-runtime-cu12 12.9.79" in mix.reason
    assert not any("expected" in f.reason for f in verdict.findings)
    # A single release (cupy's "any 12.x" fits it) is no mix; nor is a labelled image.
    single = scan(tmp_path, tar_bytes([
        member(f"{site}/nvidia_nvtx_cu12-12.8.90.dist-info/METADATA", b"x"),
        member(f"{site}/cupy_cuda12x-13.6.0.dist-info/METADATA", b"x")]), "single")
    alone = judge(ref="r", image=image(), scans=[single])
    assert alone.verdict == "ok" and alone.expected == Expectation("cuda", "12.8",
                                                                    source="inferred")
    labelled = judge(ref="r", image=image(labels={"ai.aipcc.accelerator": "cuda",
                                        "ai.aipcc.accelerator.version": "12.9.1"}), scans=[layer])
    assert {f.component for f in labelled.findings if f.status == VIOLATION} == {
        "nvtx-cu12", "cuda-cupti-cu12"}


def test_component_table_decides_unplaced_versions(tmp_path: Path) -> None:
    site = "opt/venv/lib/python3.11/site-packages"
    layer = scan(tmp_path, tar_bytes([
        member(f"{site}/nvidia_curand_cu12-10.3.99.1.dist-info/METADATA", b"x"),
        member(f"{site}/nvidia_cuda_runtime-13.6.2.dist-info/METADATA", b"x"),
    ]))

    def by_component(expect: Expectation | None) -> dict[str, tuple[str, str]]:
        verdict = judge(ref="r", image=image(), scans=[layer], expect=expect)
        return {f.component or "": (f.status, f.reason) for f in verdict.findings}

    # A version no release pins is a warning that says why, never a violation of its own.
    known = by_component(Expectation("cuda", "12.8.1"))
    assert known["curand-cu12"][0] == WARNING
    assert "10.3.9.90" in known["curand-cu12"][1]  # what the table lists for CUDA 12.8
    unknown = by_component(Expectation("cuda", "13.6"))
    assert unknown["cuda-runtime"][0] == WARNING
    assert "does not know CUDA 13.6" in unknown["cuda-runtime"][1]
    assert unknown["curand-cu12"][0] == VIOLATION  # a -cu12 wheel in a 13.x image
    nothing = by_component(Expectation("cuda"))
    assert {s for s, _ in nothing.values()} == {WARNING}
    assert OK not in {s for s, _ in known.values()}
