"""The files PIP_CONFIG_FILE and UV_CONFIG_FILE name under other names than pip.conf and
uv.toml, read by `aipcc-build validate` from real buildah-built images (busybox plus the
files: no pip needed), in local storage and exported to a compressed OCI layout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.layers import Images, Step, export
from tests.support.project import REPO

pytestmark = pytest.mark.integration

RHAI = "https://packages.redhat.com/api/pypi/public-rhai/rhoai/3.0/"
INDEX128 = RHAI + "cuda12.8-ubi9/simple/"
INDEX129 = RHAI + "cuda12.9-ubi9/simple/"
PIP_FILE = "/opt/conf/site-pip.ini"
UV_FILE = "/etc/uv/settings.toml"


def validate(ref: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aipcc_build", "validate", ref, "--expect", "cuda=12.8",
         "--cache-dir", str(cache)], capture_output=True, text=True, timeout=600,
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "PYTHONPATH": str(REPO)})


def lines(done: subprocess.CompletedProcess[str], status: str) -> list[str]:
    """The findings of STATUS, one a line ("REF PLATFORM: STATUS: ...")."""
    return [line.strip() for line in done.stdout.splitlines() if f": {status}: " in line]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("config-files")
    (work / "wrong.ini").write_text(f"[global]\nindex-url = {INDEX129}\n"
                                    "extra-index-url = https://pypi.org/simple/\n")
    (work / "right.ini").write_text(f"[global]\nindex-url = {INDEX128}\n")
    (work / "uv-settings.toml").write_text(f'index-url = "{INDEX128}"\n')
    return work


def test_a_cuda129_index_in_the_file_pip_config_file_names_fails_a_cuda128_image(
        images: Images, base_image: str, files: Path, tmp_path: Path) -> None:
    wrong = images.build("config-file-wrong", base_image, [Step(
        add=[(files / "wrong.ini", PIP_FILE)], env={"PIP_CONFIG_FILE": PIP_FILE})])
    layout = export(wrong, f"oci:{tmp_path / 'layout'}:wrong", "--dest-compress")
    for ref in (f"containers-storage:{wrong}", layout):
        done = validate(ref, tmp_path / "cache")
        assert done.returncode == 1, done.stdout + done.stderr
        [violation] = lines(done, "violation")
        assert PIP_FILE in violation and "PIP_CONFIG_FILE names this file" in violation
        assert INDEX129 in violation and "cuda 12.9 wheels, in a cuda 12.8 image" in violation
        assert "[layer sha256:" in violation
        [warning] = [line for line in lines(done, "warning") if PIP_FILE in line]
        assert "https://pypi.org/simple/" in warning and "not one of ours" in warning


def test_named_files_that_are_right_pass_and_removed_ones_are_judged_as_the_tools_do(
        images: Images, base_image: str, files: Path, tmp_path: Path) -> None:
    good = images.build("config-file-good", base_image, [
        Step(add=[(files / "right.ini", PIP_FILE),
                  (files / "uv-settings.toml", "/opt/conf/uv-settings.toml")]),
        Step(script=f"mkdir -p /etc/uv && ln -s ../../opt/conf/uv-settings.toml {UV_FILE}",
             env={"PIP_CONFIG_FILE": PIP_FILE, "UV_CONFIG_FILE": UV_FILE})])
    done = validate(f"containers-storage:{good}", tmp_path / "cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not lines(done, "violation") and not lines(done, "warning"), done.stdout
    # A later layer deletes both files: pip ignores a missing PIP_CONFIG_FILE (a warning),
    # uv refuses to run without its UV_CONFIG_FILE (a violation).
    removed = images.build("config-file-removed", good, [Step(
        script=f"rm {PIP_FILE} /opt/conf/uv-settings.toml")])
    done = validate(f"containers-storage:{removed}", tmp_path / "cache")
    assert done.returncode == 1, done.stdout + done.stderr
    [violation] = lines(done, "violation")
    assert "config:Env/UV_CONFIG_FILE" in violation and "uv fails every command" in violation
    assert "/opt/conf/uv-settings.toml is removed by layer" in violation
    assert any("config:Env/PIP_CONFIG_FILE" in line and "pip ignores it" in line
               for line in lines(done, "warning")), done.stdout


def test_a_pip_conf_pip_cannot_load_fails_the_image_as_it_fails_pip(
        images: Images, debian_base: str, tmp_path: Path) -> None:
    broken = tmp_path / "pip.conf"
    broken.write_text(f"[global\nindex-url = {INDEX128}\n")  # the section never closes
    image = images.build("config-file-unparsable", debian_base, [
        Step(add=[(broken, "/etc/pip.conf"), (broken, "/usr/share/doc/example/pip.conf")])])
    # Real pip in the image stops on it, whatever the command.
    container = subprocess.run(["buildah", "from", "--pull=never", image], check=True,
                               capture_output=True, text=True, timeout=300).stdout.strip()
    try:
        pip = subprocess.run(["buildah", "run", "--isolation", "chroot", container, "--",
                              "python3", "-m", "pip", "download", "--no-deps", "packaging"],
                             capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, timeout=300)
    assert pip.returncode != 0 and "/etc/pip.conf" in pip.stderr, pip.stderr
    done = validate(f"containers-storage:{image}", tmp_path / "cache")
    assert done.returncode == 1, done.stdout + done.stderr
    [violation] = lines(done, "violation")
    assert "/etc/pip.conf" in violation and "pip cannot load it" in violation
    assert any("/usr/share/doc/example/pip.conf" in line for line in lines(done, "warning"))
