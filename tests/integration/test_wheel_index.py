"""Versioned wheel indexes for real (issue 12): `aipcc-build index` publishes per-variant
indexes served over HTTP on 127.0.0.1; real pip and real uv inside an image built on the
Debian base install from the index the renderer configured, with no index flag; the
validator fails an image configured for another release's index; readers never see a
missing page or a mix of generations while the index is republished."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from aipcc_build.matrix import load
from aipcc_build.render import apply, render_all
from aipcc_build.wheel_indexes import simple_index
from aipcc_build.wheel_indexes.static_tree import TreeRequest, publish
from tests.support.artifacts import wheel
from tests.support.project import REPO
from tests.support.readers import read_while
from tests.support.wheels import make_wheel

pytestmark = pytest.mark.integration

UV_VERSION = "0.13.9"
CACHE = Path.home() / ".cache" / "aipcc-build"

MATRIX = textwrap.dedent("""\
    schema: 1
    product: {{name: wheeltest, version: "2.1"}}
    registry: localhost/aipcc-test-wheelindex
    wheel_index: "{pattern}"
    os:
      debian: {{from: {base}}}
    accelerators:
      cuda:
        variant: "cuda-{{os}}"
        versions: [{versions}]
      cpu: {{}}
    images:
      app: {{template: app.Containerfile.j2, os: [debian]}}
    """)
# Plain installs: the index is whatever the renderer configured. Debian's pip installs into
# the venv (no ensurepip), then uv from the same index installs into it too.
TEMPLATE = textwrap.dedent("""\
    FROM {{ os_from }}
    ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 UV_NO_CACHE=1
    RUN python3 -m venv --without-pip /opt/venv \\
     && pip --python /opt/venv/bin/python install nvidia-cuda-runtime-cu12 uv \\
     && /opt/venv/bin/uv pip install --python /opt/venv/bin/python nvidia-nvtx-cu12
    """)


def aipcc_build(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aipcc_build", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "PYTHONPATH": str(REPO),
                               "HOME": str(Path.home())})


@pytest.fixture(scope="session")
def uv_wheel() -> Path:
    """uv's wheel from PyPI, downloaded once into the cache (like the wheelhouse)."""
    directory = CACHE / "uv"
    found = sorted(directory.glob(f"uv-{UV_VERSION}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--only-binary=:all:", "-d", str(directory), f"uv=={UV_VERSION}"],
                       check=True, capture_output=True, timeout=600)
        found = sorted(directory.glob(f"uv-{UV_VERSION}-*.whl"))
    return found[0]


@dataclass
class Site:
    """An empty index root served on a free port, and a project whose matrix points at it."""

    root: Path
    url: str
    project: Path
    log: Path
    base: str  # the Debian base image

    def matrix(self, name: str, pattern: str, versions: str, cpu: bool = True) -> Path:
        path = self.project / "matrix" / f"{name}.yaml"
        path.parent.mkdir(exist_ok=True)
        text = MATRIX.format(pattern=self.url + pattern, base=self.base, versions=versions)
        path.write_text(text if cpu else text.replace("  cpu: {}\n", ""))
        return path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, debian_base: str) -> Iterator[Site]:
    work = tmp_path_factory.mktemp("wheel-index")
    root, project = work / "root", work / "project"
    root.mkdir()
    (project / "templates").mkdir(parents=True)
    (project / "templates" / "app.Containerfile.j2").write_text(TEMPLATE)
    pidfile, log = work / "server.pid", work / "requests.log"
    served = subprocess.run([str(REPO / "scripts" / "serve-dir"), str(root), "--pidfile",
                             str(pidfile), "--log", str(log)],
                            check=True, capture_output=True, text=True, timeout=60)
    try:
        yield Site(root, served.stdout.strip(), project, log, debian_base)
    finally:
        subprocess.run([str(REPO / "scripts" / "serve-dir"), "--stop", "--pidfile",
                        str(pidfile)], capture_output=True, timeout=60)


def build(containerfile: str, tag: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["buildah", "build", "--pull-never", "-t", tag, "-f", containerfile,
                           str(Path(containerfile).parent)],
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def images() -> Iterator[list[str]]:
    built: list[str] = []
    yield built
    if built:
        subprocess.run(["buildah", "rmi", "-f", *built], capture_output=True, timeout=300)


def test_pip_and_uv_in_a_cuda128_image_install_from_its_own_index(
        site: Site, wheelhouse: Path, uv_wheel: Path, images: list[str]) -> None:
    matrix_path = site.matrix("good", "{release}/{variant}/simple/", "{version: 12.9.1}, "
                              "{version: 12.8.1}")
    sources = {}
    for variant, version in (("cuda12.8-debian", "12.8.90"), ("cuda12.9-debian", "12.9.79")):
        directory = site.project / "wheels" / variant
        directory.mkdir(parents=True)
        for project in ("nvidia-cuda-runtime-cu12", "nvidia-nvtx-cu12"):
            found = wheel(wheelhouse, project, version)
            (directory / found.name).symlink_to(found)
        (directory / uv_wheel.name).symlink_to(uv_wheel)
        sources[variant] = f"{variant}={directory}"
    done = aipcc_build("--matrix", str(matrix_path), "index", str(site.root),
                       *sources.values(), cwd=site.project)
    assert done.returncode == 0, done.stderr
    # The 12.9 index offers 12.9.79 (and nothing of 12.8).
    page = urllib.request.urlopen(site.url + "2.1/cuda12.9-debian/simple/"
                                  "nvidia-cuda-runtime-cu12/", timeout=30).read().decode()
    assert [link.filename.split("-")[1] for link in simple_index.read_project_page(page)] == \
        ["12.9.79"]

    matrix = load(matrix_path)
    apply(matrix, render_all(matrix), check=False, remove_stale=False)
    containerfile = site.project / "containerfiles" / "app" / "cuda-12.8-debian" / "Containerfile"
    tag = f"localhost/aipcc-test-wheelindex/app-128-{uuid.uuid4().hex[:8]}"
    built = build(str(containerfile), tag)
    assert built.returncode == 0, built.stderr[-3000:]
    images.append(tag)
    log = built.stdout + built.stderr
    url128 = site.url + "2.1/cuda12.8-debian/simple/"
    assert f"Looking in indexes: {url128}" in log  # pip, from PIP_INDEX_URL / pip.conf
    assert "nvidia-cuda-runtime-cu12-12.8.90" in log.split("Successfully installed", 1)[1]
    assert "+ nvidia-nvtx-cu12==12.8.90" in log  # uv, from UV_DEFAULT_INDEX / uv.toml
    requests = site.log.read_text()
    assert "GET /2.1/cuda12.8-debian/simple/nvidia-nvtx-cu12/" in requests
    assert ".whl.metadata HTTP" in requests  # resolved from PEP 658 metadata
    assert "cuda12.9-debian/files" not in requests
    done = aipcc_build("validate", f"containers-storage:{tag}", cwd=site.project)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_image_rendered_with_the_129_index_in_a_128_cell_fails_validation(
        site: Site, images: list[str]) -> None:
    # A pattern that names the wrong release: what a hand-edited URL would do.
    matrix_path = site.matrix("wrong", "{release}/cuda12.9-{os}/simple/", "{version: 12.8.1}",
                              cpu=False)
    (site.project / "templates" / "app.Containerfile.j2").write_text("FROM {{ os_from }}\n")
    try:
        matrix = load(matrix_path)
        rendered = render_all(matrix)
        apply(matrix, rendered, check=False, remove_stale=False)
    finally:
        (site.project / "templates" / "app.Containerfile.j2").write_text(TEMPLATE)
    tag = f"localhost/aipcc-test-wheelindex/app-wrong-{uuid.uuid4().hex[:8]}"
    built = build(rendered[0].path, tag)
    assert built.returncode == 0, built.stderr[-3000:]
    images.append(tag)
    done = aipcc_build("validate", f"containers-storage:{tag}", cwd=site.project)
    assert done.returncode == 1, done.stdout + done.stderr
    url129 = site.url + "2.1/cuda12.9-debian/simple/"
    violations = [line for line in done.stdout.splitlines() if "violation" in line]
    for where in ("config:Env/PIP_INDEX_URL", "config:Env/UV_DEFAULT_INDEX", "/etc/pip.conf",
                  "/etc/uv/uv.toml"):
        assert any(where in line and url129 in line and "cuda 12.9 wheels, in a cuda 12.8"
                   in line for line in violations), (where, done.stdout)


def test_readers_never_see_a_missing_page_or_two_generations(
        site: Site, tmp_path: Path) -> None:
    """20 generations published while a reader loops over the pages: each generation holds
    lib 1.0 and marker N.0 only, so a page mixing generations would list two markers."""
    matrix = load(site.matrix("reader", "{release}/{variant}/simple/", "{version: 12.8.1}"))
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "lib", "1.0")
    request = TreeRequest(root=str(site.root), wheels={"cpu-debian": (str(wheels),)})
    base = site.url + "2.1/cpu-debian/simple/"
    publish(matrix, request)
    seen: list[int] = []
    problems: list[str] = []

    def fetch(url: str) -> bytes:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return bytes(answer.read())

    def check_page(project: str) -> list[simple_index.FileLink]:
        page_url = f"{base}{project}/"
        links = simple_index.read_project_page(fetch(page_url).decode())
        for link in links:
            data = fetch(page_url + link.url)
            if hashlib.sha256(data).hexdigest() != link.sha256:
                problems.append(f"{link.filename}: hash differs from its page")
            metadata = fetch(page_url + link.url + ".metadata")
            if hashlib.sha256(metadata).hexdigest() != link.metadata_sha256:
                problems.append(f"{link.filename}.metadata: hash differs from its page")
        return links

    def read_once() -> None:
        projects, generation = simple_index.read_root_page(fetch(base).decode())
        assert generation is not None
        if seen and generation < seen[-1]:
            problems.append(f"generation went back from {seen[-1]} to {generation}")
        seen.append(generation)
        for project in projects:
            links = check_page(project)
            if project == "marker" and len(links) != 1:
                problems.append(f"marker page lists {[x.filename for x in links]}")

    def publish_generations() -> None:
        for number in range(1, 21):
            for old in wheels.glob("marker-*.whl"):
                old.unlink()
            make_wheel(wheels, "marker", f"{number}.0")
            publish(matrix, request)
            time.sleep(0.02)

    read_while(read_once, publish_generations, problems, timeout=120)
    assert problems == []
    assert seen[-1] == 21 and len(set(seen)) > 2  # the reader ran across generations
    generations = site.root / "2.1" / ".generations" / "cpu-debian"
    assert sorted(p.name for p in generations.glob("g*[0-9]")) == [
        "g000018", "g000019", "g000020", "g000021"]  # the current one and 3 older
