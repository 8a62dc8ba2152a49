"""The validator on real buildah-built images holding real NVIDIA wheels from PyPI."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from aipcc_build.errors import InputError
from aipcc_build.matrix import AllowRule
from aipcc_build.tools.skopeo import Skopeo
from aipcc_build.validate import Expectation, ImageVerdict, validate_image
from aipcc_build.validate.results import ALLOWED, OK, VIOLATION, WARNING
from tests.support.layers import PREFIX, Images, append_layer, export, member, run, tar_bytes

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the session: images share their lower layers, as in real use."""
    return tmp_path_factory.mktemp("validate-cache")


def one(ref: str, cache: Path, **kwargs: object) -> ImageVerdict:
    verdicts = validate_image(ref, cache_dir=cache, **kwargs)  # type: ignore[arg-type]
    assert len(verdicts) == 1
    return verdicts[0]


def violations(verdict: ImageVerdict) -> list:
    return [f for f in verdict.findings if f.status == VIOLATION]


def top_layer(image: str) -> str:
    return run("skopeo", "inspect", "--format", "{{range .Layers}}{{.}}\n{{end}}",
               f"containers-storage:{image}").splitlines()[-1]


def test_clean_cuda_128_passes(cuda128: str, cache: Path) -> None:
    verdict = one(f"containers-storage:{cuda128}", cache)
    assert verdict.verdict == "ok", [f.reason for f in verdict.findings if f.status != OK]
    assert verdict.expected == Expectation("cuda", "12.8.1", source="labels")
    assert verdict.toolkits == {"cuda": ("12.8",)}
    kinds = {f.evidence for f in verdict.findings}
    assert {"dist-info", "cuda-tree", "version-file", "library", "symlink", "env"} <= kinds


def test_12_9_wheel_in_12_8_image_fails_naming_both_and_the_layer(
        mixed_wheel: str, cache: Path) -> None:
    verdict = one(f"containers-storage:{mixed_wheel}", cache)
    assert verdict.verdict == "failed"
    assert verdict.toolkits == {"cuda": ("12.8", "12.9")}
    [bad] = violations(verdict)
    assert bad.path.endswith("nvidia_cuda_runtime_cu12-12.9.79.dist-info")
    assert bad.version == "12.9" and "12.8" in bad.reason and "12.9" in bad.reason
    assert bad.layer_digest == top_layer(mixed_wheel)


def test_torch_cu129_in_12_8_image_fails(torch129: str, cache: Path) -> None:
    verdict = one(f"containers-storage:{torch129}", cache)
    bad = {(f.evidence, f.component, f.version) for f in violations(verdict)}
    assert bad == {("dist-info", "torch", "12.9"), ("torch-version", "torch", "12.9")}


def test_cuda_12_9_tree_in_12_8_image_fails(tree129: str, cache: Path) -> None:
    verdict = one(f"containers-storage:{tree129}", cache)
    bad = {(f.evidence, f.path) for f in violations(verdict)}
    assert bad == {
        ("cuda-tree", "/usr/local/cuda-12.9"),
        ("library", "/usr/local/cuda-12.9/targets/x86_64-linux/lib/libcudart.so.12.9.79"),
    }


def test_rpm_and_dpkg_packages(packages: str, cache: Path) -> None:
    verdict = one(f"containers-storage:{packages}", cache)
    by_component = {f.component: f for f in verdict.findings if f.evidence in ("rpm", "dpkg")}
    assert by_component["cuda-cudart-12-8"].status == OK
    assert by_component["cuda-nvrtc-12-8"].status == OK  # dpkg, installed
    assert "cuda-nvtx-12-9" not in by_component  # dpkg, only config files left
    assert by_component["libcublas-12-9"].status == VIOLATION
    assert by_component["nccl"].status == VIOLATION
    assert by_component["nccl"].component_version == "2.27.3-1+cuda12.9"


def test_allowlist_marks_deliberate_exceptions_and_reports_stale_rules(
        packages: str, cache: Path) -> None:
    nccl = AllowRule(reason="NCCL is built against 12.9 on purpose", component="nccl",
                     versions=("2.27",))
    cublas = AllowRule(reason="cuBLAS 12.9 fix for a GEMM bug", toolkit="cuda",
                       versions=("12.9",), path="/var/lib/rpm/*")
    stale = AllowRule(reason="old cuDNN pin", component="cudnn")
    verdict = one(f"containers-storage:{packages}", cache, allow=[nccl, cublas, stale])
    assert verdict.verdict == "ok"
    allowed = {f.component: f.reason for f in verdict.findings if f.status == ALLOWED}
    assert allowed["nccl"].startswith("NCCL is built against 12.9 on purpose")
    assert allowed["libcublas-12-9"].startswith("cuBLAS 12.9 fix")
    assert verdict.stale_rules == (stale,)


def test_rocm_6_3_and_6_4_side_by_side_fails(rocm_mixed: str, cache: Path) -> None:
    verdict = one(f"containers-storage:{rocm_mixed}", cache)
    assert verdict.expected is not None and verdict.expected.release == "6.4"
    assert verdict.toolkits == {"rocm": ("6.3", "6.4")}
    bad = {(f.evidence, f.path) for f in violations(verdict)}
    assert bad == {("rocm-tree", "/opt/rocm-6.3.4"),
                   ("version-file", "/opt/rocm-6.3.4/.info/version"),
                   ("library", "/opt/rocm-6.3.4/lib/libamdhip64.so.6.3.42134")}


def test_cuda_libraries_in_a_cpu_image_fail(cpu_with_cuda: str, cache: Path) -> None:
    verdict = one(f"containers-storage:{cpu_with_cuda}", cache)
    assert verdict.expected is not None and verdict.expected.accelerator == "cpu"
    [bad] = violations(verdict)
    assert bad.toolkit == "cuda" and "cpu image" in bad.reason


def test_component_with_its_own_numbering_maps_to_its_release(
        curand128: str, cache: Path) -> None:
    verdict = one(f"containers-storage:{curand128}", cache)
    [curand] = [f for f in verdict.findings if f.component == "curand-cu12"]
    assert (curand.status, curand.version, curand.component_version) == (OK, "12.8", "10.3.9.90")
    wrong = one(f"containers-storage:{curand128}", cache, expect=Expectation("cuda", "12.9"))
    # The labels say 12.8 too, and disagree with the explicit expectation.
    assert sorted(f.component for f in violations(wrong)) == ["curand-cu12", "labels"]


def test_whiteout_removed_files_warn_and_fail_when_strict(whiteout: str, cache: Path) -> None:
    verdict = one(f"containers-storage:{whiteout}", cache)
    assert verdict.verdict == "ok"
    assert verdict.toolkits == {"cuda": ("12.8",)}
    [warned] = [f for f in verdict.findings if f.status == WARNING]
    assert warned.version == "12.9" and "removed by layer" in warned.reason
    strict = one(f"containers-storage:{whiteout}", cache, strict_layers=True)
    assert strict.verdict == "failed"
    assert [f.path for f in violations(strict)] == [warned.path]


def test_wrong_fromager_variant_fails(cuda128: str, cache: Path) -> None:
    good = one(f"containers-storage:{cuda128}", cache,
               expect=Expectation("cuda", "12.8.1", variant="cuda-ubi9"))
    assert good.verdict == "ok"
    bad = one(f"containers-storage:{cuda128}", cache,
              expect=Expectation("cuda", "12.8.1", variant="cuda-12.8-ubi9"))
    [finding] = violations(bad)
    assert finding.component == "FROMAGER_VARIANT" and "'cuda-ubi9'" in finding.reason


@pytest.mark.parametrize("dest, extra", [
    ("oci:{dir}/gzip:v1", ()),
    ("oci:{dir}/zstd:v1", ("--dest-compress-format", "zstd")),
    ("oci:{dir}/plain:v1", ("--dest-oci-accept-uncompressed-layers",)),
    ("oci-archive:{dir}/image.tar:v1", ()),
    ("docker-archive:{dir}/docker.tar", ()),
], ids=["oci-gzip", "oci-zstd", "oci-uncompressed", "oci-archive", "docker-archive"])
def test_layer_formats_and_transports(mixed_wheel: str, tmp_path: Path, dest: str,
                                      extra: tuple, no_tmp_leaks: Path) -> None:
    ref = export(mixed_wheel, dest.format(dir=tmp_path), *extra)
    verdict = one(ref, tmp_path / "cache")
    assert verdict.verdict == "failed"
    assert [f.version for f in violations(verdict)] == ["12.9"]
    if extra and extra[0] == "--dest-compress-format":
        blobs = (tmp_path / "zstd" / "blobs" / "sha256").iterdir()
        assert any(b.read_bytes()[:4] == b"\x28\xb5\x2f\xfd" for b in blobs)


@pytest.fixture(scope="session")
def index_image(images: Images, cuda128: str, tree129: str) -> str:
    """A manifest list: the clean image for amd64, the 12.9-tree image relabelled arm64."""
    ctr = run("buildah", "from", "--pull-never", tree129)
    run("buildah", "config", "--arch", "arm64", ctr)
    arm = images.name("tree129-arm64")
    run("buildah", "commit", "--quiet", "--rm", ctr, arm)
    images.created.append(arm)
    listed = images.name("index")
    run("buildah", "manifest", "create", listed)
    images.created.append(listed)
    run("buildah", "manifest", "add", listed, f"containers-storage:{cuda128}")
    run("buildah", "manifest", "add", listed, f"containers-storage:{arm}")
    return listed


def test_image_index_validates_every_platform(index_image: str, tmp_path: Path,
                                              cache: Path) -> None:
    layout = tmp_path / "index"
    run("buildah", "manifest", "push", "--quiet", "--all", index_image, f"oci:{layout}:multi")
    verdicts = validate_image(f"oci:{layout}:multi", cache_dir=cache)
    assert {v.platform: v.verdict for v in verdicts} == {"linux/amd64": "ok",
                                                          "linux/arm64": "failed"}
    [arm] = validate_image(f"oci:{layout}:multi", cache_dir=cache, platform="linux/arm64")
    assert arm.platform == "linux/arm64" and arm.verdict == "failed"
    with pytest.raises(InputError, match="no image for platform linux/s390x"):
        validate_image(f"oci:{layout}:multi", cache_dir=cache, platform="linux/s390x")


def test_image_index_from_a_registry(index_image: str, registry, tmp_path: Path,
                                     cache: Path) -> None:
    conf = tmp_path / "registries.conf"
    conf.write_text(f'[[registry]]\nlocation = "{registry.host}"\ninsecure = true\n')
    remote = f"{registry.host}/aipcc-test-validate/multi:v1"
    run("buildah", "manifest", "push", "--quiet", "--all", "--tls-verify=false", index_image,
        f"docker://{remote}")
    verdicts = validate_image(f"docker://{remote}", cache_dir=cache,
                              skopeo=Skopeo(registries_conf=str(conf)))
    assert sorted((v.platform, v.verdict) for v in verdicts) == [
        ("linux/amd64", "ok"), ("linux/arm64", "failed")]


def test_hostile_layer_gives_a_verdict_and_writes_nothing(
        cuda128: str, tmp_path: Path, no_tmp_leaks: Path) -> None:
    layout = tmp_path / "hostile"
    export(cuda128, f"oci:{layout}:v1")
    canary = tmp_path / "escaped"
    hostile = tar_bytes([
        member(f"../../../../../../..{canary}", b"owned"),
        member(f"{canary}-absolute", b"owned"),
        member("usr/lib/escape", kind=tarfile.SYMTYPE, link="../../../../etc/shadow"),
        member("loop/a", kind=tarfile.SYMTYPE, link="b"),
        member("loop/b", kind=tarfile.SYMTYPE, link="a"),
        member("dev/sda", kind=tarfile.BLKTYPE),
        member("usr/local/cuda-12.9/version.json", b'{"cuda": {"version": "12.9.1"}}'),
        member("huge", size=100 * 1024**3),
    ])
    append_layer(layout, hostile)
    # A name held twice: the engine refuses the whole layer, and so does the validator.
    append_layer(layout, tar_bytes([member("usr/x", b"x"), member("./usr/x", b"y")]))
    verdict = one(f"oci:{layout}:v1", tmp_path / "cache")
    kinds = {(f.component, f.status) for f in verdict.findings if f.evidence == "layer"}
    assert kinds == {("refused-layer", VIOLATION), ("path-traversal", WARNING),
                     ("absolute-path", WARNING),
                     ("symlink-escape", WARNING), ("symlink-loop", WARNING),
                     ("device-file", WARNING), ("absurd-size", VIOLATION)}
    assert verdict.verdict == "failed"
    assert "/usr/local/cuda-12.9/version.json" in {f.path for f in violations(verdict)}
    assert not canary.exists() and not Path(f"{canary}-absolute").exists()
    assert not os.path.lexists("/etc/shadow-owned")


def test_missing_image_is_a_clear_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        validate_image(f"oci:{tmp_path}/nothing:v1", cache_dir=tmp_path)
    missing = f"containers-storage:{PREFIX}/does-not-exist:v1"
    with pytest.raises(InputError, match=f"cannot read image {missing}"):
        validate_image(missing, cache_dir=tmp_path)
    with pytest.raises(InputError, match="expected TRANSPORT:REFERENCE"):
        validate_image("no-transport", cache_dir=tmp_path)


def test_second_run_is_served_from_the_cache(mixed_wheel: str, tmp_path: Path) -> None:
    ref = export(mixed_wheel, f"oci:{tmp_path}/layout:v1")
    first = one(ref, tmp_path / "cache")
    second = one(ref, tmp_path / "cache")
    assert (first.cached_layers, second.cached_layers) == (0, second.layers)
    assert second.findings == first.findings


def test_layers_are_not_recompressed_from_local_storage(cuda128: str, cache: Path) -> None:
    # containers-storage layers reach the scanner uncompressed: digest == diffID.
    config = run("skopeo", "inspect", "--config", f"containers-storage:{cuda128}")
    verdict = one(f"containers-storage:{cuda128}", cache)
    digests = {f.layer_digest for f in verdict.findings if f.layer_digest}
    assert digests and all(d in config for d in digests)


def test_skopeo_absence_is_reported_once(monkeypatch: pytest.MonkeyPatch, cuda128: str,
                                         tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    # Local storage is read in place: no skopeo needed.
    assert one(f"containers-storage:{cuda128}", tmp_path).verdict == "ok"
    with pytest.raises(InputError, match="skopeo is not installed"):
        validate_image("docker://127.0.0.1:1/aipcc-test-validate/none:v1", cache_dir=tmp_path)
