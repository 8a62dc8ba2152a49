"""The IntegrationTestScenario's pipeline, run as written: Konflux has no engine here, so
the script of its one step (from what `plan --format konflux` commits) runs on this
machine against a registry on 127.0.0.1 holding two-platform image indexes as Konflux's
build-image-index pushes them. A Snapshot of clean images passes; a Snapshot holding an
image whose arm64 instance mixes CUDA 12.8 and 12.9 fails, naming the package, so
integration-service marks it failed and no release takes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.layers import Images, run
from tests.support.project import git, git_repository, shipped_project
from tests.support.registry import Registry

pytestmark = pytest.mark.integration


def push_index(images: Images, registry: Registry, name: str, amd64: str, arm64: str) -> str:
    """An index of AMD64 and ARM64 (relabelled arm64: no emulation), pushed; its digest
    reference, as a Snapshot names a component's image."""
    ctr = run("buildah", "from", "--pull-never", arm64)
    run("buildah", "config", "--arch", "arm64", ctr)
    arm = images.name(f"{name}-arm64")
    run("buildah", "commit", "--quiet", "--rm", ctr, arm)
    images.created.append(arm)
    listed = images.name(f"{name}-index")
    run("buildah", "manifest", "create", listed)
    images.created.append(listed)
    run("buildah", "manifest", "add", listed, f"containers-storage:{amd64}")
    run("buildah", "manifest", "add", listed, f"containers-storage:{arm}")
    repository = f"{registry.host}/aipcc/devel/{name}"
    digest_file = registry.root / f"{name}.digest"
    run("buildah", "manifest", "push", "--quiet", "--all", "--tls-verify=false",
        "--digestfile", str(digest_file), listed, f"docker://{repository}:3.0-abc")
    return f"{repository}@{digest_file.read_text().strip()}"


def snapshot_step(tmp_path: Path) -> dict:
    """The step the scenario's pipeline runs, from the files a plan writes."""
    project = git_repository(shipped_project(tmp_path / "project"))
    git(project, "remote", "add", "origin", "https://git.example.com/aipcc/images.git")
    planned = subprocess.run([sys.executable, "-m", "aipcc_build", "--matrix",
                              str(project / "matrix/aipcc.yaml"), "plan", "--format", "konflux"],
                             capture_output=True, text=True, timeout=300,
                             cwd=Path(__file__).resolve().parents[2])
    assert planned.returncode == 0, planned.stderr
    scenario = yaml.safe_load((project / "konflux/tenant/integration-test-scenario.yaml")
                              .read_text())
    path = {p["name"]: p["value"] for p in scenario["spec"]["resolverRef"]["params"]}["pathInRepo"]
    pipeline = yaml.safe_load((project / path).read_text())
    [task] = pipeline["spec"]["tasks"]
    [step] = task["taskSpec"]["steps"]
    return step


def run_step(step: dict, snapshot: dict, results: Path) -> subprocess.CompletedProcess[str]:
    """Run STEP as Tekton would: its env from the task's params, its result path."""
    params = {"SNAPSHOT": json.dumps(snapshot), "tls-verify": "false"}
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    for variable in step["env"]:
        env[variable["name"]] = params[variable["value"][len("$(params."):-1]]
    results.mkdir(exist_ok=True)
    script = results / "step"
    script.write_text(step["script"].replace("$(results.TEST_OUTPUT.path)",
                                             str(results / "TEST_OUTPUT")))
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=1800)


def test_the_snapshot_pipeline_passes_clean_images_and_fails_a_mixed_one(
        images: Images, cuda128: str, mixed_wheel: str, registry: Registry,
        tmp_path: Path) -> None:
    step = snapshot_step(tmp_path)
    assert step["image"] == "$(params.ci-image)"
    clean = push_index(images, registry, "cuda-12.8-el9.6", cuda128, cuda128)
    mixed = push_index(images, registry, "cuda-12.8-mixed", cuda128, mixed_wheel)

    def component(name: str, image: str) -> dict:
        return {"name": name, "containerImage": image,
                "source": {"git": {"url": "https://git.example.com/aipcc/images.git",
                                   "revision": "abc"}}}

    passed = run_step(step, {"application": "aipcc-3-0", "components": [
        component("aipcc-3-0-devel-cuda-12-8-el9-6", clean)]}, tmp_path / "clean")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    output = json.loads((tmp_path / "clean" / "TEST_OUTPUT").read_text())
    assert output["result"] == "SUCCESS" and output["successes"] == 2  # both platforms
    # The verdicts, for Chains to sign with the scenario's results: one subject per
    # platform manifest of the index the registry holds, each verdict ok.
    statement = output["attestation"]
    assert statement["predicateType"] == "https://aipcc.ai/attestations/toolkit-verdict/v1"
    assert {s["digest"]["sha256"] for s in statement["subject"]} == platform_digests(clean)
    assert [v["verdict"] for v in statement["predicate"]["verdicts"]] == ["ok", "ok"]

    failed = run_step(step, {"application": "aipcc-3-0", "components": [
        component("aipcc-3-0-devel-cuda-12-8-el9-6", clean),
        component("aipcc-3-0-devel-cuda-12-8-mixed", mixed)]}, tmp_path / "mixed")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    said = failed.stdout + failed.stderr
    assert "cuda-runtime-cu12" in said and "12.9.79" in said, said  # the package, by name
    assert "FAILED aipcc-3-0-devel-cuda-12-8-mixed linux/arm64" in said
    output = json.loads((tmp_path / "mixed" / "TEST_OUTPUT").read_text())
    assert output["result"] == "FAILURE" and output["failures"] == 1
    assert output["successes"] == 3 and "aipcc-3-0-devel-cuda-12-8-mixed linux/arm64" in \
        output["note"]
    verdicts = {(v["component"], v["platform"]): v["verdict"]
                for v in output["attestation"]["predicate"]["verdicts"]}
    assert verdicts[("aipcc-3-0-devel-cuda-12-8-mixed", "linux/arm64")] == "failed"
    assert sorted(verdicts.values()) == ["failed", "ok", "ok", "ok"]


def platform_digests(reference: str) -> set[str]:
    """The hex digests of the platform manifests of the index REFERENCE, as the registry
    serves it."""
    raw = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                          f"docker://{reference}"], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    return {m["digest"].partition(":")[2] for m in json.loads(raw)["manifests"]}
