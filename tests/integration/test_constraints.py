"""The constraints every image carries, with real pip and uv in the demo's real Debian image
(issue 33): the demo's CUDA 12.8 base image, built from its committed Containerfile against
the demo's wheel index, installs components of its own release and refuses at resolution a
framework that needs another release or major, whichever way pip or uv is started; the
documented override installs it. The validator judges the image's constraints file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_wheel_index import CACHE, uv_wheel  # noqa: F401
from tests.support.wheels import make_wheel, simple_index

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DEMO_BASE = REPO / "containerfiles" / "demo" / "base" / "cuda-12.8-debian" / "Containerfile.amd64"
DEMO_INDEX = "http://127.0.0.1:8580/1.0/cuda12.8-debian/simple/"
TAG = "localhost/aipcc-test/constraints/cuda-12.8-debian:1"
# A framework's wheel set pinned for one release, as torch 2.8.0 pins CUDA 12.8's.
FRAMEWORKS = {
    "fw-cu128": ["nvidia-cuda-runtime-cu12==12.8.90", "nvidia-nvtx-cu12==12.8.90"],
    "fw-cu129": ["nvidia-cuda-runtime-cu12==12.9.79", "nvidia-nvtx-cu12==12.9.79"],
    "fw-cu130": ["nvidia-cuda-runtime==13.0.88"],
}


# pip 26.2 stopped passing PIP_CONSTRAINT to build environments; Debian 12's pip (23.0.1)
# still does: the image's build constraints are tried with both.
NEW_PIP = "26.3"


@pytest.fixture(scope="module")
def new_pip_wheel() -> Path:
    """pip's wheel from PyPI, downloaded once into the cache (like uv's)."""
    directory = CACHE / "pip"
    found = sorted(directory.glob(f"pip-{NEW_PIP}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--only-binary=:all:", "-d", str(directory), f"pip=={NEW_PIP}"],
                       check=True, capture_output=True, timeout=600,
                       env={**os.environ, "PIP_CONSTRAINT": ""})
        found = sorted(directory.glob(f"pip-{NEW_PIP}-*.whl"))
    return found[0]


@pytest.fixture(scope="module")
def mixed_index(wheelhouse: Path, uv_wheel: Path, new_pip_wheel: Path,  # noqa: F811
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An index offering NVIDIA's real components of CUDA 12.8, 12.9 and 13.0 side by side
    (as PyPI does), frameworks pinned for each, and uv, served on 127.0.0.1 with a request
    log."""
    work = tmp_path_factory.mktemp("mixed-index")
    made = [make_wheel(work / "made", name, "1.0", requires=requires)
            for name, requires in FRAMEWORKS.items()]
    real = [w for w in wheelhouse.glob("*.whl")
            if w.name.startswith(("nvidia_cuda_runtime", "nvidia_nvtx_cu12",
                                  "nvidia_cuda_cupti_cu12"))]
    simple_index(work / "root", [*made, *real, uv_wheel, new_pip_wheel])
    pidfile, log = work / "server.pid", work / "requests.log"
    served = subprocess.run([str(REPO / "scripts" / "serve-dir"), str(work / "root"),
                             "--pidfile", str(pidfile), "--log", str(log)],
                            capture_output=True, text=True, timeout=60)
    assert served.returncode == 0, served.stderr
    try:
        yield {"url": served.stdout.strip().splitlines()[-1] + "simple/", "log": log}
    finally:
        subprocess.run([str(REPO / "scripts" / "serve-dir"), "--stop", "--pidfile",
                        str(pidfile)], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def container(debian_base: str, mixed_index: dict[str, Any],
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A working container of the demo's CUDA 12.8 base image: its committed Containerfile,
    pointed at the mixed index instead of its own (whose port other tests may hold), with
    uv installed."""
    text = DEMO_BASE.read_text()
    assert DEMO_INDEX in text
    containerfile = tmp_path_factory.mktemp("demo-base") / "Containerfile"
    containerfile.write_text(text.replace(DEMO_INDEX, mixed_index["url"]))
    # The files its COPY lines take from the build context, pip.conf and uv.toml naming
    # the index too.
    (containerfile.parent / "image-files").mkdir()
    for path in (DEMO_BASE.parent / "image-files").iterdir():
        (containerfile.parent / "image-files" / path.name).write_text(
            path.read_text().replace(DEMO_INDEX, mixed_index["url"]))
    built = subprocess.run(["buildah", "build", "--pull-never", "-t", TAG, "-f",
                            str(containerfile), str(containerfile.parent)],
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    # The demo's own `pip install nvidia-cuda-runtime-cu12 ...` picked its release's
    # components, though the index offers newer ones of CUDA 12.9.
    installed = built.stdout.split("Successfully installed", 1)[1].splitlines()[0]
    assert sorted(installed.split()) == ["nvidia-cuda-cupti-cu12-12.8.90",
                                         "nvidia-cuda-runtime-cu12-12.8.90",
                                         "nvidia-nvtx-cu12-12.8.90"]
    name = subprocess.run(["buildah", "from", "--pull-never", TAG], capture_output=True,
                          text=True, check=True, timeout=120).stdout.strip()
    try:
        uv = run(name, f"pip install --index-url {mixed_index['url']} uv")
        assert uv.returncode == 0, uv.stderr
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True, timeout=120)
        subprocess.run(["buildah", "rmi", "-f", TAG], capture_output=True, timeout=120)


_MOUNTS: dict[str, Path] = {}


def run(container: str, command: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """COMMAND run in CONTAINER, its output (stdout and stderr, one stream as a person
    reads it) read back from a file in the container: `buildah run` under chroot isolation
    on a loaded host now and then hands back nothing of what a short command printed."""
    settings = [f"--env={k}={v}" for k, v in (env or {}).items()]
    if container not in _MOUNTS:
        mounted = subprocess.run(["buildah", "mount", container], capture_output=True,
                                 text=True, check=True, timeout=120)
        _MOUNTS[container] = Path(mounted.stdout.strip())
    output = _MOUNTS[container] / "tmp" / "aipcc-test-output"
    output.unlink(missing_ok=True)
    done = subprocess.run(["buildah", "run", *settings, container, "--", "sh", "-c",
                           f"exec > /tmp/aipcc-test-output 2>&1\n{command}"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)
    text = output.read_text() if output.exists() else done.stdout
    return subprocess.CompletedProcess(done.args, done.returncode, text)


def test_pip_installs_its_release_and_refuses_another_at_resolution(
        container: str, mixed_index: dict[str, Any]) -> None:
    url = mixed_index["url"]
    # The newest cudart on the index is 12.9.79: the constraints keep the image's 12.8.90.
    newest = run(container, f"pip install --dry-run --upgrade --index-url {url} "
                            "nvidia-cuda-runtime-cu12")
    assert newest.returncode == 0, newest.stdout
    assert "Requirement already satisfied: nvidia-cuda-runtime-cu12" in newest.stdout
    assert "12.9.79" not in newest.stdout
    framework = run(container, f"pip install --index-url {url} fw-cu128")
    assert framework.returncode == 0, framework.stdout
    assert "Successfully installed fw-cu128-1.0" in framework.stdout
    before = mixed_index["log"].read_text()
    other = run(container, f"pip install --index-url {url} fw-cu129")
    assert other.returncode == 1
    # What the user reads: the conflict, the image's release and the constraints file.
    assert "ResolutionImpossible" in other.stdout
    assert "fw-cu129 1.0 depends on nvidia-cuda-runtime-cu12==12.9.79" in other.stdout
    assert "The user requested (constraint) nvidia-cuda-runtime-cu12" \
           "!=12.8+cuda12.8.image.see.etc.aipcc.constraints.txt,==12.8.*" in other.stdout
    major = run(container, f"/usr/bin/python3 -m pip install --index-url {url} fw-cu130")
    assert major.returncode == 1
    assert "The user requested (constraint) nvidia-cuda-runtime==0+not.in.cuda12.8.images" \
           ".see.etc.aipcc.constraints.txt" in major.stdout
    # Nothing was downloaded for the refused sets: only their metadata was read.
    fetched = mixed_index["log"].read_text()[len(before):]
    assert "12.9.79-py3" not in fetched.replace(".whl.metadata", "")
    assert "fw_cu129-1.0-py3-none-any.whl " not in fetched
    assert "fw_cu129-1.0-py3-none-any.whl.metadata" in fetched


def test_uv_refuses_the_same_and_the_override_installs(
        container: str, mixed_index: dict[str, Any]) -> None:
    url = mixed_index["url"]
    # The newest nvtx on the index is 12.9.79: an upgrade keeps to 12.8.
    own = run(container, f"uv pip install --upgrade --reinstall --index-url {url} "
                         "nvidia-nvtx-cu12")
    assert own.returncode == 0, own.stdout
    assert "~ nvidia-nvtx-cu12==12.8.90" in own.stdout
    other = run(container, f"uv pip install --index-url {url} fw-cu129")
    assert other.returncode == 1
    # uv prints the range it kept, split at the clause that names the release and file.
    assert re.search(r"fw-cu129\S* depends? on (nvidia-[a-z-]+-cu12)==12\.9\.79 and one of:\s+"
                     r"\1>=12\.8\.dev0,<12\.8\+cuda12\.8\.image\.see\.etc\.aipcc\.constraints"
                     r"\.txt\s", other.stdout), other.stdout
    major = run(container, f"uv pip install --index-url {url} fw-cu130")
    assert major.returncode == 1
    assert "nvidia-cuda-runtime==0+not.in.cuda12.8.images.see.etc.aipcc.constraints.txt" \
        in major.stdout
    # uv reads the constraints from uv.toml too: without UV_CONSTRAINT it still refuses.
    config_only = run(container, f"uv pip install --dry-run --index-url {url} fw-cu129",
                      {"UV_CONSTRAINT": ""})
    assert config_only.returncode == 1, config_only.stdout
    # The override the file's comment documents, for each tool.
    pip = run(container, f"pip install --dry-run --index-url {url} fw-cu129",
              {"PIP_CONSTRAINT": "/dev/null"})
    assert pip.returncode == 0, pip.stdout
    assert "nvidia-cuda-runtime-cu12-12.9.79" in pip.stdout
    uv = run(container, f"uv pip install --dry-run --index-url {url} fw-cu129",
             {"UV_CONSTRAINT": "/dev/null", "UV_CONFIG_FILE": "/dev/null"})
    assert uv.returncode == 0, uv.stdout
    assert "+ nvidia-cuda-runtime-cu12==12.9.79" in uv.stdout
    comment = run(container, "head -20 /etc/aipcc-constraints.txt")
    assert "PIP_CONSTRAINT=/dev/null pip install" in comment.stdout
    assert "UV_CONSTRAINT=/dev/null UV_CONFIG_FILE=/dev/null uv pip install" in comment.stdout


def test_the_validator_judges_the_images_constraints(container: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIPCC_BUILD_CACHE": str(tmp_path / "c")}
    done = subprocess.run([sys.executable, "-m", "aipcc_build", "validate", "--json",
                           f"containers-storage:{TAG}"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert "pip and uv keep to cuda 12.8" in done.stdout
    # A later layer that deletes the file leaves an image whose pip mixes releases.
    try:
        assert run(container, "mv /etc/aipcc-constraints.txt /etc/moved.txt").returncode == 0
        subprocess.run(["buildah", "commit", "--quiet", container, f"{TAG}-stripped"],
                       check=True, capture_output=True, timeout=300)
        failed = subprocess.run([sys.executable, "-m", "aipcc_build", "validate", "--json",
                                 f"containers-storage:{TAG}-stripped"],
                                capture_output=True, text=True, env=env, timeout=300)
        assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr
        assert "the image carries no constraints file" in failed.stdout
    finally:
        # The container serves the tests that follow.
        run(container, "mv /etc/moved.txt /etc/aipcc-constraints.txt")
        subprocess.run(["buildah", "rmi", "-f", f"{TAG}-stripped"], capture_output=True,
                       timeout=120)


# Issue 39: every way a user installs keeps to the image, and nothing correct is refused.
OURS = "nvidia-cuda-runtime-cu12-12.8.90"
NAMED = "cuda12.8.image.see.etc.aipcc.constraints.txt"  # the release and the file, in uv's
# and pip's refusals
PROJECT = """[project]
name = "app"
version = "0"
requires-python = ">=3.9"
dependencies = ["nvidia-cuda-runtime-cu12=={version}"]
"""
OVERRIDE = {"UV_CONSTRAINT": "/dev/null", "UV_CONFIG_FILE": "/dev/null"}


def installed(container: str, python: str = "/opt/venv/bin/python") -> str:
    """The image's cudart wheels, as its Python sees them."""
    return run(container, f"{python} -c 'import importlib.metadata as m; print(sorted("
                          "d.version for d in m.distributions() "
                          "if d.metadata[\"Name\"] == \"nvidia-cuda-runtime-cu12\"))'").stdout


def test_uv_run_with_uvx_and_uv_tool_keep_to_the_image(container: str) -> None:
    # `uv run --with` reads no UV_CONSTRAINT: the image's `uv` gives it the constraints.
    other = run(container, "uv run --no-project --with fw-cu129 python -c 'print(1)'")
    assert other.returncode == 1, other.stdout
    assert "fw-cu129" in other.stdout and NAMED in other.stdout
    own = run(container, "uv run --no-project --with fw-cu128 python -c "
                         "'import importlib.metadata as m; print(m.version(\"nvidia-cuda-"
                         "runtime-cu12\"))'")
    assert own.returncode == 0, own.stdout
    assert own.stdout.strip().splitlines()[-1] == "12.8.90"
    for command in ("uvx --from fw-cu129 python -c 1", "uv tool run --from fw-cu129 python -c 1",
                    "uv tool install fw-cu129"):
        refused = run(container, command)
        assert refused.returncode != 0 and NAMED in refused.stdout, (command, refused.stdout)
    assert run(container, "uvx --from fw-cu128 python -c 1").returncode == 0
    # The deliberate override still gets through.
    assert run(container, "uv run --no-project --with fw-cu129 python -c 1",
               OVERRIDE).returncode == 0
    # `python -m uv` runs its Python's uv (/opt/venv/bin/uv), past the entry point on PATH:
    # the image's sitecustomize sends it through the entry point.
    module = run(container, "/opt/venv/bin/python -m uv run --no-project --with fw-cu129 "
                            "python -c 'print(1)'")
    assert module.returncode == 1 and NAMED in module.stdout, module.stdout
    assert run(container, "/opt/venv/bin/python -m uv run --no-project --with fw-cu129 "
                          "python -c 1", OVERRIDE).returncode == 0


def test_uv_sync_of_a_foreign_lock_is_refused_before_anything_is_installed(
        container: str) -> None:
    # A project locked elsewhere (here: with the override) on CUDA 12.9's cudart.
    setup = run(container, "rm -rf /work && mkdir -p /work/foreign /work/clean && cd /work "
                f"&& printf '{PROJECT.format(version='12.9.79')}' > foreign/pyproject.toml "
                f"&& printf '{PROJECT.format(version='12.8.90')}' > clean/pyproject.toml "
                "&& (cd foreign && uv lock) && (cd clean && uv lock)", OVERRIDE)
    assert setup.returncode == 0, setup.stdout
    for command in ("uv sync", "uv sync --locked", "uv run python -c 1"):
        refused = run(container, f"cd /work/foreign && {command}")
        assert refused.returncode == 1, (command, refused.stdout)
        assert "nvidia-cuda-runtime-cu12 12.9.79" in refused.stdout
        assert "cuda 12.8 image" in refused.stdout
        assert "/etc/aipcc-constraints.txt" in refused.stdout
        assert "nothing was installed" in refused.stdout
        assert run(container, "test -e /work/foreign/.venv").returncode == 1, command
    # `uv add` resolves with uv.toml's constraint-dependencies itself.
    added = run(container, "cd /work/clean && uv add fw-cu129")
    assert added.returncode == 1 and NAMED in added.stdout, added.stdout
    # A lock of the image's release installs.
    clean = run(container, "cd /work/clean && uv sync --locked && .venv/bin/python -c "
                           "'import importlib.metadata as m; print(m.version(\"nvidia-cuda-"
                           "runtime-cu12\"))'")
    assert clean.returncode == 0, clean.stdout
    assert clean.stdout.strip().splitlines()[-1] == "12.8.90"
    # A project without a lock is locked first, then checked: `uv lock` reads no
    # system-wide constraint-dependencies, so it would pick the index's newest cudart.
    fresh = run(container, "mkdir -p /work/fresh && cd /work/fresh && printf '[project]\\n"
                           "name = \"f\"\\nversion = \"0\"\\nrequires-python = \">=3.9\"\\n"
                           "dependencies = [\"fw-cu129\"]\\n' > pyproject.toml && uv sync")
    assert fresh.returncode == 1, fresh.stdout
    assert "nvidia-cuda-runtime-cu12 12.9.79" in fresh.stdout
    assert run(container, "test -e /work/fresh/.venv").returncode == 1
    # A floating requirement locked at the image's release installs; `uv sync --upgrade`
    # would re-resolve it to CUDA 12.9: refused, the environment left as it was.
    floating = run(container, "mkdir -p /work/floating && cd /work/floating && printf "
                              "'[project]\nname = \"f\"\nversion = \"0\"\nrequires-python = "
                              "\">=3.9\"\ndependencies = [\"nvidia-cuda-runtime-cu12\"]\n' "
                              "> pyproject.toml && UV_CONSTRAINT=/dev/null uv lock -P "
                              "nvidia-cuda-runtime-cu12==12.8.90 && uv sync")
    assert floating.returncode == 0, floating.stdout
    upgrade = run(container, "cd /work/floating && uv sync --upgrade")
    assert upgrade.returncode == 1, upgrade.stdout
    assert "nvidia-cuda-runtime-cu12 12.9.79" in upgrade.stdout
    assert "12.8.90" in installed(container, "/work/floating/.venv/bin/python")
    assert "12.9.79" not in run(container, "cat /work/floating/uv.lock").stdout  # put back


def test_a_pylock_of_the_images_release_installs_and_another_is_refused(
        container: str) -> None:
    export = run(container, "cd /work/clean && uv export --format pylock.toml -o pylock.toml "
                            "&& cd ../foreign && uv export --format pylock.toml -o pylock.toml",
                 OVERRIDE)
    assert export.returncode == 0, export.stdout
    venv = "uv venv -q /tmp/lock-env && uv pip install --python /tmp/lock-env/bin/python"
    clean = run(container, f"rm -rf /tmp/lock-env && {venv} -r /work/clean/pylock.toml")
    assert clean.returncode == 0, clean.stdout  # uv alone refuses constraints with a pylock
    assert "[\'12.8.90\']" in installed(container, "/tmp/lock-env/bin/python")
    foreign = run(container, f"rm -rf /tmp/lock-env && {venv} -r /work/foreign/pylock.toml")
    assert foreign.returncode == 1, foreign.stdout
    assert "nvidia-cuda-runtime-cu12 12.9.79" in foreign.stdout and "nothing was installed" \
        in foreign.stdout
    assert installed(container, "/tmp/lock-env/bin/python").strip() == "[]"


def test_a_users_constraints_add_to_the_images(container: str) -> None:
    # The cython<3 workaround of 2023: a file of the user's, named by the variable.
    assert run(container, "echo 'cython<3' > /tmp/mine.txt").returncode == 0
    mine = {"PIP_CONSTRAINT": "/tmp/mine.txt"}
    pip = run(container, "pip install --dry-run fw-cu129", mine)
    assert pip.returncode == 1, pip.stdout
    assert NAMED in pip.stdout
    # A notebook's %pip: `python -m pip` of the image's Python (/opt/venv has no pip).
    module = run(container, "/usr/bin/python3 -m pip install --dry-run fw-cu129", mine)
    assert module.returncode == 1 and NAMED in module.stdout, module.stdout
    assert run(container, "pip install --dry-run fw-cu128", mine).returncode == 0
    uv = run(container, "uv pip install --dry-run fw-cu129",
             {"UV_CONSTRAINT": "/tmp/mine.txt", "UV_CONFIG_FILE": "/dev/null"})
    assert uv.returncode == 1, uv.stdout
    assert NAMED in uv.stdout
    # `uv tool` reads no uv.toml constraints: only the entry point's addition keeps it.
    for command in ("uvx --from fw-cu129 python -c 1", "uv tool run --from fw-cu129 python -c 1"):
        tool = run(container, command, {"UV_CONSTRAINT": "/tmp/mine.txt"})
        assert tool.returncode == 1, (command, tool.stdout)
        assert NAMED in tool.stdout
    assert installed(container).strip() == f"['{OURS.rsplit('-', 1)[1]}']"



def test_a_venvs_own_pip_keeps_the_images_constraints_beside_the_users(container: str) -> None:
    # A fresh venv with a pip of its own: the system site-packages (and any .pth file
    # there) are not on its path, its stdlib directory (and the sitecustomize there) is.
    made = run(container, "rm -rf /tmp/own && python3 -m venv --without-pip /tmp/own "
                          "&& PIP_PYTHON=/tmp/own/bin/python pip install -q pip "
                          "&& echo 'cython<3' > /tmp/mine.txt && test -x /tmp/own/bin/pip")
    assert made.returncode == 0, made.stdout
    own = "env -u PIP_PYTHON /tmp/own/bin/pip install"
    mine = {"PIP_CONSTRAINT": "/tmp/mine.txt"}
    other = run(container, f"{own} fw-cu129", mine)
    assert other.returncode == 1, other.stdout
    assert NAMED in other.stdout
    assert "/tmp/own/bin/python" in run(container, "env -u PIP_PYTHON /tmp/own/bin/pip -V "
                                                   "&& /tmp/own/bin/python -c 'import sys; "
                                                   "print(sys.executable)'").stdout
    clean = run(container, f"{own} fw-cu128", mine)
    assert clean.returncode == 0, clean.stdout
    assert installed(container, "/tmp/own/bin/python").strip() == "['12.8.90']"
    # The deliberate way out still is one.
    override = run(container, f"{own} --dry-run fw-cu129", {"PIP_CONSTRAINT": "/dev/null"})
    assert override.returncode == 0, override.stdout
    assert "fw-cu129-1.0" in override.stdout
    # Debian's sitecustomize (a link to /etc/python3.11/sitecustomize.py) was extended,
    # not replaced: it still holds what Debian put there, then the image's line, once.
    custom = run(container, "cat /etc/python3.11/sitecustomize.py").stdout
    assert "apport_python_hook" in custom, custom
    assert custom.count("import aipcc_index_cert; aipcc_index_cert.python_hook()") == 1

SDIST_BACKEND = '''
import base64, hashlib, os, zipfile

def get_requires_for_build_wheel(config_settings=None):
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "needs_cu129_build-1.0-py3-none-any.whl"
    files = {"needs_cu129_build-1.0.dist-info/METADATA":
             b"Metadata-Version: 2.1\\nName: needs-cu129-build\\nVersion: 1.0\\n",
             "needs_cu129_build-1.0.dist-info/WHEEL":
             b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    record = ""
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record += "%s,sha256=%s,%d\\n" % (path, digest.decode(), len(data))
        record += "needs_cu129_build-1.0.dist-info/RECORD,,\\n"
        archive.writestr("needs_cu129_build-1.0.dist-info/RECORD", record)
    return name
'''


@pytest.fixture(scope="module")
def sdist(container: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real sdist whose build-system.requires pins CUDA 12.9's cudart (an extension built
    against another release), copied into the container."""
    import tarfile

    work = tmp_path_factory.mktemp("sdist")
    root = work / "needs_cu129_build-1.0"
    root.mkdir()
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["nvidia-cuda-runtime-cu12==12.9.79"]\n'
        'build-backend = "backend"\nbackend-path = ["."]\n'
        '[project]\nname = "needs-cu129-build"\nversion = "1.0"\n')
    (root / "backend.py").write_text(SDIST_BACKEND)
    (root / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: needs-cu129-build\n"
                                   "Version: 1.0\n")
    path = work / "needs_cu129_build-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.add(root, arcname=root.name)
    subprocess.run(["buildah", "copy", container, str(path), "/tmp/"], check=True,
                   capture_output=True, timeout=120)
    return f"/tmp/{path.name}"


def test_an_sdists_build_environment_keeps_to_the_image(container: str, sdist: str) -> None:
    # Debian 12's pip (23.0.1) passes PIP_CONSTRAINT to the build environment; pip 26.2
    # and later pass only PIP_BUILD_CONSTRAINT, which the image sets as well.
    new = run(container, "python3 -m venv --without-pip /opt/pip26 && pip --python "
                         f"/opt/pip26/bin/python install pip=={NEW_PIP}")
    assert new.returncode == 0, new.stdout
    for pip in ("pip", "/opt/pip26/bin/python -m pip"):
        version = run(container, f"{pip} --version").stdout
        refused = run(container, f"{pip} wheel --no-deps -w /tmp/built {sdist}")
        assert refused.returncode != 0, (version, refused.stdout)
        assert "nvidia-cuda-runtime-cu12" in refused.stdout and NAMED in refused.stdout, \
            (version, refused.stdout)
        assert run(container, "ls /tmp/built/needs_cu129*").returncode != 0
        # Overridden deliberately, the same build gets its CUDA 12.9 build requirement.
        built = run(container, f"{pip} wheel --no-deps -w /tmp/built {sdist}",
                    {"PIP_CONSTRAINT": "/dev/null", "PIP_BUILD_CONSTRAINT": "/dev/null"})
        assert built.returncode == 0, (version, built.stdout)
        assert run(container, "rm /tmp/built/needs_cu129_build-1.0-py3-none-any.whl"
                   ).returncode == 0
    assert "26.3" in run(container, "/opt/pip26/bin/python -m pip --version").stdout
    # uv builds the sdist only to install it (a dry run reads its PKG-INFO).
    uv = run(container, f"uv venv -q /tmp/sdist-env && uv pip install --python "
                        f"/tmp/sdist-env/bin/python {sdist}")
    assert uv.returncode == 1, uv.stdout
    assert "nvidia-cuda-runtime-cu12" in uv.stdout and NAMED in uv.stdout, uv.stdout
