"""`plan --format konflux` held against Konflux's own definitions, offline: the reference
pipeline and the Task of each version our pipelines use (build-definitions,
konflux-sast-tasks), Conforma's required tasks (the rule data Konflux's policy reads),
build-service's labels, annotations and service account, and the strict Tekton schema.
The vendored files and where they come from: tests/data/konflux/README.md."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.matrix import expand, load
from aipcc_build.matrix.model import default_bundles
from aipcc_build.plan.emit.cluster import _image_host, _loopback
from tests.support import tekton_schema
from tests.support.konflux import renovate_nudge
from tests.support.project import git, with_origin, without_source_url
from tests.unit.plan.test_emitters import before

KONFLUX = Path(__file__).resolve().parents[2] / "data" / "konflux"
DEFINITIONS = KONFLUX / "build-definitions"
REFERENCE = DEFINITIONS / "docker-build-multi-platform-oci-ta.yaml"
REQUIRED_TASKS = KONFLUX / "rhtap-ec-policy" / "required_tasks.yml"
# The Task definitions, by the repository that holds them (README.md names the commits).
TASK_DIRS = (DEFINITIONS / "tasks", KONFLUX / "konflux-sast-tasks" / "tasks")
# The declared names of Tasks whose definitions could not be vendored (README.md).
INTERFACES = KONFLUX / "interfaces"
# The build that pins the one bundle build-definitions publishes no file for.
BUILD_SERVICE_PUSH = KONFLUX / "build-service" / "build-service-push.yaml"
PINNED = re.compile(r"quay\.io/konflux-ci/tekton-catalog/task-(?P<name>[a-z0-9-]+):"
                    r"(?P<tag>[0-9.]+)@sha256:[0-9a-f]{64}")
RESULT_REF = re.compile(r"\$\(tasks\.([a-z0-9-]+)\.results\.([A-Za-z0-9_-]+)(\[\*\])?\)")
PARAM_REF = re.compile(r"\$\(params\.([A-Za-z0-9_-]+)(\[\*\])?\)")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# The Pipelines-as-Code variables build-service's PipelineRuns use (PaC substitutes them).
PAC_VARIABLES = {"source_url", "revision", "target_branch", "pull_request_number",
                 "git_auth_secret"}
ORIGIN = "https://git.example.com/aipcc/images.git"


@cache
def reference() -> dict[str, dict[str, Any]]:
    """The reference pipeline's tasks by name."""
    pipeline = tekton_schema.load(REFERENCE.read_text())
    return {task["name"]: task for task in pipeline["spec"]["tasks"]}


@cache
def definition(name: str, version: str) -> dict[str, Any]:
    """The vendored Task NAME of VERSION (its spec), or the names it declares where it could
    not be vendored."""
    found = [d / f"{name}-{version}.yaml" for d in TASK_DIRS
             if (d / f"{name}-{version}.yaml").exists()]
    assert len(found) <= 1, found
    if not found:
        return _interface(name, version)
    task = tekton_schema.load(found[0].read_text())
    assert task["kind"] == "Task" and task["metadata"]["name"] == name
    label = task["metadata"]["labels"]["app.kubernetes.io/version"]
    assert label == version or label.startswith(f"{version}."), (name, label)
    return task["spec"]


def _interface(name: str, version: str) -> dict[str, Any]:
    """The names a Task that could not be vendored declares (interfaces/), shaped as its
    spec: a param without a default is required, a workspace not optional is required."""
    path = INTERFACES / f"{name}-{version}.yaml"
    assert path.exists(), f"no definition of {name} {version} in tests/data/konflux"
    names = tekton_schema.load(path.read_text())
    assert names["task"] == name and names["version"].startswith(f"{version}."), path
    return {
        "params": [{"name": n} for n in names["required_params"]]
        + [{"name": n, "default": ""} for n in names["optional_params"]],
        "results": [{"name": n} for n in names["results"]],
        "workspaces": [{"name": n} for n in names["required_workspaces"]]
        + [{"name": n, "optional": True} for n in names["optional_workspaces"]],
    }


def versions() -> dict[str, str]:
    """Task name -> the version the reference pipeline uses."""
    return {t["taskRef"]["name"]: t["taskRef"]["version"] for t in reference().values()}


def konflux_repo(repo: Path) -> Path:
    return with_origin(repo, ORIGIN)


def generate(cli, matrix: Path, *args: str) -> dict[str, str]:
    result = cli("--matrix", str(matrix), "plan", "--format", "konflux", *args)
    assert result.code == 0, result.err
    root = matrix.parent.parent
    return {p.relative_to(root).as_posix(): p.read_text()
            for directory in (".tekton", "konflux") if (root / directory).is_dir()
            for p in sorted((root / directory).rglob("*.yaml"))}


def bundle(task: dict[str, Any]) -> tuple[str, str]:
    ref = task["taskRef"]
    assert ref["resolver"] == "bundles", task["name"]
    given = {p["name"]: p["value"] for p in ref["params"]}
    assert given["kind"] == "task"
    return given["name"], given["bundle"]


def check_against_konflux(text: str) -> dict[str, Any]:
    """What every emitted build PipelineRun must hold for Konflux to run it, for Conforma to
    pass it and for integration-service to make a Snapshot of it; returns the document."""
    assert text.startswith("# Generated by aipcc-build plan --format konflux")
    assert tekton_schema.errors(text) == []
    assert set(re.findall(r"\{\{\s*([a-z_]+)\s*\}\}", text)) <= PAC_VARIABLES
    document = tekton_schema.load(text)
    spec = document["spec"]
    pipeline = spec["pipelineSpec"]
    tasks = {task["name"]: task for task in pipeline["tasks"]}
    assert len(tasks) == len(pipeline["tasks"])
    declared = {p["name"]: p for p in pipeline["params"]}
    given = {p["name"]: p["value"] for p in spec["params"]}
    assert set(given) <= set(declared)
    assert {n for n, p in declared.items() if "default" not in p} <= set(given)
    for name, value in given.items():
        assert isinstance(value, list) == (declared[name].get("type") == "array"), name
    # Integration-service and Tekton Chains read these.
    assert [r["name"] for r in pipeline["results"]] == [
        "IMAGE_URL", "IMAGE_DIGEST", "CHAINS-GIT_URL", "CHAINS-GIT_COMMIT"]
    workspaces = {w["name"] for w in pipeline["workspaces"]}
    assert {w["name"] for w in spec["workspaces"]} <= workspaces
    after = {name: task.get("runAfter", []) for name, task in tasks.items()}
    uses = versions()
    for name, task in tasks.items():
        # Trusted tasks only: every task a pinned bundle of the version Konflux's pipeline
        # uses, none inline.
        assert "taskSpec" not in task, name
        task_name, pinned = bundle(task)
        match = PINNED.fullmatch(pinned)
        assert match and match["name"] == task_name, pinned
        assert match["tag"] == uses[task_name] or match["tag"].startswith(f"{uses[task_name]}.")
        assert pinned == default_bundles()[task_name]
        assert set(after[name]) <= set(tasks)
        params = {p["name"] for p in task.get("params", [])} | {
            p["name"] for p in task.get("matrix", {}).get("params", [])}
        bound = {w["name"] for w in task.get("workspaces", [])}
        assert {w["workspace"] for w in task.get("workspaces", [])} <= workspaces
        spec_of = definition(task_name, uses[task_name])
        known = {p["name"]: p for p in spec_of.get("params", [])}
        assert params <= set(known), (name, params - set(known))
        assert {n for n, p in known.items() if "default" not in p} <= params, name
        offered = {w["name"]: w for w in spec_of.get("workspaces", [])}
        assert bound <= set(offered), name
        assert {n for n, w in offered.items() if not w.get("optional")} <= bound, name
        for producer, result, _ in RESULT_REF.findall(json.dumps(task)):
            assert producer in before(after, name), (name, producer)
            assert result in results_of(tasks[producer]), (producer, result)
        for param, _ in PARAM_REF.findall(json.dumps(task)):
            assert param in declared, (name, param)
    for result in pipeline["results"]:
        for producer, name, _ in RESULT_REF.findall(result["value"]):
            assert name in results_of(tasks[producer])
    # The tasks and their order are the reference pipeline's.
    by_ref = {bundle(t)[0] for t in tasks.values()}
    assert by_ref == {t["taskRef"]["name"] for t in reference().values()}
    return document


def results_of(task: dict[str, Any]) -> set[str]:
    name, _ = bundle(task)
    return _results_of(name)


@cache
def _results_of(name: str) -> frozenset[str]:
    spec = definition(name, versions()[name])
    return frozenset(r["name"] for r in spec.get("results", []))


@cache
def required_by_conforma() -> tuple[Any, ...]:
    """The required-task entries of the latest rules in force (a list: one of them)."""
    data = tekton_schema.load(REQUIRED_TASKS.read_text())
    entries = []
    for rules in (data["pipeline-required-tasks"]["docker"], data["required-tasks"]):
        latest = max(rules, key=lambda rule: rule["effective_on"])
        entries += latest["tasks"]
    return tuple(entries)  # kept for every test (@cache): read, never changed


def two_platform_matrix(repo: Path) -> Path:
    """The shipped matrix built for x86_64 and arm64 (ROCm: x86_64 only)."""
    matrix = repo / "matrix/aipcc.yaml"
    text = matrix.read_text().replace("platforms: [linux/amd64]",
                                      "platforms: [linux/amd64, linux/arm64]", 1)
    matrix.write_text(text.replace("exclude:\n", "exclude:\n  - {accelerator: rocm, platform: "
                                   "linux/arm64}\n", 1))
    return matrix


@pytest.fixture
def kx_repo(repo: Path) -> Path:
    return konflux_repo(repo)


def test_every_component_build_is_a_konflux_build_konflux_accepts(kx_repo, cli):
    matrix = kx_repo / "matrix/aipcc.yaml"
    files = generate(cli, matrix)
    images = expand(load(str(matrix)))
    runs = {path: text for path, text in files.items() if path.startswith(".tekton/")}
    assert len(runs) == 2 * len(images)
    components = set()
    for path, text in runs.items():
        document = check_against_konflux(text)
        labels = document["metadata"]["labels"]
        component = labels["appstudio.openshift.io/component"]
        components.add(component)
        assert DNS_LABEL.match(component) and len(component) <= 63
        assert labels == {"appstudio.openshift.io/application": "aipcc-3-0",
                          "appstudio.openshift.io/component": component,
                          "pipelines.appstudio.openshift.io/type": "build"}
        assert document["spec"]["taskRunTemplate"] == {
            "serviceAccountName": f"build-pipeline-{component}"}
        pull_request = path.endswith("-pull-request.yaml")
        assert path == f".tekton/{component}-{'pull-request' if pull_request else 'push'}.yaml"
        assert document["metadata"]["name"] == (
            f"{component}-on-{'pull-request' if pull_request else 'push'}")
        annotations = document["metadata"]["annotations"]
        cel = annotations["pipelinesascode.tekton.dev/on-cel-expression"]
        event = "pull_request" if pull_request else "push"
        assert cel.startswith(f'event == "{event}" && target_branch == "main" && ( ')
        assert f'"{path}".pathChanged()' in cel and '"matrix/aipcc.yaml".pathChanged()' in cel
        assert annotations["pipelinesascode.tekton.dev/cancel-in-progress"] == (
            "true" if pull_request else "false")
        assert annotations["pipelinesascode.tekton.dev/max-keep-runs"] == "3"
        given = {p["name"]: p["value"] for p in document["spec"]["params"]}
        assert given["git-url"] == "{{source_url}}" and given["revision"] == "{{revision}}"
        image = next(i for i in images if given["dockerfile"] in i.containerfile)
        assert f'"{given["dockerfile"].rsplit("/", 1)[0]}/***".pathChanged()' in cel
        if pull_request:
            assert given["output-image"] == f"{image.repository}:on-pr-{{{{revision}}}}"
            assert given["image-expires-after"] == "5d"
        else:
            assert given["output-image"] == f"{image.repository}:3.0-{{{{revision}}}}"
            assert "image-expires-after" not in given
        assert given["build-platforms"] == ["linux/x86_64"]
        names = {bundle(t)[0] for t in document["spec"]["pipelineSpec"]["tasks"]}
        for entry in required_by_conforma():
            assert set([entry] if isinstance(entry, str) else entry) & names, entry
        # RHEL content: UBI and RHEL bases get the activation key the tasks read.
        build = next(t for t in document["spec"]["pipelineSpec"]["tasks"]
                     if t["name"] == "build-images")
        assert {"name": "ACTIVATION_KEY", "value": "activation-key"} in build["params"]
    assert len(components) == len(images)


def test_two_platforms_build_in_one_matrix_task_joined_by_the_index(kx_repo, cli):
    files = generate(cli, two_platform_matrix(kx_repo))
    text = files[".tekton/aipcc-3-0-devel-cuda-12-8-el9-6-push.yaml"]
    document = check_against_konflux(text)
    given = {p["name"]: p["value"] for p in document["spec"]["params"]}
    assert given["build-platforms"] == ["linux/x86_64", "linux/arm64"]
    rocm = tekton_schema.load(files[".tekton/aipcc-3-0-builder-rocm-6-4-ubi9-push.yaml"])
    assert {"name": "build-platforms", "value": ["linux/x86_64"]} in rocm["spec"]["params"]


def test_per_platform_containerfiles_get_a_build_task_each(kx_repo, cli):
    """The demo: each platform of an image has its own Containerfile; Debian bases, so no
    activation key."""
    files = generate(cli, kx_repo / "matrix/demo.yaml", "--allow-loopback")
    document = check_against_konflux(files[".tekton/aipcc-demo-1-0-base-cpu-debian-push.yaml"])
    tasks = {t["name"]: t for t in document["spec"]["pipelineSpec"]["tasks"]}
    for arch, platform in (("amd64", "linux/x86_64"), ("arm64", "linux/arm64")):
        given = {p["name"]: p["value"] for p in tasks[f"build-images-{arch}"]["params"]}
        assert given["PLATFORM"] == platform and "ACTIVATION_KEY" not in given
        assert given["DOCKERFILE"].endswith(f"cpu-debian/Containerfile.{arch}")
    index = {p["name"]: p["value"] for p in tasks["build-image-index"]["params"]}
    assert index["IMAGES"] == ["$(tasks.build-images-amd64.results.IMAGE_REF)",
                               "$(tasks.build-images-arm64.results.IMAGE_REF)"]


def test_tenant_manifests_and_the_snapshot_pipeline(kx_repo, cli):
    files = generate(cli, kx_repo / "matrix/aipcc.yaml")
    application = tekton_schema.load(files["konflux/tenant/application.yaml"])
    assert application["kind"] == "Application" and application["metadata"]["name"] == "aipcc-3-0"
    component = tekton_schema.load(
        files["konflux/tenant/component-aipcc-3-0-base-cuda-12-8-el9-6.yaml"])
    assert component["apiVersion"] == "appstudio.redhat.com/v1alpha1"
    assert component["spec"]["application"] == "aipcc-3-0"
    assert component["spec"]["containerImage"] == "quay.io/aipcc/base-images/cuda-12.8-el9.6"
    assert component["spec"]["source"]["git"]["url"] == ORIGIN
    # A new base image opens an update of the devel image built FROM it.
    assert component["spec"]["build-nudges-ref"] == ["aipcc-3-0-devel-cuda-12-8-el9-6"]
    scenario = tekton_schema.load(files["konflux/tenant/integration-test-scenario.yaml"])
    assert scenario["apiVersion"] == "appstudio.redhat.com/v1beta2"
    assert scenario["spec"]["application"] == "aipcc-3-0"
    ref = scenario["spec"]["resolverRef"]
    assert ref["resolver"] == "git"
    params = {p["name"]: p["value"] for p in ref["params"]}
    assert params == {"url": ORIGIN, "revision": "main",
                      "pathInRepo": "konflux/pipelines/validate-snapshot.yaml"}
    pipeline = tekton_schema.load(files[params["pathInRepo"]])
    assert pipeline["kind"] == "Pipeline"
    assert {"name": "SNAPSHOT", "type": "string"}.items() <= pipeline["spec"]["params"][0].items()
    as_run = {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
              "metadata": {"name": "validate"},
              "spec": {"params": [{"name": "SNAPSHOT", "value": "{}"}],
                       "pipelineSpec": pipeline["spec"]}}
    assert tekton_schema.errors(json.dumps(as_run)) == []


def test_hermetic_builds_take_the_prefetch_input(kx_repo, cli):
    matrix = kx_repo / "matrix/aipcc.yaml"
    prefetch = '[{"type": "pip", "path": "."}, {"type": "rpm", "path": "."}]'
    matrix.write_text(matrix.read_text().replace(
        "registry: quay.io/aipcc", f"registry: quay.io/aipcc\nci:\n  hermetic: true\n"
        f"  prefetch_input: '{prefetch}'", 1))
    files = generate(cli, matrix)
    document = check_against_konflux(files[".tekton/aipcc-3-0-base-cpu-el9-6-push.yaml"])
    given = {p["name"]: p["value"] for p in document["spec"]["params"]}
    assert given["hermetic"] == "true" and given["prefetch-input"] == prefetch
    tasks = {t["name"]: t for t in document["spec"]["pipelineSpec"]["tasks"]}
    assert {"name": "input", "value": "$(params.prefetch-input)"} in tasks[
        "prefetch-dependencies"]["params"]


def test_bundles_come_from_the_matrix(kx_repo, cli):
    pinned = ("quay.io/konflux-ci/tekton-catalog/task-buildah-remote-oci-ta:0.10.9@sha256:"
              + "ab" * 32)
    matrix = kx_repo / "matrix/aipcc.yaml"
    matrix.write_text(matrix.read_text().replace(
        "registry: quay.io/aipcc",
        f"registry: quay.io/aipcc\nci: {{bundles: {{buildah-remote-oci-ta: '{pinned}'}}}}", 1))
    files = generate(cli, matrix)
    document = tekton_schema.load(files[".tekton/aipcc-3-0-base-cpu-el9-6-push.yaml"])
    build = next(t for t in document["spec"]["pipelineSpec"]["tasks"]
                 if t["name"] == "build-images")
    assert bundle(build) == ("buildah-remote-oci-ta", pinned)


def test_check_fails_after_a_matrix_edit_adds_an_image_and_passes_after_regenerating(
        kx_repo, cli):
    matrix = kx_repo / "matrix/aipcc.yaml"
    generate(cli, matrix)
    checked = cli("--matrix", str(matrix), "plan", "--format", "konflux", "--check")
    assert checked.code == 0, checked.err
    matrix.write_text(matrix.read_text().replace(
        "      - {version: 6.3.4}", "      - {version: 6.3.4}\n      - {version: 6.2.4}", 1))
    drifted = cli("--matrix", str(matrix), "plan", "--format", "konflux", "--check")
    assert drifted.code == 1
    assert "missing: " in drifted.out and "aipcc-3-0-builder-rocm-6-2-ubi9-push.yaml" in drifted.out
    assert not (kx_repo / ".tekton/aipcc-3-0-builder-rocm-6-2-ubi9-push.yaml").exists()
    generate(cli, matrix)
    again = cli("--matrix", str(matrix), "plan", "--format", "konflux", "--check")
    assert again.code == 0, again.out + again.err
    # An image that leaves the matrix leaves stale files, which a plan removes.
    matrix.write_text(matrix.read_text().replace("\n      - {version: 6.2.4}", "", 1))
    stale = cli("--matrix", str(matrix), "plan", "--format", "konflux", "--check")
    assert stale.code == 1 and "stale: " in stale.out
    generate(cli, matrix)
    assert not (kx_repo / ".tekton/aipcc-3-0-builder-rocm-6-2-ubi9-push.yaml").exists()


def test_output_dir(kx_repo, cli, tmp_path):
    out = tmp_path / "elsewhere"
    result = cli("--matrix", str(kx_repo / "matrix/aipcc.yaml"), "plan", "--format", "konflux",
                 "--output-dir", str(out))
    assert result.code == 0, result.err
    assert (out / ".tekton/aipcc-3-0-base-cpu-el9-6-push.yaml").is_file()
    assert not (kx_repo / ".tekton").exists()


def test_a_hand_written_file_or_a_link_in_the_way_is_refused_and_nothing_written(kx_repo, cli):
    tekton = kx_repo / ".tekton"
    tekton.mkdir()
    mine = tekton / "aipcc-3-0-base-cpu-el9-6-push.yaml"
    mine.write_text("# my own pipeline\n")
    result = cli("--matrix", str(kx_repo / "matrix/aipcc.yaml"), "plan", "--format", "konflux")
    assert result.code == 2 and "generated header" in result.err and str(mine) in result.err
    assert "Traceback" not in result.err
    assert sorted(p.name for p in tekton.iterdir()) == [mine.name]
    mine.unlink()
    mine.symlink_to(kx_repo / "README.md")
    result = cli("--matrix", str(kx_repo / "matrix/aipcc.yaml"), "plan", "--format", "konflux")
    assert result.code == 2 and "not a regular file" in result.err
    assert not (kx_repo / "konflux").exists()
    # A directory on the way that leads elsewhere: nothing is written through it.
    mine.unlink()
    tekton.rmdir()
    elsewhere = kx_repo.parent / "elsewhere"
    elsewhere.mkdir()
    tekton.symlink_to(elsewhere)
    result = cli("--matrix", str(kx_repo / "matrix/aipcc.yaml"), "plan", "--format", "konflux")
    assert result.code == 2 and "symbolic link" in result.err and "Traceback" not in result.err
    assert list(elsewhere.iterdir()) == [] and not (kx_repo / "konflux").exists()


@pytest.mark.parametrize(("edit", "field", "engine"), [
    (("registry: quay.io/aipcc", "registry: localhost:5000/aipcc"), "registry", "konflux"),
    (("registry: quay.io/aipcc", "registry: localhost:5000/aipcc"), "registry", "tekton"),
    (("{from: registry.access.redhat.com/ubi9/ubi:9.6}", "{from: '127.0.0.1:5000/ubi:9.6'}"),
     "os.ubi9.from", "konflux"),
    (("https://packages.redhat.com/api/pypi/public-rhai/rhoai/{release}/{accelerator}-ubi9/simple/",
      "http://localhost:8580/{release}/cpu/simple/"), "accelerators.cpu.wheel_index", "tekton"),
])
def test_loopback_is_refused_naming_the_field(kx_repo, cli, edit, field, engine):
    matrix = kx_repo / "matrix/aipcc.yaml"
    matrix.write_text(matrix.read_text().replace(*edit, 1))
    result = cli("--matrix", str(matrix), "plan", "--format", engine)
    assert result.code == 2 and f"{field}: " in result.err and "--allow-loopback" in result.err
    assert "--registry" not in result.err  # the matrix's field, not the option
    assert result.out == "" and not (kx_repo / ".tekton").exists()
    # The edit is not committed: tekton, which pins the commit, must be told it may.
    uncommitted = ("--allow-uncommitted",) if engine == "tekton" else ()
    allowed = cli("--matrix", str(matrix), "plan", "--format", engine, "--allow-loopback",
                  *uncommitted)
    assert allowed.code == 0, allowed.err


@pytest.mark.parametrize(("reference", "local"), [
    ("localhost/x", True), ("127.0.0.1:5000/x", True), ("[::1]:5000/x", True),
    ("0.0.0.0/x", True), ("127.1.2.3/x", True), ("registry.localhost/x", True),
    ("quay.io/x", False), ("library/x", False), ("x", False), ("localhost.example.com/x", False),
])
def test_what_counts_as_this_machine(reference, local):
    assert _loopback(_image_host(reference)) is local


def test_loopback_registry_option_is_refused(kx_repo, cli):
    result = cli("--matrix", str(kx_repo / "matrix/aipcc.yaml"), "plan", "--format", "tekton",
                 "--registry", "127.0.0.1:5000/x")
    assert result.code == 2 and "--registry" in result.err


def test_check_and_output_dir_go_with_konflux_only(kx_repo, cli):
    result = cli("--matrix", str(kx_repo / "matrix/aipcc.yaml"), "plan", "--check")
    assert result.code == 2 and "--format konflux" in result.err


def test_without_a_clonable_origin_konflux_is_a_clear_input_error(repo, cli):
    without_source_url(repo)
    result = cli("--matrix", str(repo / "matrix/aipcc.yaml"), "plan", "--format", "konflux")
    assert result.code == 2 and "origin" in result.err and "Traceback" not in result.err
    git(repo, "remote", "add", "origin", str(repo))
    result = cli("--matrix", str(repo / "matrix/aipcc.yaml"), "plan", "--format", "konflux")
    assert result.code == 2 and "cannot reach" in result.err
    assert not (repo / ".tekton").exists()


def test_the_bundle_file_pins_what_build_definitions_publishes():
    """Each default bundle is the one build-definitions names for the version its
    reference pipeline uses (external-task/<task>/<version>/<task>.yaml); the one it names
    none for, the one build-service's own build pins."""
    pinned_by_build_service = {
        bundle(task)[0]: bundle(task)[1] for task in
        tekton_schema.load(BUILD_SERVICE_PUSH.read_text())["spec"]["pipelineSpec"]["tasks"]}
    for task, version in versions().items():
        published = DEFINITIONS / "bundles" / f"{task}-{version}.yaml"
        if published.exists():
            assert default_bundles()[task] == tekton_schema.load(
                published.read_text())["task_bundle"]
        else:
            assert task == "ecosystem-cert-preflight-checks"
            assert default_bundles()[task] == pinned_by_build_service[task]
            assert PINNED.fullmatch(default_bundles()[task])["tag"] == version
    assert set(default_bundles()) == set(versions())


def test_the_certification_check_runs_as_in_konflux_reference_pipeline(kx_repo, cli):
    """ecosystem-cert-preflight-checks: per platform of the index, after it, skipped with
    the other checks, exactly as the reference pipeline and build-service's build call it."""
    files = generate(cli, kx_repo / "matrix/aipcc.yaml")
    ours = next(t for t in tekton_schema.load(files[".tekton/aipcc-3-0-base-cpu-el9-6-push.yaml"])[
        "spec"]["pipelineSpec"]["tasks"] if t["name"] == "ecosystem-cert-preflight-checks")
    build_service = next(
        t for t in tekton_schema.load(
            BUILD_SERVICE_PUSH.read_text())["spec"]["pipelineSpec"]["tasks"]
        if t["name"] == "ecosystem-cert-preflight-checks")
    upstream = reference()["ecosystem-cert-preflight-checks"]
    assert bundle(ours) == bundle(build_service)
    for key in ("params", "matrix", "runAfter", "when"):
        assert ours[key] == upstream[key] == build_service[key], key


def test_a_dependent_builds_from_its_parent_by_digest_and_a_nudge_is_no_drift(kx_repo, cli):
    matrix = kx_repo / "matrix/aipcc.yaml"
    files = generate(cli, matrix)
    parent, child = "aipcc-3-0-base-cuda-12-8-el9-6", "aipcc-3-0-devel-cuda-12-8-el9-6"
    args_file = f"konflux/build-args/{child}.conf"
    pin = (kx_repo / args_file).read_text()
    assert pin.startswith("# Generated by aipcc-build plan --format konflux from matrix/aipcc.yaml")
    parent_repository = "quay.io/aipcc/base-images/cuda-12.8-el9.6"
    assert f"\nAIPCC_PARENT={parent_repository}:3.0@sha256:{'0' * 64}\n" in pin
    # Only dependents have one.
    assert sorted(p.name for p in (kx_repo / "konflux/build-args").iterdir()) == sorted(
        f"aipcc-3-0-devel-{name}.conf" for name in ("cpu-el9-6", "cuda-12-8-el9-6",
                                                     "cuda-12-9-el9-6"))
    for event in ("push", "pull-request"):
        document = check_against_konflux(files[f".tekton/{child}-{event}.yaml"])
        given = {p["name"]: p["value"] for p in document["spec"]["params"]}
        assert given["build-args-file"] == args_file
        build = next(t for t in document["spec"]["pipelineSpec"]["tasks"]
                     if t["name"] == "build-images")
        assert {"name": "BUILD_ARGS_FILE", "value": "$(params.build-args-file)"} in build["params"]
        # A merged nudge rebuilds the dependent.
        cel = document["metadata"]["annotations"]["pipelinesascode.tekton.dev/on-cel-expression"]
        assert f'"{args_file}".pathChanged()' in cel
        assert "build.appstudio.openshift.io/build-nudge-files" not in (
            document["metadata"]["annotations"])
    push = tekton_schema.load(files[f".tekton/{parent}-push.yaml"])
    nudge_files = push["metadata"]["annotations"]["build.appstudio.openshift.io/build-nudge-files"]
    # Renovate's fileMatch, a JavaScript regular expression (no escaped '-'): that file only.
    assert nudge_files == f"^{args_file.replace('.', chr(92) + '.')}$"
    pull_request = tekton_schema.load(files[f".tekton/{parent}-pull-request.yaml"])
    assert "build.appstudio.openshift.io/build-nudge-files" not in (
        pull_request["metadata"]["annotations"])
    # The parent's push build lands: its nudge rewrites the pin in that one file.
    digest = "sha256:" + "ab" * 32
    assert renovate_nudge(kx_repo, nudge_files, parent_repository, digest) == [args_file]
    nudged = (kx_repo / args_file).read_text()
    assert f"\nAIPCC_PARENT={parent_repository}:3.0@{digest}\n" in nudged
    for command in (("plan", "--format", "konflux", "--check"), ("render", "--check")):
        checked = cli("--matrix", str(matrix), *command)
        assert checked.code == 0, checked.out + checked.err
    # A plan keeps the pin; a Renovate that also moves the tag is no drift either.
    generate(cli, matrix)
    assert (kx_repo / args_file).read_text() == nudged
    (kx_repo / args_file).write_text(nudged.replace(":3.0@", ":3.0-0123abc@"))
    assert cli("--matrix", str(matrix), "plan", "--format", "konflux", "--check").code == 0
    # A different parent (the registry moved) is drift, and a plan resets the pin.
    matrix.write_text(matrix.read_text().replace("registry: quay.io/aipcc",
                                                 "registry: quay.io/aipcc-next", 1))
    drifted = cli("--matrix", str(matrix), "plan", "--format", "konflux", "--check")
    assert drifted.code == 1 and args_file in drifted.out
    generate(cli, matrix)
    assert f"=quay.io/aipcc-next/base-images/cuda-12.8-el9.6:3.0@sha256:{'0' * 64}" in (
        kx_repo / args_file).read_text()


def test_a_parent_outside_the_plan_is_pinned_in_the_registry_the_plan_names(kx_repo, cli,
                                                                         tmp_path):
    """--registry moves every image of the plan, so a dependent's parent that the filters
    leave out is named there too (it was named in the matrix's registry)."""
    matrix = kx_repo / "matrix/aipcc.yaml"
    out = tmp_path / "out"
    result = cli("--matrix", str(matrix), "plan", "--format", "konflux", "--kind", "devel",
                 "--registry", "quay.io/elsewhere", "--output-dir", str(out))
    assert result.code == 0, result.err
    pin = (out / "konflux/build-args/aipcc-3-0-devel-cuda-12-8-el9-6.conf").read_text()
    assert "\nAIPCC_PARENT=quay.io/elsewhere/base-images/cuda-12.8-el9.6:3.0@sha256:" in pin


def test_the_matrix_names_the_repository_and_a_clone_without_origin_passes_the_check(
        repo, cli, tmp_path):
    """matrix/aipcc.yaml names ci.source_url, so the committed files are the same in every
    clone: one whose origin is elsewhere, or that has none, checks them clean."""
    url = "https://github.com/aipcc/aipcc-build.git"
    assert f"source_url: {url}" in (repo / "matrix/aipcc.yaml").read_text()
    files = generate(cli, repo / "matrix/aipcc.yaml")
    component = tekton_schema.load(
        files["konflux/tenant/component-aipcc-3-0-base-cuda-12-8-el9-6.yaml"])
    assert component["spec"]["source"]["git"]["url"] == url
    scenario = tekton_schema.load(files["konflux/tenant/integration-test-scenario.yaml"])
    assert {"name": "url", "value": url} in scenario["spec"]["resolverRef"]["params"]
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "konflux files")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "remote", "remove", "origin")
    checked = cli("--matrix", str(clone / "matrix/aipcc.yaml"), "plan", "--format", "konflux",
                  "--check")
    assert checked.code == 0, checked.out + checked.err
    git(clone, "remote", "add", "origin", "https://git.example.com/a/fork.git")
    checked = cli("--matrix", str(clone / "matrix/aipcc.yaml"), "plan", "--format", "konflux",
                  "--check")
    assert checked.code == 0, checked.out + checked.err


@pytest.mark.parametrize("url", ["/srv/git/images", "https://x.example.com/a b.git",
                                 "-ohttps://x.example.com/a.git", "https://x\n.example.com"])
def test_a_source_url_no_cluster_can_clone_is_refused_naming_the_field(repo, cli, url):
    matrix = repo / "matrix/aipcc.yaml"
    matrix.write_text(re.sub(r"source_url: .*", f"source_url: {json.dumps(url)}",
                             matrix.read_text()))
    result = cli("--matrix", str(matrix), "plan", "--format", "konflux")
    assert result.code == 2 and "ci.source_url" in result.err, result.err
    assert "aipcc.yaml:" in result.err and "Traceback" not in result.err
    assert not (repo / ".tekton").exists()
