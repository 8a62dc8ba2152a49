"""The CI documents `plan` emits, validated offline: GitHub's and GitLab's vendored schemas
(check-jsonschema), a schema of our own for the GitHub matrix, and the DAG of each."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aipcc_build.matrix import expand, load
from aipcc_build.plan.emit.github import GITHUB_OUTPUT_LIMIT
from tests.support import tekton_schema
from tests.support.project import REPO, check_jsonschema, git, with_origin, without_source_url

SCHEMA = Path(__file__).with_name("github-plan.schema.json")
# A DNS-1123 label (Kubernetes object and Tekton task names): RFC 1123, at most 63 chars.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# The buildah Task's parameters, as published with their types:
# - Tekton catalog, task/buildah/0.10/buildah.yaml: IMAGE, DOCKERFILE, CONTEXT,
#   STORAGE_DRIVER (no type: string), BUILD_ARGS (type: array, "Dockerfile build arguments,
#   array of key=value"); workspace `source` (required).
# It also takes TLSVERIFY ("true"/"false").
BUILDAH_PARAMS = {"IMAGE": str, "DOCKERFILE": str, "CONTEXT": str, "BUILD_ARGS": list,
                  "STORAGE_DRIVER": str, "TLSVERIFY": str}
BUILDAH_REQUIRED = {"IMAGE"}
BUILDAH_WORKSPACES = {"source"}
# Tekton catalog, task/git-clone: params `url`, `revision`, `subdirectory`, workspace `output`.
GIT_CLONE_PARAMS = {"url": str, "revision": str}


# Every filter names something, but the matrix excludes rocm on el9.6: nothing is left.
EMPTY_SELECTION = ("--accelerator", "rocm", "--os", "el9.6")


def plan(cli, matrix: Path, *args: str):
    result = cli("--matrix", str(matrix), "plan", *args)
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
    workflow = tekton_schema.load((REPO / "docs/ci/github-actions.yml").read_text())
    jobs = workflow["jobs"]
    assert jobs["build"]["strategy"]["matrix"] == \
        "${{ fromJSON(needs.plan.outputs.plan).wave1 }}"
    assert jobs["build-dependents"]["strategy"]["matrix"] == \
        "${{ fromJSON(needs.plan.outputs.plan).wave2 }}"
    assert "build" in jobs["build-dependents"]["needs"]
    for name in ("build", "build-dependents"):
        assert jobs[name]["strategy"]["fail-fast"] is False
        steps = " ".join(step.get("run", "") for step in jobs[name]["steps"])
        # The plan's own commands, through the environment; the login names the plan's host.
        assert 'sh -c "$FETCH"' in steps and 'eval "$COMMAND"' in steps
        assert '--password-stdin "$REGISTRY_HOST"' in steps
    # A dependent whose parent failed skips its build; the others still build.
    assert "!cancelled()" in jobs["build-dependents"]["if"]
    check = next(s for s in jobs["build-dependents"]["steps"] if s.get("id") == "parent")
    assert 'skopeo inspect' in check["run"]


def test_shipped_workflow_builds_pull_requests_to_their_own_tags_and_forks_without_pushing():
    workflow = tekton_schema.load((REPO / "docs/ci/github-actions.yml").read_text())
    jobs = workflow["jobs"]
    uses = [step["uses"] for job in jobs.values() for step in job["steps"] if "uses" in step]
    # The current major versions (checkout 6, upload-artifact and download-artifact 7, one
    # artifact backend: Node 24).
    assert set(uses) == {"actions/checkout@v6", "actions/upload-artifact@v7",
                         "actions/download-artifact@v7"}
    # The release: only a push to main promotes, only when asked where to.
    promote = jobs["promote"]
    assert "github.event_name == 'push'" in promote["if"]
    assert "vars.AIPCC_RELEASE_TO != ''" in promote["if"]
    assert any("aipcc-build promote --report reports" in s.get("run", "")
               for s in promote["steps"])
    plan_step = next(s for s in jobs["plan"]["steps"] if s.get("id") == "plan")
    assert plan_step["env"]["FORK"] == (
        "${{ github.event.pull_request.head.repo.full_name != github.repository }}")
    assert '--build-id "on-pr-$HEAD_SHA"' in plan_step["run"]
    assert "--no-push" in plan_step["run"]
    for name in ("build", "build-dependents"):
        login = next(s for s in jobs[name]["steps"] if s.get("name") == "Log in to the registry")
        assert login["if"] == "fromJSON(needs.plan.outputs.plan).push"
    assert "fromJSON(needs.plan.outputs.plan).push" in jobs["build-dependents"]["if"]


def test_github_plan_without_push(shipped, cli):
    document = json.loads(plan(cli, shipped / "matrix/aipcc.yaml", "--format", "github",
                               "--no-push", "--build-id", "on-pr-abc").out)
    assert document["push"] is False
    for wave in ("wave1", "wave2"):
        for entry in document[wave]["include"]:
            assert not entry["command"].endswith("--push")
            assert "--build-id on-pr-abc" in entry["command"]
    pushed = json.loads(plan(cli, shipped / "matrix/aipcc.yaml", "--format", "github").out)
    assert pushed["push"] is True
    assert all(e["command"].endswith(" --push") for e in pushed["wave1"]["include"])


def test_github_matrix_per_wave_validates(shipped, cli, tmp_path):
    output = plan(cli, shipped / "matrix/aipcc.yaml", "--format", "github").out
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
    devel = next(e for e in document["wave2"]["include"] if e["key"] == "devel/cpu-el9.6")
    assert devel["parent"] == "quay.io/aipcc/base-images/cpu-el9.6:3.0-dev"
    assert devel["command"].startswith("aipcc-build --matrix matrix/aipcc.yaml matrix --only "
                                       "devel/cpu-el9.6 --build-id dev ")


def test_plan_carries_its_options_into_every_job(shipped, cli):
    output = plan(cli, shipped / "matrix/aipcc.yaml", "--format", "github", "--registry",
                  "registry.example:5000/ns", "--no-tls-verify", "--parent-build-id",
                  "41", "--jobs", "2", "--capacity", "cpu=8,gpu=1", "--build-id", "42").out
    document = json.loads(output)
    assert document["registry_host"] == "registry.example:5000"
    assert document["tls_verify"] is False
    for wave in ("wave1", "wave2"):
        for entry in document[wave]["include"]:
            assert entry["command"] == (
                f"aipcc-build --matrix matrix/aipcc.yaml matrix --only {entry['key']} "
                "--build-id 42 --registry registry.example:5000/ns --no-tls-verify "
                "--parent-build-id 41 --jobs 2 --capacity cpu=8,gpu=1 --report "
                "build-report.json --junit junit.xml --log-dir logs --push")


def test_a_platform_filter_of_plan_applies_to_every_job_it_emits(cli):
    """One job per multi-platform image, keyed kind/name; plan's --platform narrows what
    each job builds (a CI run without emulated arm64 builds)."""
    everything = tekton_schema.load(plan(cli, REPO / "matrix/demo.yaml", "--format", "gitlab").out)
    narrowed = tekton_schema.load(plan(cli, REPO / "matrix/demo.yaml", "--format", "gitlab",
                                   "--platform", "linux/amd64").out)
    assert everything.keys() == narrowed.keys()
    job = "build:runtime/cuda-12.8-debian"
    assert everything[job]["needs"] == narrowed[job]["needs"] == ["build:base/cuda-12.8-debian"]
    build = everything[job]["script"][-1]
    assert "--only runtime/cuda-12.8-debian " in build and "--platform" not in build
    assert "--only runtime/cuda-12.8-debian --build-id dev --platform linux/amd64 " in (
        narrowed[job]["script"][-1])
    data = json.loads(plan(cli, REPO / "matrix/demo.yaml", "--platform", "linux/amd64").out)
    assert {tuple(image["platforms"]) for image in data["images"]} == {("linux/amd64",)}


def test_plan_refuses_bad_slots_before_emitting(shipped, cli):
    result = cli("--matrix", str(shipped / "matrix/aipcc.yaml"), "plan", "--format", "gitlab",
                 "--capacity", "cpu")
    assert result.code == 2 and "--capacity" in result.err and result.out == ""


def test_github_schema_of_our_own_rejects_an_empty_or_oversized_matrix(tmp_path):
    entry = {"key": "builder/x", "name": "x", "kind": "builder", "accelerator": "cpu",
             "version": None, "os": "ubi9", "reference": "r", "parent": "", "fetch": "",
             "command": "aipcc-build matrix --only builder/x --push"}
    top = {"registry_host": "quay.io", "tls_verify": True, "push": True}
    for bad in ({"images": 0, "waves": 1, "wave1": {"include": []}, **top},
                {"images": 257, "waves": 1, "wave1": {"include": [entry] * 257}, **top}):
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        assert check_jsonschema("--schemafile", str(SCHEMA),
                                str(tmp_path / "bad.json")).returncode == 1


def test_github_empty_plan_emits_no_matrix_and_says_so(shipped, cli, tmp_path):
    result = plan(cli, shipped / "matrix/aipcc.yaml", "--format", "github", *EMPTY_SELECTION)
    assert json.loads(result.out) == {"images": 0, "waves": 0, "registry_host": "quay.io",
                                      "tls_verify": True, "push": True}
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


def test_github_limit_of_256_jobs_is_a_clear_error(tmp_path, cli):
    path = write_big_matrix(tmp_path, versions=130)
    result = cli("--matrix", str(path), "plan", "--format", "github")
    assert result.code == 2
    assert "wave 1 has 260 images, over GitHub's limit of 256 jobs per matrix" in result.err
    assert "--accelerator" in result.err
    fits = cli("--matrix", str(path), "plan", "--format", "github", "--os", "a")
    assert fits.code == 0 and json.loads(fits.out)["images"] == 130


# GitLab -----------------------------------------------------------------------------------

def test_gitlab_child_pipeline_validates_and_mirrors_the_dag(shipped, cli, tmp_path):
    matrix_path = shipped / "matrix/aipcc.yaml"
    output = plan(cli, matrix_path, "--format", "gitlab", "--build-id", "175").out
    (tmp_path / "child.yml").write_text(output)
    result = check_jsonschema("--builtin-schema", "vendor.gitlab-ci", str(tmp_path / "child.yml"))
    assert result.returncode == 0, result.stdout + result.stderr

    document = tekton_schema.load(output)
    jobs = {name: job for name, job in document.items()
            if isinstance(job, dict) and "script" in job}
    images = expand(load(matrix_path))
    assert len(jobs) == len(images)  # one job per image
    for image in images:
        job = jobs[f"build:{image.key}"]
        assert job["script"] == [f"aipcc-build --matrix matrix/aipcc.yaml matrix --only "
                                 f"{image.key} --build-id 175 --report build-report.json "
                                 "--junit junit.xml --log-dir logs --push"]
        assert job["artifacts"] == {"when": "always",
                                    "paths": ["build-report.json", "junit.xml", "logs/"],
                                    "reports": {"junit": "junit.xml"}}
        expected = [f"build:{image.depends_on}"] if image.depends_on else []
        assert job["needs"] == expected
    assert all(need in jobs for job in jobs.values() for need in job["needs"])
    assert acyclic({name: job["needs"] for name, job in jobs.items()})


def test_gitlab_empty_plan_is_a_valid_pipeline(shipped, cli, tmp_path):
    result = plan(cli, shipped / "matrix/aipcc.yaml", "--format", "gitlab", *EMPTY_SELECTION)
    assert "nothing to build" in result.err
    (tmp_path / "child.yml").write_text(result.out)
    assert check_jsonschema("--builtin-schema", "vendor.gitlab-ci",
                            str(tmp_path / "child.yml")).returncode == 0
    assert list(tekton_schema.load(result.out)) == ["stages", "variables", "default",
                                                "nothing-to-build"]


def test_gitlab_parent_example_validates_and_triggers_the_artifact():
    path = REPO / "docs/ci/gitlab-ci.yml"
    result = check_jsonschema("--builtin-schema", "vendor.gitlab-ci", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    document = tekton_schema.load(path.read_text())
    trigger = document["build"]["trigger"]
    assert trigger["strategy"] == "depend"
    assert trigger["include"] == [{"artifact": "child-pipeline.yml", "job": "plan"}]
    assert "child-pipeline.yml" in document["plan"]["artifacts"]["paths"]
    assert "--format gitlab" in document["plan"]["script"][-1]
    # What the child's jobs need comes down from the parent.
    assert trigger["forward"]["yaml_variables"] is True
    assert document["variables"]["BUILDAH_ISOLATION"] == "chroot"
    assert document["variables"]["AIPCC_BUILD_IMAGE"] == "quay.io/aipcc/ci/aipcc-build:1-main"


def test_gitlab_schema_check_can_fail(tmp_path):
    (tmp_path / "bad.yml").write_text("job:\n  script: [true]\n  needs: {a: 1}\n")
    assert check_jsonschema("--builtin-schema", "vendor.gitlab-ci",
                            str(tmp_path / "bad.yml")).returncode == 1


# Tekton -----------------------------------------------------------------------------------

@pytest.fixture
def tekton_repo(repo: Path) -> Path:
    return with_origin(repo, "https://git.example.com/aipcc/images.git")


def check_tekton_document(document: dict, matrix_path: Path, build_id: str
                          ) -> dict[str, list[dict]]:
    """What every PipelineRun we emit must hold; returns each image key's buildah tasks
    (one per platform for an image of several)."""
    spec = document["spec"]
    tasks = spec["pipelineSpec"]["tasks"]
    by_name = {task["name"]: task for task in tasks}
    assert len(by_name) == len(tasks)
    for task in tasks:
        assert DNS_LABEL.match(task["name"]) and len(task["name"]) <= 63, task["name"]
        assert set(task.get("runAfter", [])) <= set(by_name)  # every runAfter target exists
        assert task.get("timeout"), f"{task['name']} has no timeout"
    after = {task["name"]: task.get("runAfter", []) for task in tasks}
    assert acyclic(after)
    for task in tasks:  # a task reads results only of tasks it runs after
        for name in re.findall(r"\$\(tasks\.([a-z0-9-]+)\.results\.", json.dumps(task["params"])):
            assert name in before(after, task["name"]), (task["name"], name)
    pinned = [entry["pipelineTaskName"] for entry in spec.get("taskRunSpecs", [])]
    assert len(pinned) == len(set(pinned)) and set(pinned) <= set(by_name)
    # The run's timeout covers its longest chain of task timeouts.
    assert minutes(spec["timeouts"]["pipeline"]) >= longest_chain(by_name, after)
    # No volume shared by every task: each image's tasks use their own.
    bound = [{w["workspace"] for w in task.get("workspaces", []) if w["name"] != "basic-auth"}
             for task in tasks]
    assert all(len(b) <= 1 for b in bound) and len(set().union(*bound)) > 1
    expected = {}  # the IMAGE a build task pushes -> (image, platform)
    for image in expand(load(matrix_path)):
        reference = f"{image.repository}:{image.tag.rsplit('-', 1)[0]}-{build_id}"
        for platform in image.platforms:
            arch = platform.split("/")[1]
            expected[f"{reference}-{arch}" if image.multi_platform else reference] = (
                image, platform)
    builds = [task for task in tasks if re.search(r"-build(-[a-z0-9]+)?$", task["name"])]
    assert len(builds) == len(expected)  # one build task per image and platform
    by_key: dict[str, list[dict]] = {}
    for task in builds:
        given = {p["name"]: p["value"] for p in task["params"]}
        assert set(given) <= set(BUILDAH_PARAMS) and set(given) >= BUILDAH_REQUIRED
        for name, value in given.items():
            assert isinstance(value, BUILDAH_PARAMS.get(name, str)), (name, value)
        assert {w["name"] for w in task["workspaces"]} == BUILDAH_WORKSPACES
        assert given["BUILD_ARGS"] == [f"AIPCC_BUILD_ID={build_id}"]
        assert given["TLSVERIFY"] == "true"
        image, platform = expected[given["IMAGE"]]
        assert given["DOCKERFILE"] == project_path(
            image.containerfiles.get(platform, image.containerfile), matrix_path)
        by_key.setdefault(image.key, []).append(task)
    ready = {}  # image key -> the task its dependents build after
    for key, image_builds in by_key.items():
        validates = []
        for task in image_builds:
            head, _, arch = task["name"].rpartition("-build")
            validate = by_name[f"{head}-validate{arch}"]
            assert validate["runAfter"] == [task["name"]]
            assert "aipcc-build validate" in validate["taskSpec"]["steps"][0]["script"]
            validates.append(validate["name"])
        stem = image_builds[0]["name"].rpartition("-build")[0]
        if len(image_builds) > 1:  # joined in a list once every platform is validated
            assert sorted(by_name[f"{stem}-join"]["runAfter"]) == sorted(validates)
            ready[key] = f"{stem}-join"
        else:
            assert f"{stem}-join" not in by_name
            ready[key] = validates[0]
    for image, _ in expected.values():
        if image.depends_on:  # built once its parent is validated (and joined)
            for task in by_key[image.key]:
                assert ready[image.depends_on] in task["runAfter"]
    return by_key


def before(after: dict[str, list[str]], name: str) -> set[str]:
    """The tasks NAME runs after, directly or not."""
    found: set[str] = set()
    todo = list(after[name])
    while todo:
        task = todo.pop()
        if task not in found:
            found.add(task)
            todo += after[task]
    return found


def minutes(duration: str) -> int:
    assert re.fullmatch(r"[0-9]+m", duration), duration
    return int(duration[:-1])


def longest_chain(by_name: dict[str, dict], after: dict[str, list[str]]) -> int:
    ends: dict[str, int] = {}

    def end(name: str) -> int:
        if name not in ends:
            ends[name] = max((end(n) for n in after[name]), default=0) + minutes(
                by_name[name]["timeout"])
        return ends[name]

    return max(end(name) for name in by_name)


def project_path(path: str, matrix_path: Path) -> str:
    return str(Path(path).relative_to(matrix_path.parent.parent))


def test_tekton_pipelinerun_structure(tekton_repo, cli):
    matrix_path = tekton_repo / "matrix/aipcc.yaml"
    output = plan(cli, matrix_path, "--format", "tekton", "--build-id", "175").out
    assert tekton_schema.errors(output) == []
    document = tekton_schema.load(output)
    assert DNS_LABEL.match(document["metadata"]["generateName"].rstrip("-"))
    params = {p["name"]: p["value"] for p in document["spec"]["params"]}
    assert params == {"git-url": "https://git.example.com/aipcc/images.git",
                      "git-revision": git(tekton_repo, "rev-parse", "HEAD").strip(),
                      "ci-image": "quay.io/aipcc/ci/aipcc-build:1-main"}
    by_key = check_tekton_document(document, matrix_path, "175")
    tasks = document["spec"]["pipelineSpec"]["tasks"]
    clones = [t for t in tasks if t["name"].endswith("-clone")]
    assert len(clones) == len(by_key)
    for clone in clones:
        assert clone["taskRef"] == {"name": "git-clone"}
        assert {p["name"] for p in clone["params"]} >= set(GIT_CLONE_PARAMS)
    assert all(task["taskRef"] == {"name": "buildah"}
               for builds in by_key.values() for task in builds)
    # One platform too: clone, fetch and build on a node of its architecture (the catalog's
    # buildah builds its node's platform), validated as that platform.
    pinned = {entry["pipelineTaskName"]: entry["podTemplate"]
              for entry in document["spec"]["taskRunSpecs"]}
    for builds in by_key.values():
        for task in builds:
            stem = task["name"].rpartition("-build")[0]
            for name in (task["name"], f"{stem}-clone"):
                assert pinned[name] == {"nodeSelector": {"kubernetes.io/arch": "amd64"}}
            validate = by_name(document)[f"{stem}-validate"]
            assert {"name": "PLATFORM", "value": "linux/amd64"} in validate["params"]


def by_name(document: dict) -> dict[str, dict]:
    return {task["name"]: task for task in document["spec"]["pipelineSpec"]["tasks"]}


def test_demo_tekton_fetches_its_context_before_the_build(repo, cli):
    git(repo, "remote", "add", "origin", "https://git.example.com/aipcc/images.git")
    output = plan(cli, repo / "matrix/demo.yaml", "--format", "tekton", "--allow-loopback",
                  "--platform", "linux/arm64").out
    assert tekton_schema.errors(output) == []
    tasks = {t["name"]: t for t in tekton_schema.load(output)["spec"]["pipelineSpec"]["tasks"]}
    fetch = tasks["base-cpu-debian-fetch"]
    assert "scripts/demo-wheel-index-serve" in fetch["taskSpec"]["steps"][0]["script"]
    params = {p["name"]: p["value"] for p in tasks["base-cpu-debian-build"]["params"]}
    assert params["DOCKERFILE"] == "containerfiles/demo/base/cpu-debian/Containerfile.arm64"
    assert fetch["runAfter"] == ["base-cpu-debian-clone"]
    assert tasks["base-cpu-debian-build"]["runAfter"] == ["base-cpu-debian-fetch"]
    assert tasks["runtime-cpu-debian-build"]["runAfter"] == [
        "runtime-cpu-debian-fetch", "base-cpu-debian-validate"]
    # One platform: built on an arm64 node, and checked to be arm64; no join.
    pinned = {entry["pipelineTaskName"]: entry["podTemplate"]["nodeSelector"]
              for entry in tekton_schema.load(output)["spec"]["taskRunSpecs"]}
    assert pinned["base-cpu-debian-build"] == {"kubernetes.io/arch": "arm64"}
    validate = {p["name"]: p["value"] for p in tasks["base-cpu-debian-validate"]["params"]}
    assert validate["PLATFORM"] == "linux/arm64" and "base-cpu-debian-join" not in tasks


def test_tekton_refuses_a_registry_its_buildah_task_would_not_build_from(tekton_repo, cli):
    result = cli("--matrix", str(tekton_repo / "matrix/demo.yaml"), "plan", "--format",
                 "tekton", "--allow-loopback", "--registry", "127.0.0.1:5000/x")
    assert result.code == 2 and "--registry" in result.err and result.out == ""
    assert "FROM its parent in localhost/aipcc-demo" in result.err


def test_tekton_pins_each_platform_to_its_nodes_then_joins_them_with_buildah(repo, cli):
    """Plain Tekton: per platform a clone, fetch and build of its own on nodes of that
    architecture (a ReadWriteOnce volume stays on one node); validations and the join run
    anywhere; the join is buildah in the CI image."""
    git(repo, "remote", "add", "origin", "https://git.example.com/aipcc/images.git")
    matrix_path = repo / "matrix/demo.yaml"
    output = plan(cli, matrix_path, "--format", "tekton", "--build-id", "9",
                  "--allow-loopback").out
    assert tekton_schema.errors(output) == []
    document = tekton_schema.load(output)
    by_key = check_tekton_document(document, matrix_path, "9")
    assert all(len(builds) == 2 for builds in by_key.values())
    tasks = {t["name"]: t for t in document["spec"]["pipelineSpec"]["tasks"]}
    pinned = {entry["pipelineTaskName"]: entry["podTemplate"]
              for entry in document["spec"]["taskRunSpecs"]}
    for arch in ("amd64", "arm64"):
        chain = [f"base-cpu-debian-{step}-{arch}" for step in ("clone", "fetch", "build")]
        for name in chain:
            assert pinned[name] == {"nodeSelector": {"kubernetes.io/arch": arch}}
            assert {w["workspace"] for w in tasks[name]["workspaces"]} == {
                f"source-base-cpu-debian-{arch}"}
        assert tasks[chain[2]]["taskRef"] == {"name": "buildah"}
        assert tasks[chain[2]]["runAfter"] == [chain[1]]
        assert "PLATFORM" not in {p["name"] for p in tasks[chain[2]]["params"]}
        assert f"base-cpu-debian-validate-{arch}" not in pinned
    assert len(pinned) == len(by_key) * 2 * 3
    join = tasks["base-cpu-debian-join"]
    assert "base-cpu-debian-join" not in pinned
    assert join["runAfter"] == ["base-cpu-debian-validate-amd64", "base-cpu-debian-validate-arm64"]
    reference = "localhost/aipcc-demo/base/cpu-debian:1.0-9"
    assert {p["name"]: p["value"] for p in join["params"]} == {
        "IMAGE": reference, "TLSVERIFY": "true",
        "IMAGES": [f"{reference}-{arch}@$(tasks.base-cpu-debian-build-{arch}.results.IMAGE_DIGEST)"
                   for arch in ("amd64", "arm64")]}
    step = join["taskSpec"]["steps"][0]
    assert step["image"] == "$(params.ci-image)" and step["args"] == ["$(params.IMAGES[*])"]
    assert "buildah manifest push --all" in step["script"]
    assert {"name": "IMAGES", "type": "array"} in join["taskSpec"]["params"]
    assert [r["name"] for r in join["taskSpec"]["results"]] == ["IMAGE_DIGEST", "IMAGE_URL"]
    for arch in ("amd64", "arm64"):
        assert tasks[f"runtime-cpu-debian-build-{arch}"]["runAfter"] == [
            f"runtime-cpu-debian-fetch-{arch}", "base-cpu-debian-join"]


def test_tekton_refuses_a_local_path_as_the_clone_url(shipped, cli):
    git(shipped, "init", "-q")
    git(shipped, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty",
        "-m", "x")
    with_origin(shipped, str(shipped))
    result = cli("--matrix", str(shipped / "matrix/aipcc.yaml"), "plan", "--format", "tekton")
    assert result.code == 2 and "which a cluster cannot reach" in result.err


def test_tekton_names_stay_valid_and_unique_when_long(tmp_path, cli):
    path = write_big_matrix(tmp_path, versions=2)
    text = path.read_text().replace("  a: {from", "  " + "a" * 70 + ": {from")
    path.write_text(text.replace("os: [a, b]", "os: [" + "a" * 70 + ", b]"))
    git(tmp_path, "init", "-q")
    git(tmp_path, "remote", "add", "origin", "https://git.example.com/big.git")
    git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
        "--allow-empty", "-m", "x")
    output = plan(cli, path, "--format", "tekton", "--allow-uncommitted").out
    names = [t["name"] for t in tekton_schema.load(output)["spec"]["pipelineSpec"]["tasks"]]
    assert len(names) == len(set(names)) == 4 * 3  # clone, build, validate per image
    for name in names:
        assert DNS_LABEL.match(name) and len(name) <= 63, name


def test_tekton_names_of_an_image_of_several_platforms_stay_labels_when_long(tmp_path, cli):
    path = write_big_matrix(tmp_path, versions=1)
    path.write_text(path.read_text().replace("os: [a, b]", "os: [" + "a" * 50 + ", b]").replace(
        "  a: {from", "  " + "a" * 50 + ": {from") + "platforms: [linux/amd64, linux/ppc64le]\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "remote", "add", "origin", "https://git.example.com/big.git")
    git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
        "--allow-empty", "-m", "x")
    output = plan(cli, path, "--format", "tekton", "--allow-uncommitted").out
    assert tekton_schema.errors(output) == []
    names = [t["name"] for t in tekton_schema.load(output)["spec"]["pipelineSpec"]["tasks"]]
    # Per image: clone, build and validate per platform, and a join.
    assert len(names) == len(set(names)) == 2 * (3 * 2 + 1)
    assert any(name.endswith("-validate-ppc64le") for name in names)
    for name in names:
        assert DNS_LABEL.match(name) and len(name) <= 63, name


@pytest.mark.parametrize("fixture", sorted((tekton_schema.DATA / "valid").glob("*.yaml")),
                         ids=lambda path: path.name)
def test_tekton_schema_accepts_its_valid_fixtures(fixture):
    assert tekton_schema.errors(fixture.read_text()) == []


@pytest.mark.parametrize("fixture", sorted((tekton_schema.DATA / "invalid").glob("*.yaml")),
                         ids=lambda path: path.name)
def test_tekton_schema_rejects_its_invalid_fixtures(fixture):
    assert tekton_schema.errors(fixture.read_text()) != []


def test_tekton_empty_plan_emits_nothing(tekton_repo, cli):
    result = plan(cli, tekton_repo / "matrix/aipcc.yaml", "--format", "tekton", *EMPTY_SELECTION)
    assert result.out == "" and "nothing to build" in result.err


def test_json_plan_lists_every_field(shipped, cli):
    document = json.loads(plan(cli, shipped / "matrix/aipcc.yaml").out)
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


def test_emitted_documents_do_not_depend_on_the_working_directory(shipped, cli, monkeypatch):
    monkeypatch.chdir(shipped / "templates")
    first = plan(cli, shipped / "matrix/aipcc.yaml", "--format", "gitlab").out
    monkeypatch.chdir(shipped)
    assert plan(cli, Path("matrix/aipcc.yaml"), "--format", "gitlab").out == first


def test_tekton_without_an_origin_remote_is_a_clear_input_error(shipped, cli):
    git(shipped, "init", "-q")
    without_source_url(shipped)
    result = cli("--matrix", str(shipped / "matrix/aipcc.yaml"), "plan", "--format", "tekton")
    assert result.code == 2
    assert "no 'origin' remote" in result.err and "git remote add origin" in result.err


def test_tekton_schema_names_its_release_and_rejects_unknown_fields(tekton_repo, cli):
    schema = json.loads(tekton_schema.SCHEMA.read_text())
    assert "Tekton release: Tekton Pipelines v0.47" in schema["$comment"]
    output = plan(cli, tekton_repo / "matrix/aipcc.yaml", "--format", "tekton").out
    misplaced = output.replace("    timeout: 240m\n", "    timeouts: 240m\n", 1)
    assert misplaced != output and tekton_schema.errors(misplaced) != []
