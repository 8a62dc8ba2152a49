"""The CI recipes of docs/ci/ run on real engines (issue 15): the GitLab parent pipeline
as written plans the demo, its child pipeline builds it on gitlab-ci-local (shell
executor), and the GitHub workflow as written runs under act, each from a clean clone of
this repository, against a registry on 127.0.0.1. The engines come from scripts/ci-tools
(npm, PyPI; cached); the jobs' `aipcc-build` is this checkout's code. The jobs' fetch
(scripts/demo-wheel-index-serve) reuses the demo's wheel indexes the `wheel_index` fixture
serves. Plans are made for this host's platform: an emulated arm64 build takes minutes.
Tekton has no engine here: the steps the plain PipelineRun gives its CI-image tasks (a
platform's validation, the join into a manifest list) run as written on images pushed as
its buildah tasks would push them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aipcc_build.matrix.platforms import host_platform
from tests.support.layers import buildah_json
from tests.support.project import git_repository, shipped_project
from tests.support.registry import Registry

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PLAN_JOB_FILE = "docs/ci/gitlab-ci.yml"
WORKFLOW = "docs/ci/github-actions.yml"
# act fetches every remote action before a job starts: the one the workflow cannot do
# without offline is replaced by a stand-in that keeps the files it would upload.
UPLOAD_STAND_IN = REPO / "tests" / "data" / "act" / "upload-artifact"
# What the validator says of the CUDA 12.8 image holding NVTX from 12.9.
VERDICT = "violation: cuda 12.9: nvtx-cu12 12.9.79 (dist-info)"
# A plan's --platform applies to every job it emits.
HOST = f"--platform {host_platform()}"
DEMO_KEYS = [f"{kind}/{name}" for kind in ("base", "runtime")
             for name in ("cuda-12.9-debian", "cuda-12.8-debian", "cpu-debian")]


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment the engines run in: gitlab-ci-local, act, actionlint and an
    `aipcc-build` command on PATH."""
    out = subprocess.run([str(REPO / "scripts" / "ci-tools")], capture_output=True, text=True,
                         timeout=1800)
    if out.returncode != 0:
        pytest.fail(f"scripts/ci-tools failed: {out.stderr.strip()}")
    tools = re.search(r"AIPCC_CI_TOOLS=(\S+)", out.stdout)
    assert tools, out.stdout
    bin_dir = tmp_path_factory.mktemp("bin")
    command = bin_dir / "aipcc-build"
    command.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m aipcc_build "$@"\n')
    command.chmod(0o755)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CI", "GITHUB_", "GITLAB_", "PYTEST_"))}
    env["PATH"] = f"{bin_dir}:{tools.group(1)}/bin:{env['PATH']}"
    env["BUILDAH_ISOLATION"] = "chroot"
    return env


@pytest.fixture(scope="module")
def ci_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """One registry for the module; the images the jobs tagged for it are removed after."""
    registry = Registry(tmp_path_factory.mktemp("ci-registry"))
    registry.start()
    try:
        yield registry
    finally:
        registry.stop()
        ours = [image["id"] for image in buildah_json("images")
                if any(name.startswith(registry.host + "/") for name in image.get("names") or [])]
        if ours:
            subprocess.run(["buildah", "rmi", "-f", *ours], capture_output=True, timeout=300)


def test_ci_tools_answers_every_time() -> None:
    # Its version check once cut a pipeline with `head` under pipefail: about one run in
    # seven failed on SIGPIPE. Fifteen runs catch that nine times in ten.
    for _ in range(15):
        out = subprocess.run([str(REPO / "scripts" / "ci-tools")], capture_output=True,
                             text=True, timeout=1800)
        assert out.returncode == 0, out.stderr


def clean_clone(root: Path) -> Path:
    # Shallow, as CI runners fetch: gitlab-ci-local copies the checkout, .git and all, into
    # every job.
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{REPO}", str(root)],
                   check=True, timeout=120)
    return root


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory, debian_base: str,
          wheel_index: Any) -> Path:
    return clean_clone(tmp_path_factory.mktemp("gitlab") / "clone")


def run(env: dict[str, str], cwd: Path, *argv: str, timeout: float = 900
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def gitlab_ci_local(env: dict[str, str], cwd: Path, *args: str
                    ) -> subprocess.CompletedProcess[str]:
    return run(env, cwd, "gitlab-ci-local", "--force-shell-executor", "--shell-isolation",
               *args)


def plan_child_pipeline(env: dict[str, str], clone: Path, plan_args: str) -> Path:
    """The parent pipeline's plan job, as docs/ci/gitlab-ci.yml writes it."""
    done = gitlab_ci_local(env, clone, "--file", PLAN_JOB_FILE,
                           "--variable", "AIPCC_BUILD_MATRIX=matrix/demo.yaml",
                           "--variable", f"AIPCC_PLAN_ARGS={plan_args}", "plan")
    assert done.returncode == 0, done.stdout + done.stderr
    child = clone / ".gitlab-ci-local" / "artifacts" / "plan" / "child-pipeline.yml"
    # gitlab-ci-local cannot trigger a child pipeline (and a child's failure would not fail
    # its parent there): the child file runs on its own, as GitLab would run it.
    shutil.copy(child, clone / "child-pipeline.yml")
    return clone / "child-pipeline.yml"


def skopeo_raw(reference: str) -> dict:
    out = subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--raw",
                          f"docker://{reference}"], check=True, capture_output=True, text=True,
                         timeout=120)
    return json.loads(out.stdout)


def layers(reference: str) -> list[str]:
    return [layer["digest"] for layer in skopeo_raw(reference)["layers"]]


def test_gitlab_child_pipeline_builds_the_demo_from_a_clean_clone(
        engines: dict[str, str], ci_registry: Registry, clone: Path) -> None:
    namespace = f"{ci_registry.host}/gitlab"
    plan_child_pipeline(env=engines, clone=clone,
                        plan_args=f"--registry {namespace} --no-tls-verify --build-id 1 "
                                  f"{HOST}")
    done = gitlab_ci_local(engines, clone, "--file", "child-pipeline.yml")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    # Every job ran the matrix's ci.fetch, which found the indexes answering.
    assert (done.stdout + done.stderr).count("reusing the wheel indexes") >= len(DEMO_KEYS)
    for key in DEMO_KEYS:
        assert re.search(rf"PASS\s+build:{re.escape(key)}", done.stdout), key
        assert skopeo_raw(f"{namespace}/{key}:1.0-1")["layers"]
    # The dependent kind was built FROM the parent its own pipeline pushed.
    for name in ("cuda-12.9-debian", "cuda-12.8-debian", "cpu-debian"):
        parent = layers(f"{namespace}/base/{name}:1.0-1")
        child = layers(f"{namespace}/runtime/{name}:1.0-1")
        assert child[:len(parent)] == parent and len(child) > len(parent)


@pytest.fixture(scope="module")
def mixed_clone(tmp_path_factory: pytest.TempPathFactory, engines: dict[str, str],
                debian_base: str, wheel_index: Any) -> Path:
    """A clone whose CUDA 12.8 base image also installs NVTX from CUDA 12.9, pointing pip
    at the 12.9 index (its own offers only 12.8 wheels) and overriding the image's
    constraints (which refuse it otherwise): rendered and committed, as a contributor's
    mistake would be."""
    clone = clean_clone(tmp_path_factory.mktemp("mixed") / "clone")
    template = clone / "templates" / "demo" / "base.Containerfile.j2"
    template.write_text(template.read_text() + (
        '{% if version == "12.8.1" %}\n'
        "RUN PIP_CONSTRAINT=/dev/null pip install -U --index-url "
        f"{wheel_index.urls['cuda12.9-debian']} "
        "nvidia-nvtx-cu12==12.9.79\n"
        "{% endif %}\n"))
    rendered = run(engines, clone, "aipcc-build", "--matrix", "matrix/demo.yaml", "render")
    assert rendered.returncode == 0, rendered.stderr
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam",
                    "mix"], cwd=clone, check=True, timeout=60)
    return clone


def test_gitlab_job_of_a_mixed_image_fails_and_its_junit_names_the_package(
        engines: dict[str, str], ci_registry: Registry, mixed_clone: Path) -> None:
    namespace = f"{ci_registry.host}/gitlab-mixed"
    plan_child_pipeline(env=engines, clone=mixed_clone,
                        plan_args=f"--registry {namespace} --no-tls-verify --build-id 2 "
                                  f"--only base/cuda-12.8-debian {HOST}")
    done = gitlab_ci_local(engines, mixed_clone, "--file", "child-pipeline.yml")
    assert done.returncode != 0
    assert re.search(r"FAIL\s+build:base/cuda-12.8-debian", done.stdout), done.stdout[-3000:]
    # The job log (the job's stdout and stderr) shows the validator's verdict.
    assert f"validation failed: {VERDICT}" in done.stdout + done.stderr
    junit = next((mixed_clone / ".gitlab-ci-local" / "artifacts").rglob("junit.xml"))
    failure = ET.parse(junit).getroot().find(".//failure")
    assert failure is not None
    assert VERDICT in failure.get("message", "")
    assert "nvidia_nvtx_cu12-12.9.79.dist-info" in failure.get("message", "")
    nothing = subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--raw",
                              f"docker://{namespace}/base/cuda-12.8-debian:1.0-2"],
                             capture_output=True, text=True, timeout=120)
    assert nothing.returncode != 0  # validated before the push: never pushed


def test_github_workflow_passes_actionlint(engines: dict[str, str], tmp_path: Path) -> None:
    done = run(engines, REPO, "actionlint", WORKFLOW, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text((REPO / WORKFLOW).read_text().replace("needs: plan\n", "needs: plann\n"))
    assert run(engines, REPO, "actionlint", str(broken), timeout=120).returncode == 1


def act(engines: dict[str, str], clone: Path, artifacts: Path, plan_args: str,
        *event: str) -> subprocess.CompletedProcess[str]:
    """The workflow under act: on workflow_dispatch, or on EVENT (`pull_request`, `-e`,
    its payload file)."""
    return run({**engines, "AIPCC_ACT_ARTIFACTS": str(artifacts)}, clone,
               "act", *(event or ("workflow_dispatch",)), "-W", WORKFLOW,
               "-P", "ubuntu-latest=-self-hosted",
               "--local-repository", f"actions/upload-artifact@v7={UPLOAD_STAND_IN}",
               "--var", "AIPCC_BUILD_INSTALLED=true",
               "--var", "AIPCC_BUILD_MATRIX=matrix/demo.yaml",
               "--var", f"AIPCC_PLAN_ARGS={plan_args}")


def test_github_workflow_runs_end_to_end_under_act(
        engines: dict[str, str], ci_registry: Registry, clone: Path, tmp_path: Path) -> None:
    namespace = f"{ci_registry.host}/github"
    done = act(engines, clone, tmp_path / "artifacts",
               f"--registry {namespace} --no-tls-verify --build-id 3 --accelerator cpu "
               f"{HOST}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    parent = layers(f"{namespace}/base/cpu-debian:1.0-3")
    child = layers(f"{namespace}/runtime/cpu-debian:1.0-3")
    assert child[:len(parent)] == parent
    for name in ("base-cpu-debian", "runtime-cpu-debian"):
        kept = tmp_path / "artifacts" / name
        assert {p.name for p in kept.iterdir()} >= {"build-report.json", "junit.xml", "logs"}


def test_github_pull_request_from_a_fork_builds_and_validates_without_pushing(
        engines: dict[str, str], ci_registry: Registry, clone: Path, tmp_path: Path) -> None:
    namespace = f"{ci_registry.host}/github-fork"
    head = "0123456789abcdef0123456789abcdef01234567"
    payload = tmp_path / "event.json"
    payload.write_text(json.dumps({"pull_request": {
        "number": 7, "head": {"sha": head, "repo": {"full_name": "someone/fork"}},
        "base": {"sha": ""}}}))
    done = act(engines, clone, tmp_path / "artifacts",
               f"--registry {namespace} --no-tls-verify --accelerator cpu {HOST}",
               "pull_request", "-e", str(payload))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    kept = tmp_path / "artifacts" / "base-cpu-debian"
    junit = (kept / "junit.xml").read_text()
    assert 'tests="1"' in junit and 'failures="0"' in junit and 'skipped="0"' in junit
    pushed = subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--raw",
                             f"docker://{namespace}/base/cpu-debian:1.0-on-pr-{head}"],
                            capture_output=True, text=True, timeout=120)
    assert pushed.returncode != 0  # nothing pushed
    assert not (tmp_path / "artifacts" / "runtime-cpu-debian").exists()  # no parent to use


def test_github_failed_image_skips_only_its_dependents(
        engines: dict[str, str], ci_registry: Registry, mixed_clone: Path,
        tmp_path: Path) -> None:
    namespace = f"{ci_registry.host}/github-mixed"
    done = act(engines, mixed_clone, tmp_path / "artifacts",
               f"--registry {namespace} --no-tls-verify --build-id 4 --accelerator cuda "
               f"{HOST}")
    assert done.returncode != 0  # the run fails: one image did
    assert skopeo_raw(f"{namespace}/base/cuda-12.9-debian:1.0-4")["layers"]
    assert skopeo_raw(f"{namespace}/runtime/cuda-12.9-debian:1.0-4")["layers"]
    assert "skipped: the parent image " \
           f"{namespace}/base/cuda-12.8-debian:1.0-4 was not pushed" in done.stdout
    report = tmp_path / "artifacts" / "base-cuda-12.8-debian" / "junit.xml"
    assert VERDICT in report.read_text()


# Tekton: no cluster here; the steps our PipelineRun gives its CI-image tasks run as written.

def step_run(task: dict[str, Any], digests: dict[str, str], results: Path, *args: str
             ) -> subprocess.CompletedProcess[str]:
    """Run TASK's one step as Tekton would: its params (build results resolved from
    DIGESTS, build task -> digest) in its env, its results under RESULTS, ARGS as "$@"."""
    def resolve(text: str) -> str:
        for build, digest in digests.items():
            text = text.replace(f"$(tasks.{build}.results.IMAGE_DIGEST)", digest)
        return text

    params = {p["name"]: p["value"] for p in task["params"]}
    step = task["taskSpec"]["steps"][0]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    for variable in step["env"]:
        env[variable["name"]] = resolve(params[variable["value"][len("$(params."):-1]])
    script = step["script"]
    for result in task["taskSpec"].get("results", []):
        script = script.replace(f"$(results.{result['name']}.path)",
                                str(results / result["name"]))
    return subprocess.run(["sh", "-c", script, "sh", *map(resolve, args)], env=env,
                          capture_output=True, text=True, timeout=600)


def push_platform_image(reference: str, arch: str) -> str:
    """A small image of ARCH (no RUN step: no emulation) pushed as REFERENCE; its digest."""
    container = subprocess.run(["buildah", "from", "scratch"], check=True, capture_output=True,
                               text=True, timeout=120).stdout.strip()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            (Path(scratch) / "arch").write_text(f"{arch}\n")
            subprocess.run(["buildah", "copy", container, f"{scratch}/arch", "/etc/arch"],
                           check=True, capture_output=True, timeout=120)
            subprocess.run(["buildah", "config", "--os", "linux", "--arch", arch, container],
                           check=True, capture_output=True, timeout=120)
            subprocess.run(["buildah", "commit", "-q", container, reference], check=True,
                           capture_output=True, timeout=120)
            digest_file = Path(scratch) / "digest"
            subprocess.run(["buildah", "push", "--tls-verify=false", "--digestfile",
                            str(digest_file), reference, f"docker://{reference}"],
                           check=True, capture_output=True, timeout=300)
            return digest_file.read_text().strip()
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, timeout=120)


def test_tekton_validates_each_platform_then_its_join_pushes_the_manifest_list(
        ci_registry: Registry, tmp_path: Path) -> None:
    project = git_repository(shipped_project(tmp_path / "project"))
    subprocess.run(["git", "-C", str(project), "remote", "add", "origin",
                    "https://git.example.com/aipcc/images.git"], check=True, timeout=60)
    namespace = f"{ci_registry.host}/tekton"

    def tekton_tasks(*args: str) -> dict[str, dict]:
        planned = subprocess.run(
            [sys.executable, "-m", "aipcc_build", "--matrix", str(project / "matrix/demo.yaml"),
             "plan", "--format", "tekton", "--allow-loopback", "--only", "base/cpu-debian",
             "--registry", namespace, "--no-tls-verify", "--build-id", "3", *args],
            cwd=REPO, capture_output=True, text=True, timeout=120)
        assert planned.returncode == 0, planned.stderr
        document = yaml.safe_load(planned.stdout)
        return {task["name"]: task for task in document["spec"]["pipelineSpec"]["tasks"]}

    tasks = tekton_tasks()
    reference = f"{namespace}/base/cpu-debian:1.0-3"
    # What each platform's buildah task pushes, on a node of that architecture.
    digests = {f"base-cpu-debian-build-{arch}": push_platform_image(f"{reference}-{arch}", arch)
               for arch in ("amd64", "arm64")}
    for arch in ("amd64", "arm64"):
        validated = step_run(tasks[f"base-cpu-debian-validate-{arch}"], digests, tmp_path)
        assert validated.returncode == 0, validated.stdout + validated.stderr
    # An image of one platform is validated the same way, by its digest.
    single = tekton_tasks("--platform", "linux/amd64")["base-cpu-debian-validate"]
    validated = step_run(single, {"base-cpu-debian-build": digests["base-cpu-debian-build-amd64"]},
                         tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    # A build that ran on a node of the wrong architecture fails its platform's validation.
    wrong = step_run(tasks["base-cpu-debian-validate-arm64"],
                     {"base-cpu-debian-build-arm64": digests["base-cpu-debian-build-amd64"]},
                     tmp_path)
    assert wrong.returncode == 2 and "linux/arm64" in wrong.stderr
    join = tasks["base-cpu-debian-join"]
    instances = next(p["value"] for p in join["params"] if p["name"] == "IMAGES")
    joined = step_run(join, digests, tmp_path, *instances)
    assert joined.returncode == 0, joined.stdout + joined.stderr
    index = skopeo_raw(reference)
    assert {(m["platform"]["architecture"], m["digest"]) for m in index["manifests"]} == {
        ("amd64", digests["base-cpu-debian-build-amd64"]),
        ("arm64", digests["base-cpu-debian-build-arm64"])}
    listed = subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--format",
                             "{{.Digest}}", f"docker://{reference}"], check=True,
                            capture_output=True, text=True, timeout=120).stdout.strip()
    assert (tmp_path / "IMAGE_DIGEST").read_text().strip() == listed
    assert (tmp_path / "IMAGE_URL").read_text() == reference
