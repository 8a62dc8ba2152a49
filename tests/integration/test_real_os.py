"""The validator on a real Debian 12 base (mmdebstrap, scripts/base-os) with real NVIDIA
wheels installed by pip into a venv, and Debian's own CUDA packages installed by apt."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from aipcc_build.validate import ImageVerdict, validate_image
from aipcc_build.validate.results import FAILING, OK, VIOLATION, WARNING
from tests.support.layers import Images, Step, run

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
VENV = "/opt/venv"
SITE = f"{VENV}/lib/python3.11/site-packages"
CUDA128_LABELS = {"ai.aipcc.accelerator": "cuda", "ai.aipcc.accelerator.version": "12.8.1",
                  "ai.aipcc.variant": "cuda-deb12"}
CUDA128_ENV = {"FROMAGER_VARIANT": "cuda-deb12"}


@pytest.fixture(scope="session")
def debian() -> str:
    """Debian 12 from mmdebstrap, imported once and cached (shared: never removed here)."""
    done = subprocess.run([str(REPO / "scripts" / "base-os")], capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        pytest.fail(f"scripts/base-os failed: {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def pip(wheelhouse: Path, *requirements: str, upgrade: bool = False) -> Step:
    """A real `pip install` from the bind-mounted wheelhouse, no index."""
    flags = "-U " if upgrade else ""
    return Step(volumes=[(wheelhouse, "/wheels")], script=(
        f"[ -x {VENV}/bin/pip ] || python3 -m venv {VENV}; "
        f"{VENV}/bin/pip install -q --disable-pip-version-check --no-index "
        f"--find-links /wheels {flags}{' '.join(requirements)}"))


def device_nodes(path: Path) -> Path:
    """The device nodes debootstrap and mmdebstrap (as root) write into a root filesystem.

    scripts/base-os may leave them out (its rootfs here has none), so the clean image
    brings them in a layer of its own, as real Debian/Ubuntu base images do; with them, a
    set-user-ID program added above the base."""
    with tarfile.open(path, "w") as tar:
        for name, major, minor in (("dev/console", 5, 1), ("dev/null", 1, 3),
                                   ("dev/ptmx", 5, 2), ("dev/zero", 1, 5)):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.CHRTYPE, 0o666
            info.devmajor, info.devminor = major, minor
            tar.addfile(info)
        info = tarfile.TarInfo("usr/local/bin/setuid-helper")
        info.mode = 0o4755
        tar.addfile(info)
    return path


@pytest.fixture(scope="session")
def deb_cuda128(images: Images, debian: str, wheelhouse: Path,
                tmp_path_factory: pytest.TempPathFactory) -> str:
    devices = device_nodes(tmp_path_factory.mktemp("devices") / "devices.tar")
    step = pip(wheelhouse, "nvidia-cuda-runtime-cu12==12.8.90", "nvidia-nvtx-cu12==12.8.90",
               "nvidia-cuda-cupti-cu12==12.8.90")
    step.env, step.labels = CUDA128_ENV, CUDA128_LABELS
    return images.build("deb-cuda128", debian, [Step(add=[(devices, "/")]), step])


@pytest.fixture(scope="session")
def deb_nvtx129(images: Images, deb_cuda128: str, wheelhouse: Path) -> str:
    return images.build("deb-nvtx129", deb_cuda128,
                        [pip(wheelhouse, "nvidia-nvtx-cu12", upgrade=True)])


@pytest.fixture(scope="session")
def deb_cuda13(images: Images, deb_cuda128: str, wheelhouse: Path) -> str:
    return images.build("deb-cuda13", deb_cuda128,
                        [pip(wheelhouse, "nvidia-cuda-runtime==13.0.88")])


@pytest.fixture(scope="session")
def deb_debian_cuda11(images: Images, deb_cuda128: str,
                      tmp_path_factory: pytest.TempPathFactory) -> str:
    """Debian's non-free libcudart11.0 (CUDA 11.8): apt in the image, else the host's .deb."""
    script = ("apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
              "--no-install-recommends libcudart11.0 && rm -rf /var/lib/apt/lists/*")
    try:
        return images.build("deb-cuda11", deb_cuda128, [Step(script=script)])
    except RuntimeError:
        debs = tmp_path_factory.mktemp("debs")
        subprocess.run(["apt-get", "download", "libcudart11.0"], cwd=debs, check=True,
                       capture_output=True, timeout=600)
        return images.build("deb-cuda11", deb_cuda128, [Step(
            volumes=[(debs, "/debs")], script="dpkg -i /debs/*.deb")])


@pytest.fixture(scope="session")
def deb_cpu(images: Images, debian: str) -> str:
    return images.build("deb-cpu", debian, [Step(
        env={"FROMAGER_VARIANT": "cpu-deb12"},
        labels={"ai.aipcc.accelerator": "cpu", "ai.aipcc.variant": "cpu-deb12"})])


@pytest.fixture(scope="session")
def deb_versioned_variant(images: Images, debian: str) -> str:
    return images.build("deb-versioned-variant", debian, [Step(
        env={"FROMAGER_VARIANT": "cuda-12.8-deb12"})])


@pytest.fixture(scope="session")
def deb_unlabelled_mix(images: Images, debian: str, wheelhouse: Path) -> str:
    return images.build("deb-unlabelled-mix", debian, [
        pip(wheelhouse, "nvidia-cuda-runtime-cu12==12.9.79", "nvidia-nvtx-cu12==12.8.90")])


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("validate-real-os-cache")


def one(ref: str, cache: Path) -> ImageVerdict:
    [verdict] = validate_image(f"containers-storage:{ref}", cache_dir=cache)
    return verdict


def failing(verdict: ImageVerdict) -> list:
    return [f for f in verdict.findings if f.status in FAILING]


def top_layer(image: str) -> str:
    return run("skopeo", "inspect", "--format", "{{range .Layers}}{{.}}\n{{end}}",
               f"containers-storage:{image}").splitlines()[-1]


def test_clean_cuda_12_8_on_debian_passes_with_device_nodes_as_warnings(
        deb_cuda128: str, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    verdict = one(deb_cuda128, cache)
    assert failing(verdict) == [], [f.line() for f in failing(verdict)]
    assert verdict.verdict == "ok" and verdict.toolkits == {"cuda": ("12.8",)}
    assert verdict.expected is not None and verdict.expected.variant == "cuda-deb12"
    components = {f.component for f in verdict.findings if f.evidence == "dist-info"}
    assert components == {"cuda-runtime-cu12", "nvtx-cu12", "cuda-cupti-cu12"}
    devices = {f.path for f in verdict.findings if f.component == "device-file"}
    assert {"/dev/console", "/dev/null"} <= devices
    # Debian's own set-user-ID programs, in the base layer, are listed; one added above it
    # is a warning naming its layer.
    setuid = {f.path: f for f in verdict.findings if f.component == "setuid"}
    layers = run("skopeo", "inspect", "--format", "{{range .Layers}}{{.}}\n{{end}}",
                 f"containers-storage:{deb_cuda128}").splitlines()
    assert {"/usr/bin/su", "/usr/bin/passwd"} <= set(setuid)
    assert (setuid["/usr/bin/su"].status, setuid["/usr/bin/su"].layer_digest) == (OK, layers[0])
    added = setuid.pop("/usr/local/bin/setuid-helper")
    assert added.status == WARNING and added.layer_digest == layers[1]
    assert {f.status for f in setuid.values()} == {OK}
    assert {f.status for f in verdict.findings
            if f.evidence == "layer" and f.component != "setuid"} == {WARNING}
    # The command prints no violation line at all.
    from aipcc_build.cli import main

    with pytest.raises(SystemExit) as code:
        main(["validate", f"containers-storage:{deb_cuda128}", "--cache-dir", str(cache)])
    out = capsys.readouterr().out
    assert code.value.code in (0, None) and "violation" not in out
    assert "warning: setuid (layer) at /usr/local/bin/setuid-helper" in out
    assert "/usr/bin/su" not in out


def test_pip_upgraded_nvtx_12_9_fails_naming_it_and_its_layer(
        deb_nvtx129: str, cache: Path) -> None:
    verdict = one(deb_nvtx129, cache)
    [bad] = failing(verdict)
    assert (bad.status, bad.component, bad.component_version, bad.version) == (
        VIOLATION, "nvtx-cu12", "12.9.79", "12.9")
    assert bad.path == f"{SITE}/nvidia_nvtx_cu12-12.9.79.dist-info"
    assert bad.layer_digest == top_layer(deb_nvtx129)


def test_cuda_13_runtime_wheel_in_12_8_image_fails(deb_cuda13: str, cache: Path) -> None:
    verdict = one(deb_cuda13, cache)
    bad = {(f.component, f.version) for f in failing(verdict)}
    assert bad == {("cuda-runtime", "13.0"), ("nvidia-cu13", "13")}
    assert all(f.status == VIOLATION for f in failing(verdict))


def test_debian_cuda_11_libraries_in_12_8_image_fail_naming_the_dpkg_package(
        deb_debian_cuda11: str, cache: Path) -> None:
    verdict = one(deb_debian_cuda11, cache)
    assert verdict.verdict == "failed"
    [package] = [f for f in failing(verdict) if f.evidence == "dpkg"]
    assert (package.component, package.version, package.path) == (
        "libcudart11.0", "11.8", "/var/lib/dpkg/status")
    assert package.component_version.startswith("11.8.89~11.8.0-")  # type: ignore[union-attr]
    libraries = [f for f in failing(verdict) if f.evidence == "library"]
    assert [f.path for f in libraries] == ["/usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89"]
    assert all(f.status == VIOLATION for f in failing(verdict))


def test_cpu_image_on_debian_passes(deb_cpu: str, cache: Path) -> None:
    verdict = one(deb_cpu, cache)
    assert verdict.verdict == "ok", [f.line() for f in failing(verdict)]
    assert verdict.expected is not None and verdict.expected.accelerator == "cpu"
    assert verdict.toolkits == {}


def test_versioned_fromager_variant_fails_without_a_matrix(
        deb_versioned_variant: str, cache: Path) -> None:
    verdict = one(deb_versioned_variant, cache)
    [bad] = failing(verdict)
    assert bad.component == "FROMAGER_VARIANT" and "names a toolkit version" in bad.reason


def test_unlabelled_12_9_and_12_8_mix_is_reported_mixed(
        deb_unlabelled_mix: str, cache: Path) -> None:
    verdict = one(deb_unlabelled_mix, cache)
    [mix] = failing(verdict)
    assert mix.evidence == "mixed" and mix.version == "12.8, 12.9"
    assert mix.reason.startswith("MIXED cuda releases 12.8 and 12.9: ")
    assert "cuda 12.8 (nvtx-cu12 12.8.90" in mix.reason
    assert "cuda 12.9 (cuda-runtime-cu12 12.9.79" in mix.reason
    assert verdict.expected is not None and verdict.expected.release is None
    assert not any("expected" in f.reason for f in verdict.findings)
