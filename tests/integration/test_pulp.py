"""Wheel indexes on a real Pulp (issue 25): `aipcc-build index pulp+http://HOST` against
pulpcore + pulp_python started on 127.0.0.1 by tests/support/pulp.py (own PostgreSQL
cluster, cached virtualenv and migrated database). Real wheels (the demo's wheelhouse), real
pip and uv inside an image built on the Debian base from the demo's kind of template."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.matrix import load
from aipcc_build.render import apply, render_all
from aipcc_build.tools.retry import Retry
from aipcc_build.wheel_indexes import pulp as core
from aipcc_build.wheel_indexes import pulp_api, simple_index
from aipcc_build.wheel_indexes.pulp_config import PulpServer
from tests.integration.test_wheel_index import build, uv_wheel  # noqa: F401
from tests.support import pulp as pulp_server
from tests.support.artifacts import wheel
from tests.support.project import REPO
from tests.support.readers import read_while
from tests.support.wheels import make_wheel

pytestmark = pytest.mark.integration

# Plain installs: the index is whatever the renderer configured (pip first, then uv from
# the same index). The CPU index has no CUDA wheels: two small projects of its own.
TEMPLATE = textwrap.dedent("""\
    FROM {{ os_from }}
    ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 UV_NO_CACHE=1
    {% set first, second = ("nvidia-cuda-runtime-cu12", "nvidia-nvtx-cu12") if version
       else ("cpu-lib", "cpu-tool") %}
    RUN python3 -m venv --without-pip /opt/venv \\
     && pip --python /opt/venv/bin/python install {{ first }} uv \\
     && /opt/venv/bin/uv pip install --python /opt/venv/bin/python {{ second }}
    """)



@pytest.fixture(scope="module")
def pulp() -> Iterator[pulp_server.Pulp]:
    reason = pulp_server.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with pulp_server.running() as server:
        yield server


@dataclass
class Project:
    directory: Path
    matrix: Path
    env: dict[str, str]  # the CLI's environment: pulp-cli's config with the credentials
    server: PulpServer
    prefix: str

    def index(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "aipcc_build", "--matrix",
                               str(self.matrix), "index", *args], cwd=self.directory,
                              capture_output=True, text=True, timeout=900, env=self.env)

    def wheels(self, variant: str) -> Path:
        directory = self.directory / "wheels" / variant
        directory.mkdir(parents=True, exist_ok=True)
        return directory


def make_project(pulp: pulp_server.Pulp, work: Path, base: str) -> Project:
    """A project whose matrix's wheel_index is on this Pulp, below a prefix of its own (each
    test its own distributions), and pulp-cli's config file with the credentials."""
    prefix = f"t{uuid.uuid4().hex[:8]}"
    (work / "templates").mkdir(parents=True)
    (work / "templates" / "app.Containerfile.j2").write_text(TEMPLATE)
    matrix = work / "matrix" / "pulp.yaml"
    matrix.parent.mkdir()
    matrix.write_text(pulp_server.MATRIX.format(api=pulp.api, prefix=prefix, base=base))
    config = work / "config" / "pulp"
    config.mkdir(parents=True)
    (config / "cli.toml").write_text(f'[cli]\nbase_url = "{pulp.api}"\nusername = '
                                     f'"{pulp.user}"\npassword = "{pulp.password}"\n')
    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "PYTHONPATH": str(REPO),
           "HOME": str(Path.home()), "XDG_CONFIG_HOME": str(work / "config")}
    server = PulpServer(base_url=pulp.api, username=pulp.user, password=pulp.password)
    return Project(work, matrix, env, server, prefix)


def versions(pulp: pulp_server.Pulp, project: Project) -> dict[str, list[int]]:
    """Every repository of the project: its version numbers."""
    found = {}
    for repository in pulp.get(f"/pulp/api/v3/repositories/python/python/?name__startswith="
                               f"{project.prefix}/&limit=100")["results"]:
        numbers = pulp.get(repository["versions_href"] + "?limit=100")["results"]
        found[repository["name"]] = sorted(v["number"] for v in numbers)
    return found


def served(pulp: pulp_server.Pulp, project: Project) -> dict[str, str]:
    return {d["base_path"]: d["repository_version"] for d in pulp.get(
        f"/pulp/api/v3/distributions/python/pypi/?base_path__contains={project.prefix}/"
        "&limit=100")["results"]}


def page(url: str) -> list[simple_index.FileLink]:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return simple_index.read_project_page(answer.read().decode())


def test_three_variants_then_pip_and_uv_install_from_each(
        pulp: pulp_server.Pulp, tmp_path: Path, wheelhouse: Path, uv_wheel: Path,  # noqa: F811
        debian_base: str) -> None:
    project = make_project(pulp, tmp_path, debian_base)
    sources = []
    for variant, version in (("cuda12.8-debian", "12.8.90"), ("cuda12.9-debian", "12.9.79")):
        directory = project.wheels(variant)
        for name in ("nvidia-cuda-runtime-cu12", "nvidia-nvtx-cu12"):
            found = wheel(wheelhouse, name, version)
            (directory / found.name).symlink_to(found)
        (directory / uv_wheel.name).symlink_to(uv_wheel)
        sources.append(f"{variant}={directory}")
    cpu = project.wheels("cpu-debian")
    (cpu / uv_wheel.name).symlink_to(uv_wheel)
    make_wheel(cpu, "cpu-lib", "1.0")
    make_wheel(cpu, "cpu-tool", "1.0")
    sources.append(f"cpu-debian={cpu}")

    dry = project.index(f"pulp+{pulp.api}", *sources, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"+\tcuda12.8-debian\t{uv_wheel.name}" in dry.stdout
    assert versions(pulp, project) == {}  # a dry run made nothing
    done = project.index(f"pulp+{pulp.api}", *sources)
    assert done.returncode == 0, done.stderr
    assert pulp.password not in done.stdout + done.stderr
    assert versions(pulp, project) == {f"{project.prefix}/2.1/{v}": [0, 1] for v in (
        "cuda12.8-debian", "cuda12.9-debian", "cpu-debian")}
    url = f"{pulp.api}/pypi/{project.prefix}/2.1/cuda12.9-debian/simple/"
    assert [link.filename.split("-")[1] for link in page(url + "nvidia-cuda-runtime-cu12/")] \
        == ["12.9.79"]

    # A second identical run creates no version and switches nothing.
    before = served(pulp, project)
    again = project.index(f"pulp+{pulp.api}", *sources)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("\tunchanged\t") == 3
    assert served(pulp, project) == before
    assert all(v == [0, 1] for v in versions(pulp, project).values())

    # Real pip and uv in an image of each variant install that variant's versions.
    matrix = load(project.matrix)
    apply(matrix, render_all(matrix), check=False, remove_stale=False)
    tags = []
    try:
        for variant, pip_wants, uv_wants in (
                ("cuda-12.8-debian", "nvidia-cuda-runtime-cu12-12.8.90",
                 "+ nvidia-nvtx-cu12==12.8.90"),
                ("cuda-12.9-debian", "nvidia-cuda-runtime-cu12-12.9.79",
                 "+ nvidia-nvtx-cu12==12.9.79"),
                ("cpu-debian", "cpu-lib-1.0", "+ cpu-tool==1.0")):
            containerfile = tmp_path / "containerfiles" / "app" / variant / "Containerfile"
            tag = f"localhost/aipcc-test-pulp/app-{uuid.uuid4().hex[:8]}"
            built = build(str(containerfile), tag)
            assert built.returncode == 0, built.stderr[-3000:]
            tags.append(tag)
            log = built.stdout + built.stderr
            assert pip_wants in log.split("Successfully installed", 1)[1]
            assert uv_wants in log
    finally:
        if tags:
            subprocess.run(["buildah", "rmi", "-f", *tags], capture_output=True, timeout=300)


def test_refusal_rollback_keep_and_errors(pulp: pulp_server.Pulp, tmp_path: Path,
                                          wheelhouse: Path, cli: Any) -> None:
    project = make_project(pulp, tmp_path, "localhost/unused")
    w128, cpu = project.wheels("cuda12.8-debian"), project.wheels("cpu-debian")
    runtime = wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.8.90")
    (w128 / runtime.name).symlink_to(runtime)
    make_wheel(cpu, "lib", "1.0")
    target = f"pulp+{pulp.api}"
    args = (f"cuda12.8-debian={w128}", f"cpu-debian={cpu}")
    assert project.index(target, *args).returncode == 0
    state = (versions(pulp, project), served(pulp, project))

    # lib 1.0 rebuilt with other bytes under its published file name (issue 38): refused
    # in one line, nothing uploaded or switched.
    original = (cpu / "lib-1.0-py3-none-any.whl").read_bytes()
    make_wheel(cpu, "lib", "1.0", files={"lib/rebuilt.py": b"x = 1\n"})
    rebuilt = project.index(target, *args)
    assert rebuilt.returncode == 1, rebuilt.stderr
    said = [line for line in rebuilt.stderr.splitlines()
            if "lib-1.0-py3-none-any.whl is already published with other bytes" in line]
    assert len(said) == 1 and said[0].startswith("refused: cpu-debian: "), rebuilt.stderr
    assert (versions(pulp, project), served(pulp, project)) == state
    (cpu / "lib-1.0-py3-none-any.whl").write_bytes(original)

    # A 12.9 runtime in the 12.8 index: refused, nothing sent, nothing changed.
    wrong = wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.9.79")
    make_wheel(cpu, "lib", "2.0")
    (w128 / wrong.name).symlink_to(wrong)
    refused = project.index(target, *args)
    assert refused.returncode == 1
    assert "refused: cuda12.8-debian" in refused.stderr and "nothing was published" in \
        refused.stderr
    assert (versions(pulp, project), served(pulp, project)) == state
    (w128 / wrong.name).unlink()

    # lib 2.0 added: version 2 served; rollback serves version 1 (lib 1.0 only) again.
    cpu_url = f"{pulp.api}/pypi/{project.prefix}/2.1/cpu-debian/simple/lib/"
    assert project.index(target, *args).returncode == 0
    assert sorted(link.filename for link in page(cpu_url)) == [
        "lib-1.0-py3-none-any.whl", "lib-2.0-py3-none-any.whl"]
    back = project.index(target, "--rollback", "cpu-debian")
    assert back.returncode == 0, back.stderr
    assert "serves version 1 again (was version 2)" in back.stderr
    assert [link.filename for link in page(cpu_url)] == ["lib-1.0-py3-none-any.whl"]
    # Publishing lib 1.0 and 2.0 again serves version 2 again: the newest version already
    # holds exactly that, no third one is made.
    again = project.index(target, *args)
    assert again.returncode == 0 and "\tpublished\tversion 2\t" in again.stdout
    assert len(page(cpu_url)) == 2
    # --keep 1: versions 1 and 2 before 3 -> only 2 stays (and 0, the empty start).
    (cpu / "lib-1.0-py3-none-any.whl").unlink()
    done = project.index(target, *args, "--keep", "1")
    assert done.returncode == 0, done.stderr
    assert versions(pulp, project)[f"{project.prefix}/2.1/cpu-debian"] == [0, 2, 3]

    # Wrong credentials, no server: one line, no traceback, no password, nothing switched.
    state = served(pulp, project)
    config = tmp_path / "config" / "pulp" / "cli.toml"
    config.write_text(config.read_text().replace(pulp.password, "wrong-password"))
    make_wheel(cpu, "lib", "3.0")
    denied = project.index(target, *args)
    assert denied.returncode == 2, denied.stderr
    assert "refused the credentials" in denied.stderr and "Traceback" not in denied.stderr
    assert "wrong-password" not in denied.stderr + denied.stdout
    assert len(denied.stderr.strip().splitlines()) == 1
    # In-process, the client tries twice (its default five waited 15 s for nothing).
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project.directory)
        patch.setenv("XDG_CONFIG_HOME", project.env["XDG_CONFIG_HOME"])
        patch.setattr(pulp_api, "Client", partial(pulp_api.Client, retry=Retry(attempts=2)))
        gone = cli("--matrix", str(project.matrix), "index",
                   f"pulp+http://127.0.0.1:{pulp_server.free_port()}", *args)
    assert gone.code == 1 and "cannot reach Pulp" in gone.err, gone.err
    assert "Traceback" not in gone.err
    assert served(pulp, project) == state


def test_readers_never_see_a_missing_page_or_two_generations(
        pulp: pulp_server.Pulp, tmp_path: Path) -> None:
    """6 republishes while a reader loops over the pages and downloads what they list:
    each generation holds lib 1.0 and marker N.0, so a page mixing generations would list
    two markers (or none). Six switches (ten took 10 s more) are enough to read across
    versions and to prune past the retention."""
    project = make_project(pulp, tmp_path, "localhost/unused")
    wheels = project.wheels("cpu-debian")
    make_wheel(wheels, "lib", "1.0")
    make_wheel(wheels, "marker", "0.0")
    matrix = load(project.matrix)
    request = core.PulpRequest(server=project.server, wheels={"cpu-debian": (str(wheels),)})
    core.publish(matrix, request)
    base = f"{pulp.api}/pypi/{project.prefix}/2.1/cpu-debian/simple/"
    problems: list[str] = []
    raced: list[str] = []
    markers: list[str] = []

    def fetch(url: str) -> bytes:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return bytes(answer.read())

    def read_once() -> None:
        projects, _ = simple_index.read_root_page(fetch(base).decode())
        if sorted(projects) != ["lib", "marker"]:
            problems.append(f"root page lists {projects}")
        for name in projects:
            links = simple_index.read_project_page(fetch(f"{base}{name}/").decode())
            if len(links) != 1:
                problems.append(f"{name} page lists {[x.filename for x in links]}")
            for link in links:
                if name == "marker":
                    markers.append(link.filename)
                try:
                    data = fetch(urllib.parse.urljoin(f"{base}{name}/", link.url))
                except urllib.error.HTTPError as exc:
                    now = [x.filename for x in simple_index.read_project_page(
                        fetch(f"{base}{name}/").decode())]
                    if exc.code != 404 or link.filename in now:
                        problems.append(f"{link.filename}: {exc.code} while listed")
                    else:  # removed by the switch between page and download
                        raced.append(link.filename)
                    continue
                if hashlib.sha256(data).hexdigest() != link.sha256:
                    problems.append(f"{link.filename}: hash differs from its page")

    def republish() -> None:
        for number in range(1, 7):
            for old in wheels.glob("marker-*.whl"):
                old.unlink()
            make_wheel(wheels, "marker", f"{number}.0")
            result = core.publish(matrix, request)
            assert result.variants[0].generation == number + 1

    read_while(read_once, republish, problems, timeout=300)
    assert problems == []
    assert markers[-1] == "marker-6.0-py3-none-any.whl"
    assert len(set(markers)) > 2, markers  # the reader ran across versions
    # Pulp's content app resolves a file through the version served now: a page read just
    # before a switch may link a file the switch removed. Counted, shown, not hidden.
    print(f"downloads that raced a switch: {len(raced)} of {len(markers)}")
    # Retention: the served version and 3 older ones (and version 0).
    assert versions(pulp, project)[f"{project.prefix}/2.1/cpu-debian"] == [0, 4, 5, 6, 7]


def test_mirror_a_pulp_distribution_to_a_static_tree_and_to_another_pulp(
        pulp: pulp_server.Pulp, tmp_path: Path, wheelhouse: Path) -> None:
    """A disconnected site's mirror: `aipcc-build index` reads the Pulp distribution as its
    source (VARIANT=URL), judging every wheel on the way in."""
    source = make_project(pulp, tmp_path / "source", "localhost/unused")
    w128 = source.wheels("cuda12.8-debian")
    for name in ("nvidia-cuda-runtime-cu12", "nvidia-nvtx-cu12"):
        found = wheel(wheelhouse, name, "12.8.90")
        (w128 / found.name).symlink_to(found)
    make_wheel(w128, "lib", "1.0")
    assert source.index(f"pulp+{pulp.api}", f"cuda12.8-debian={w128}").returncode == 0
    url = f"{pulp.api}/pypi/{source.prefix}/2.1/cuda12.8-debian/simple/"

    # Pulp -> static tree: the mirror's own matrix lays it out.
    mirror = make_project(pulp, tmp_path / "mirror", "localhost/unused")
    mirror.matrix.write_text(mirror.matrix.read_text().replace(
        f"{pulp.api}/pypi/{mirror.prefix}/", "https://mirror.example/rhoai/"))
    root = tmp_path / "tree"
    done = mirror.index(str(root), f"cuda12.8-debian={url}")
    assert done.returncode == 0, done.stderr
    pages = root / "2.1" / "cuda12.8-debian" / "simple"
    assert sorted(p.name for p in pages.iterdir() if p.is_dir()) == [
        "lib", "nvidia-cuda-runtime-cu12", "nvidia-nvtx-cu12"]
    served = {link.filename: link.sha256 for name in ("lib", "nvidia-nvtx-cu12")
              for link in page(f"{url}{name}/")}
    mirrored = {link.filename: link.sha256 for name in ("lib", "nvidia-nvtx-cu12")
                for link in simple_index.read_project_page(
                    (pages / name / "index.html").read_text())}
    assert mirrored == served

    # Pulp -> Pulp: the same source into another prefix (another Pulp's distributions).
    other = make_project(pulp, tmp_path / "other", "localhost/unused")
    done = other.index(f"pulp+{pulp.api}", f"cuda12.8-debian={url}")
    assert done.returncode == 0, done.stderr
    copy = f"{pulp.api}/pypi/{other.prefix}/2.1/cuda12.8-debian/simple/"
    assert {x.filename: x.sha256 for x in page(copy + "lib/")} == \
        {x.filename: x.sha256 for x in page(url + "lib/")}

    # Pulp -> Pulp with Pulp's own sync (pulp-cli, as the how-to says): a remote on the
    # distribution, downloaded at once (policy immediate) for a disconnected site.
    base = f"{source.prefix}/2.1/cuda12.8-debian"
    for args in (("remote", "create", "--name", f"{base}-remote", "--url",
                  f"{pulp.api}/pypi/{base}/", "--policy", "immediate", "--includes",
                  '["lib", "nvidia-nvtx-cu12", "nvidia-cuda-runtime-cu12"]'),
                 ("repository", "create", "--name", f"{base}-synced", "--remote",
                  f"{base}-remote"),
                 ("repository", "sync", "--name", f"{base}-synced")):
        synced = pulp.cli("python", *args)
        assert synced.returncode == 0, synced.stderr
    listed = pulp.cli("python", "repository", "content", "list", "--repository",
                      f"{base}-synced")
    runtime = wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.8.90")
    assert {x["filename"]: x["sha256"] for x in json.loads(listed.stdout)} == {
        **served, runtime.name: hashlib.sha256(runtime.read_bytes()).hexdigest()}

    # A wheel someone put into the source by hand (a 12.9 runtime in the 12.8 index) is
    # refused on the way in: neither mirror changes.
    wrong = wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.9.79")
    from aipcc_build.wheel_indexes.pulp_api import Client

    with Client(source.server) as api:
        unit = api.upload(wrong, wrong.name)
        distribution = api.get("distributions/python/pypi/",
                               base_path=f"{source.prefix}/2.1/cuda12.8-debian")["results"][0]
        repository = distribution["repository_version"].split("versions/")[0]
        task = api.run("POST", repository + "modify/", {
            "add_content_units": [unit], "base_version": distribution["repository_version"]})
        api.run("PATCH", distribution["pulp_href"], {
            "repository_version": task["created_resources"][0]})
    before = sorted(str(p) for p in root.rglob("*"))
    state = versions(pulp, other)
    refused = mirror.index(str(root), f"cuda12.8-debian={url}")
    assert refused.returncode == 1 and "nvidia_cuda_runtime_cu12-12.9.79" in refused.stderr
    assert sorted(str(p) for p in root.rglob("*")) == before
    refused = other.index(f"pulp+{pulp.api}", f"cuda12.8-debian={url}")
    assert refused.returncode == 1 and "refused: cuda12.8-debian" in refused.stderr
    assert versions(pulp, other) == state
    assert not list(Path(tempfile.gettempdir()).glob("aipcc-index-source-*"))


def test_a_publish_killed_midway_switches_nothing_and_the_next_run_finishes(
        pulp: pulp_server.Pulp, tmp_path: Path) -> None:
    project = make_project(pulp, tmp_path, "localhost/unused")
    cpu, w128 = project.wheels("cpu-debian"), project.wheels("cuda12.8-debian")
    for number in range(60):
        make_wheel(cpu, f"{project.prefix}p{number}", "1.0",
                   files={"p/x.py": os.urandom(4096)})
    make_wheel(w128, "lib", "1.0")
    args = [sys.executable, "-m", "aipcc_build", "--matrix", str(project.matrix), "index",
            f"pulp+{pulp.api}", f"cpu-debian={cpu}", f"cuda12.8-debian={w128}"]
    process = subprocess.Popen(args, cwd=project.directory, env=project.env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Killed once the first uploads are in (before all 60 are).
    deadline = time.monotonic() + 120
    while not pulp.get(f"/pulp/api/v3/content/python/packages/?filename__contains="
                       f"{project.prefix}p&limit=1")["count"] and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    assert all(v is None for v in served(pulp, project).values())  # nothing switched
    done = project.index(f"pulp+{pulp.api}", f"cpu-debian={cpu}", f"cuda12.8-debian={w128}")
    assert done.returncode == 0, done.stderr
    assert versions(pulp, project) == {f"{project.prefix}/2.1/cpu-debian": [0, 1],
                                       f"{project.prefix}/2.1/cuda12.8-debian": [0, 1]}
    url = f"{pulp.api}/pypi/{project.prefix}/2.1/cpu-debian/simple/{project.prefix}p59/"
    assert [link.filename for link in page(url)] == [f"{project.prefix}p59-1.0-py3-none-any.whl"]


# ---- issue 30: what a publish reports is what Pulp serves --------------------------------


def _in_process(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process CLI with the project's pulp-cli configuration (the credentials)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", project.env["XDG_CONFIG_HOME"])
    monkeypatch.chdir(project.directory)


def _distribution(pulp: pulp_server.Pulp, base_path: str) -> dict:  # type: ignore[type-arg]
    found = pulp.get(f"/pulp/api/v3/distributions/python/pypi/?base_path={base_path}")
    return dict(found["results"][0])


def test_rollback_goes_to_what_was_served_before_and_refuses_a_deleted_one(
        pulp: pulp_server.Pulp, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """publish A, B, roll back (A), publish C, roll back: A again, never the B the operator
    had rolled back (the history is the distribution's label, readable in Pulp)."""
    project = make_project(pulp, tmp_path, "localhost/unused")
    _in_process(project, monkeypatch)
    cpu = project.wheels("cpu-debian")
    target = f"pulp+{pulp.api}"
    base_path = f"{project.prefix}/2.1/cpu-debian"
    url = f"{pulp.api}/pypi/{base_path}/simple/lib/"

    def publish(version: str, *extra: str) -> None:
        for old in cpu.glob("lib-*.whl"):
            old.unlink()
        make_wheel(cpu, "lib", version)
        done = cli("--matrix", str(project.matrix), "index", target, f"cpu-debian={cpu}",
                   *extra)
        assert done.code == 0, done.err

    def rollback() -> Any:
        return cli("--matrix", str(project.matrix), "index", target, "--rollback",
                   "cpu-debian")

    publish("1.0")  # A: version 1
    publish("2.0")  # B: version 2
    assert _distribution(pulp, base_path)["pulp_labels"]["aipcc_build_history"] == "1"
    back = rollback()
    assert back.code == 0 and "serves version 1 again (was version 2)" in back.err
    publish("3.0")  # C: version 3, made from A
    back = rollback()
    assert back.code == 0 and "serves version 1 again (was version 3)" in back.err, back.err
    assert [link.filename for link in page(url)] == ["lib-1.0-py3-none-any.whl"]
    # Nothing served before A: refused, nothing changed.
    first = rollback()
    assert first.code == 1 and "no version served before version 1" in first.err
    # D with nothing older kept: A (version 1) is deleted, so is the way back.
    publish("4.0", "--keep", "0")
    gone = rollback()
    assert gone.code == 1 and "version 1, served before version 4, is gone" in gone.err, \
        gone.err
    assert "Traceback" not in gone.err
    assert [link.filename for link in page(url)] == ["lib-4.0-py3-none-any.whl"]
    repository = pulp.get(f"/pulp/api/v3/repositories/python/python/?name={base_path}")
    assert repository["results"][0]["allow_package_substitution"] is False


def test_a_publisher_that_lost_the_race_fails_naming_what_is_served(
        pulp: pulp_server.Pulp, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two real publishers on one Pulp: the second one runs, whole, right after the first
    switched; the first reads the distribution again and reports the other's version."""
    from aipcc_build.wheel_indexes import pulp_api

    project = make_project(pulp, tmp_path, "localhost/unused")
    _in_process(project, monkeypatch)
    target = f"pulp+{pulp.api}"
    mine, theirs = project.wheels("mine"), project.wheels("theirs")
    make_wheel(mine, "mine", "1.0")
    make_wheel(theirs, "theirs", "1.0")
    raced: list[subprocess.CompletedProcess[str]] = []

    class Racing(pulp_api.Client):
        def run(self, method: str, path: str, payload: Any = None) -> dict[str, Any]:
            done = super().run(method, path, payload)
            if method in ("POST", "PATCH") and "distributions/" in path and not raced:
                raced.append(project.index(target, f"cpu-debian={theirs}"))
            return done

    monkeypatch.setattr(pulp_api, "Client", Racing)
    lost = cli("--matrix", str(project.matrix), "index", target, f"cpu-debian={mine}",
               "--json")
    assert raced and raced[0].returncode == 0, raced[0].stderr
    assert lost.code == 1, lost
    variant = json.loads(lost.out)["variants"][0]
    assert (variant["variant"], variant["switched"], variant["generation"],
            variant["served"]) == ("cpu-debian", True, 1, 2)
    assert "another publisher switched it meanwhile: it serves version 2" in lost.err
    assert "index: cpu-debian:" in lost.err
    base = f"{pulp.api}/pypi/{project.prefix}/2.1/cpu-debian/simple/"
    assert simple_index.read_root_page(urllib.request.urlopen(base, timeout=30).read()
                                       .decode())[0] == ["theirs"]


def test_a_switch_failing_midway_reports_every_variant(
        pulp: pulp_server.Pulp, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy in front of the real Pulp answers 502 to every switch of one distribution:
    the run exits 1, --json still prints, each variant says switched or not by name."""
    from aipcc_build.tools.retry import Retry
    from aipcc_build.wheel_indexes import pulp_api
    from tests.support.publish import FlakyProxy

    project = make_project(pulp, tmp_path, "localhost/unused")
    cpu, w128 = project.wheels("cpu-debian"), project.wheels("cuda12.8-debian")
    make_wheel(cpu, "lib", "1.0")
    make_wheel(w128, "lib", "1.0")
    args = (f"cpu-debian={cpu}", f"cuda12.8-debian={w128}")
    assert project.index(f"pulp+{pulp.api}", *args).returncode == 0
    make_wheel(cpu, "lib", "2.0")
    make_wheel(w128, "lib", "2.0")
    cuda = _distribution(pulp, f"{project.prefix}/2.1/cuda12.8-debian")["pulp_href"]
    monkeypatch.setenv("PULP_USERNAME", pulp.user)
    monkeypatch.setenv("PULP_PASSWORD", pulp.password)
    monkeypatch.setattr(pulp_api, "Retry", lambda: Retry(attempts=2, first=0.01))
    monkeypatch.chdir(project.directory)
    upstream = pulp.api.split("://", 1)[1]
    with FlakyProxy(upstream, failures=-1, status=502, methods=("PATCH",), path=cuda) as proxy:
        done = cli("--matrix", str(project.matrix), "index", f"pulp+http://{proxy.host}",
                   *args, "--json")
    assert done.code == 1, done
    assert "Traceback" not in done.err and pulp.password not in done.out + done.err
    found = {v["variant"]: v for v in json.loads(done.out)["variants"]}
    assert (found["cpu-debian"]["switched"], found["cpu-debian"]["served"],
            found["cpu-debian"]["error"]) == (True, 2, None)
    assert (found["cuda12.8-debian"]["switched"], found["cuda12.8-debian"]["served"],
            found["cuda12.8-debian"]["state"]) == (False, 1, "not-switched")
    assert "502" in found["cuda12.8-debian"]["error"]
    assert "index: cuda12.8-debian: not switched to version 2: switching failed" in done.err
    assert served(pulp, project) == {
        f"{project.prefix}/2.1/cpu-debian": f"{served_repository(pulp, project, 'cpu')}2/",
        f"{project.prefix}/2.1/cuda12.8-debian":
            f"{served_repository(pulp, project, 'cuda12.8')}1/"}


def served_repository(pulp: pulp_server.Pulp, project: Project, variant: str) -> str:
    found = pulp.get(f"/pulp/api/v3/repositories/python/python/?name={project.prefix}/2.1/"
                     f"{variant}-debian")
    return str(found["results"][0]["versions_href"])
