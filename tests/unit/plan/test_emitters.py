"""The CI documents `plan` emits, validated offline: GitHub's and GitLab's vendored schemas
(check-jsonschema), a schema of our own for the GitHub matrix, and the DAG of each."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from aipcc_build.matrix import expand, load
from aipcc_build.plan.emit.github import GITHUB_OUTPUT_LIMIT
from tests.support.project import REPO, check_jsonschema, git

SCHEMA = Path(__file__).with_name("github-plan.schema.json")
# A DNS-1123 label (Kubernetes object and Tekton task names): RFC 1123, at most 63 chars.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# The buildah Task's parameters, as published with their types:
# - Tekton catalog, task/buildah/0.10/buildah.yaml: IMAGE, DOCKERFILE, CONTEXT,
#   STORAGE_DRIVER (no type: string), BUILD_ARGS (type: array, "Dockerfile build arguments,
#   array of key=value"); workspace `source` (required).
# - Konflux build-definitions, task/buildah (README's parameter table): IMAGE, DOCKERFILE,
#   CONTEXT, BUILD_ARGS ("Array of --build-arg values ("arg=value" strings)").
BUILDAH_PARAMS = {"IMAGE": str, "DOCKERFILE": str, "CONTEXT": str, "BUILD_ARGS": list,
                  "STORAGE_DRIVER": str}
BUILDAH_REQUIRED = {"IMAGE"}
BUILDAH_WORKSPACES = {"source"}
# Tekton catalog, task/git-clone: params `url` and `revision`, workspace `output`.
GIT_CLONE_PARAMS = {"url": str, "revision": str}


# Every filter names something, but the matrix excludes rocm on el9.6: nothing is left.
EMPTY_SELECTION = ("--accelerator", "rocm", "--os", "el9.6")


def plan(run, matrix: Path, *args: str):
    result = run("--matrix", str(matrix), "plan", *args)
    assert result.code == 0, result.err
    return result


def acyclic(edges: dict[str, list[str]]) -> bool:
    state: dict[str, int] = {}

    def visit(node: str) -> bool:
        if state.get(node) == 1:
            return False
        if state.get(node) == 2:
            return True
        state[node] = 1
        ok = all(visit(n) for n in edges.get(node, []))
        state[node] = 2
        return ok

    return all(visit(node) for node in edges)


# GitHub Actions ---------------------------------------------------------------------------

def test_shipped_github_workflow_validates():
    result = check_jsonschema("--builtin-schema", "vendor.github-workflows",
                              str(REPO / "docs/ci/github-actions.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_github_workflow_schema_check_can_fail(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text((REPO / "docs/ci/github-actions.yml").read_text()
                      .replace("runs-on:", "runs_on:", 1))
    assert check_jsonschema("--builtin-schema", "vendor.github-workflows",
                            str(broken)).returncode == 1


def test_shipped_workflow_runs_one_job_per_image_with_dependents_later():
    workflow = yaml.safe_load((REPO / "docs/ci/github-actions.yml").read_text())
    jobs = workflow["jobs"]
    assert jobs["build"]["strategy"]["matrix"] == \
        "${{ fromJSON(needs.plan.outputs.plan).wave1 }}"
    assert jobs["build-dependents"]["strategy"]["matrix"] == \
        "${{ fromJSON(needs.plan.outputs.plan).wave2 }}"
    assert "build" in jobs["build-dependents"]["needs"]
    for name in ("build", "build-dependents"):
        steps = " ".join(step.get("run", "") for step in jobs[name]["steps"])
        assert 'aipcc-build matrix --only "$KEY" --push' in steps


def test_github_matrix_per_wave_validates(project, run, tmp_path):
    output = plan(run, project / "matrix/aipcc.yaml", "--format", "github").out
    assert output.count("\n") == 1  # one line: it goes into $GITHUB_OUTPUT as plan=<json>
    document = json.loads(output)
    (tmp_path / "plan.json").write_text(output)
    result = check_jsonschema("--schemafile", str(SCHEMA), str(tmp_path / "plan.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert document["images"] == 11 and document["waves"] == 2
    wave1 = {entry["key"] for entry in document["wave1"]["include"]}
    wave2 = {entry["key"] for entry in document["wave2"]["include"]}
    assert wave2 == {"devel/cuda-12.9-el9.6", "devel/cuda-12.8-el9.6", "devel/cpu-el9.6"}
    assert {"base/" + key.split("/")[1] for key in wave2} <= wave1
    assert len(output.encode("utf-16-le")) <= GITHUB_OUTPUT_LIMIT


def test_github_schema_of_our_own_rejects_an_empty_or_oversized_matrix(tmp_path):
    entry = {"key": "builder/x", "name": "x", "kind": "builder", "accelerator": "cpu",
             "version": None, "os": "ubi9", "reference": "r"}
    for bad in ({"images": 0, "waves": 1, "wave1": {"include": []}},
                {"images": 257, "waves": 1, "wave1": {"include": [entry] * 257}}):
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        assert check_jsonschema("--schemafile", str(SCHEMA),
                                str(tmp_path / "bad.json")).returncode == 1


def test_github_empty_plan_emits_no_matrix_and_says_so(project, run, tmp_path):
    result = plan(run, project / "matrix/aipcc.yaml", "--format", "github", *EMPTY_SELECTION)
    assert json.loads(result.out) == {"images": 0, "waves": 0}
    assert "nothing to build" in result.err
    (tmp_path / "plan.json").write_text(result.out)
    assert check_jsonschema("--schemafile", str(SCHEMA),
                            str(tmp_path / "plan.json")).returncode == 0


def write_big_matrix(root: Path, versions: int) -> Path:
    """One builder kind on two OSes: 2 x VERSIONS images, all in wave 1."""
    (root / "templates").mkdir(parents=True)
    (root / "templates/builder.Containerfile.j2").write_text("FROM {{ os_from }}\n")
    (root / "matrix").mkdir()
    entries = "\n".join(f"      - {{version: {v // 100 + 1}.{v % 100}.0}}"
                        for v in range(versions))
    path = root / "matrix/big.yaml"
    path.write_text(
        "schema: 1\nproduct: {name: big, version: '1.0'}\nregistry: example.com/big\n"
        "os:\n  a: {from: example.com/a:1}\n  b: {from: example.com/b:1}\n"
        f"accelerators:\n  cuda:\n    versions:\n{entries}\n"
        "images:\n  builder:\n    template: builder.Containerfile.j2\n    os: [a, b]\n")
    return path


def test_github_limit_of_256_jobs_is_a_clear_error(tmp_path, run):
    path = write_big_matrix(tmp_path, versions=130)
    result = run("--matrix", str(path), "plan", "--format", "github")
    assert result.code == 2
    assert "wave 1 has 260 images, over GitHub's limit of 256 jobs per matrix" in result.err
    assert "--accelerator" in result.err
    fits = run("--matrix", str(path), "plan", "--format", "github", "--os", "a")
    assert fits.code == 0 and json.loads(fits.out)["images"] == 130


# GitLab -----------------------------------------------------------------------------------

def test_gitlab_child_pipeline_validates_and_mirrors_the_dag(project, run, tmp_path):
    matrix_path = project / "matrix/aipcc.yaml"
    output = plan(run, matrix_path, "--format", "gitlab", "--build-id", "175").out
    (tmp_path / "child.yml").write_text(output)
    result = check_jsonschema("--builtin-schema", "vendor.gitlab-ci", str(tmp_path / "child.yml"))
    assert result.returncode == 0, result.stdout + result.stderr

    document = yaml.safe_load(output)
    jobs = {name: job for name, job in document.items()
            if isinstance(job, dict) and "script" in job}
    images = expand(load(matrix_path))
    assert len(jobs) == len(images)  # one job per image
    for image in images:
        job = jobs[f"build:{image.key}"]
        assert job["script"] == [f"aipcc-build --matrix matrix/aipcc.yaml matrix --only "
                                 f"{image.key} --build-id 175 --push"]
        expected = [f"build:{image.depends_on}"] if image.depends_on else []
        assert job["needs"] == expected
    assert all(need in jobs for job in jobs.values() for need in job["needs"])
    assert acyclic({name: job["needs"] for name, job in jobs.items()})


def test_gitlab_empty_plan_is_a_valid_pipeline(project, run, tmp_path):
    result = plan(run, project / "matrix/aipcc.yaml", "--format", "gitlab", *EMPTY_SELECTION)
    assert "nothing to build" in result.err
    (tmp_path / "child.yml").write_text(result.out)
    assert check_jsonschema("--builtin-schema", "vendor.gitlab-ci",
                            str(tmp_path / "child.yml")).returncode == 0
    assert list(yaml.safe_load(result.out)) == ["stages", "default", "nothing-to-build"]


def test_gitlab_parent_example_validates_and_triggers_the_artifact():
    path = REPO / "docs/ci/gitlab-ci.yml"
    result = check_jsonschema("--builtin-schema", "vendor.gitlab-ci", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    document = yaml.safe_load(path.read_text())
    trigger = document["build"]["trigger"]
    assert trigger["strategy"] == "depend"
    assert trigger["include"] == [{"artifact": "child-pipeline.yml", "job": "plan"}]
    assert "child-pipeline.yml" in document["plan"]["artifacts"]["paths"]
    assert "--format gitlab" in document["plan"]["script"][-1]


def test_gitlab_schema_check_can_fail(tmp_path):
    (tmp_path / "bad.yml").write_text("job:\n  script: [true]\n  needs: {a: 1}\n")
    assert check_jsonschema("--builtin-schema", "vendor.gitlab-ci",
                            str(tmp_path / "bad.yml")).returncode == 1


# Tekton -----------------------------------------------------------------------------------

@pytest.fixture
def tekton_repo(repo: Path) -> Path:
    git(repo, "remote", "add", "origin", "https://git.example.com/aipcc/images.git")
    return repo


def test_tekton_pipelinerun_structure(tekton_repo, run):
    matrix_path = tekton_repo / "matrix/aipcc.yaml"
    output = plan(run, matrix_path, "--format", "tekton", "--build-id", "175").out
    document = yaml.safe_load(output)
    assert document["apiVersion"] == "tekton.dev/v1"
    assert document["kind"] == "PipelineRun"
    assert DNS_LABEL.match(document["metadata"]["generateName"].rstrip("-"))
    spec = document["spec"]
    params = {p["name"]: p["value"] for p in spec["params"]}
    assert params == {"git-url": "https://git.example.com/aipcc/images.git",
                      "git-revision": git(tekton_repo, "rev-parse", "HEAD").strip()}
    assert {w["name"] for w in spec["workspaces"]} == {"source"}
    tasks = spec["pipelineSpec"]["tasks"]
    names = [task["name"] for task in tasks]
    assert len(names) == len(set(names))
    for name in names:
        assert DNS_LABEL.match(name) and len(name) <= 63, name

    clone, builds = tasks[0], tasks[1:]
    assert clone["taskRef"] == {"name": "git-clone"}
    assert {p["name"]: type(p["value"]) for p in clone["params"]} == GIT_CLONE_PARAMS

    images = {image.reference.replace(":3.0-dev", ":3.0-175"): image
              for image in expand(load(matrix_path))}
    assert len(builds) == len(images)  # one task per image
    by_image = {}
    for task in builds:
        assert task["taskRef"] == {"name": "buildah"}
        given = {p["name"]: p["value"] for p in task["params"]}
        assert set(given) <= set(BUILDAH_PARAMS) and set(given) >= BUILDAH_REQUIRED
        for name, value in given.items():
            assert isinstance(value, BUILDAH_PARAMS[name]), (name, value)
        assert {w["name"] for w in task["workspaces"]} == BUILDAH_WORKSPACES
        assert given["BUILD_ARGS"] == ["AIPCC_BUILD_ID=175"]
        image = images[given["IMAGE"]]
        assert given["DOCKERFILE"] == f"containerfiles/{image.kind}/{image.name}/Containerfile"
        assert given["CONTEXT"] == f"containerfiles/{image.kind}/{image.name}"
        assert (tekton_repo / given["DOCKERFILE"]).is_file()
        by_image[image.key] = task

    for image in images.values():
        task = by_image[image.key]
        parents = [by_image[image.depends_on]["name"]] if image.depends_on else []
        assert task["runAfter"] == ["fetch-source", *parents]
        assert set(task["runAfter"]) <= set(names)
    assert acyclic({task["name"]: task.get("runAfter", []) for task in tasks})


def test_tekton_names_stay_valid_and_unique_when_long(tmp_path, run):
    path = write_big_matrix(tmp_path, versions=2)
    text = path.read_text().replace("  a: {from", "  " + "a" * 70 + ": {from")
    path.write_text(text.replace("os: [a, b]", "os: [" + "a" * 70 + ", b]"))
    git(tmp_path, "init", "-q")
    git(tmp_path, "remote", "add", "origin", "https://git.example.com/big.git")
    git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
        "--allow-empty", "-m", "x")
    output = plan(run, path, "--format", "tekton").out
    names = [t["name"] for t in yaml.safe_load(output)["spec"]["pipelineSpec"]["tasks"]]
    assert len(names) == len(set(names)) == 5
    for name in names:
        assert DNS_LABEL.match(name) and len(name) <= 63, name


def test_tekton_empty_plan_emits_nothing(tekton_repo, run):
    result = plan(run, tekton_repo / "matrix/aipcc.yaml", "--format", "tekton", *EMPTY_SELECTION)
    assert result.out == "" and "nothing to build" in result.err


def test_json_plan_lists_every_field(project, run):
    document = json.loads(plan(run, project / "matrix/aipcc.yaml").out)
    assert document["schema"] == 1 and document["changed_since"] is None
    devel = next(i for i in document["images"] if i["key"] == "devel/cuda-12.8-el9.6")
    assert devel == {
        "name": "cuda-12.8-el9.6", "key": "devel/cuda-12.8-el9.6", "kind": "devel",
        "accelerator": "cuda", "version": "12.8.1", "os": "el9.6", "variant": "cuda-el9.6",
        "repository": "quay.io/aipcc/devel/cuda-12.8-el9.6", "tag": "3.0-dev",
        "reference": "quay.io/aipcc/devel/cuda-12.8-el9.6:3.0-dev",
        "template": "devel.Containerfile.j2",
        "containerfile": "containerfiles/devel/cuda-12.8-el9.6/Containerfile",
        "containerfiles": {"linux/amd64": "containerfiles/devel/cuda-12.8-el9.6/Containerfile"},
        "platforms": ["linux/amd64"],
        "context": "containerfiles/devel/cuda-12.8-el9.6",
        "depends_on": "base/cuda-12.8-el9.6", "needs": ["base/cuda-12.8-el9.6"], "wave": 2,
        "versioned_variant": "cuda12.8-el9.6",
        "wheel_index": "https://packages.redhat.com/api/pypi/public-rhai/rhoai/3.0/"
                       "cuda12.8-ubi9/simple/",
    }


def test_emitted_documents_do_not_depend_on_the_working_directory(project, run, monkeypatch):
    monkeypatch.chdir(project / "templates")
    first = plan(run, project / "matrix/aipcc.yaml", "--format", "gitlab").out
    monkeypatch.chdir(project)
    assert plan(run, Path("matrix/aipcc.yaml"), "--format", "gitlab").out == first


def test_tekton_without_an_origin_remote_is_a_clear_input_error(project, run):
    git(project, "init", "-q")
    result = run("--matrix", str(project / "matrix/aipcc.yaml"), "plan", "--format", "tekton")
    assert result.code == 2
    assert "no 'origin' remote" in result.err and "git remote add origin" in result.err
