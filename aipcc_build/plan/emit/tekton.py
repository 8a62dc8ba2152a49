"""Tekton: a tekton.dev/v1 PipelineRun, per image a clone, a fetch, a buildah build and a
validation on a node of each platform's architecture, and for an image of several
platforms one join into a manifest list. (Konflux's component builds: konflux.py.)"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

from ... import defaults
from ...errors import InputError
from ...kubernetes_names import DNS_LABEL_LIMIT, dns_label
from ...matrix import ImageSpec, Matrix
from ...matrix.model import CLONABLE
from ...matrix.platforms import describe
from ...render import BUILD_ID_ARG
from ..dag import BuildPlan, PlannedBuild, build_context, project_path
from . import GitSource, JobCommand, yaml_text

# Kubernetes object names used as Tekton task names: DNS-1123 labels.
# Per image: <name>-clone, <name>-fetch, <name>-build, <name>-validate. An image of several
# platforms has per platform <name>-clone-<arch>, <name>-fetch-<arch>, <name>-build-<arch>
# and <name>-validate-<arch>, then one <name>-join.
STEPS = ("clone", "fetch", "build", "validate")
# Per-task timeouts (Tekton's default, one hour for the whole run, would stop long builds).
TIMEOUT_MINUTES = {"clone": 10, "fetch": 30, "build": int(defaults.BUILD_TIMEOUT // 60),
                   "validate": 30, "join": 15}
# The label Kubernetes gives every node: its OCI architecture (amd64, arm64).
NODE_ARCH_LABEL = "kubernetes.io/arch"
# An image pushed as IMAGE (`repository:tag`) by its DIGEST: containers/image refuses a
# reference with both a tag and a digest, so the tag goes (${IMAGE%:*}: a registry's port
# comes before the last colon).
# TLSVERIFY is the buildah tasks' "true"/"false"; aipcc-build takes --tls-verify/--no-.
VALIDATE_SCRIPT = ('aipcc-build validate "--$([ "$TLSVERIFY" = false ] && echo no-)tls-verify"'
                   '{only} "docker://${{IMAGE%:*}}@$DIGEST"')
# Plain Tekton's join, in the CI image: the validated platform images, given as arguments
# (`repository:tag@sha256:...`, as Konflux's build-image-index takes them), become one
# manifest list pushed under IMAGE with them.
JOIN_SCRIPT = "\n".join((
    'list="aipcc-join-$$"',
    'buildah manifest create "$list" >/dev/null',
    'for instance in "$@"; do',
    '  tagged="${instance%@*}"',
    '  buildah manifest add --tls-verify="$TLSVERIFY" "$list" \\',
    '    "docker://${tagged%:*}@${instance##*@}"',
    "done",
    'buildah manifest push --all --rm --tls-verify="$TLSVERIFY" \\',
    '  --digestfile "$(results.IMAGE_DIGEST.path)" "$list" "docker://$IMAGE"',
    'printf "%s" "$IMAGE" > "$(results.IMAGE_URL.path)"',
))


def tekton(matrix: Matrix, plan: BuildPlan, command: JobCommand, source: GitSource) -> str:
    """A tekton.dev/v1 PipelineRun cloning SOURCE with the catalog's tasks installed in the
    cluster (git-clone, buildah 0.8 or later: BUILD_ARGS, TLSVERIFY).

    Per image: clone into the image's own volume (no ReadWriteOnce volume shared by every
    task, which would pin the whole run to one node), run the matrix's `ci.fetch`, build and
    push with buildah, validate the pushed image with aipcc-build in the CI image; an image
    built FROM another starts building once its parent is validated.

    Every build runs on a node of its platform's architecture (the catalog's buildah builds
    its node's platform), from a clone of its own there, and is validated as that platform.
    An image of several platforms is tagged `reference-<arch>` per platform, and then one
    join task (buildah in the CI image) makes the manifest list under the image's
    reference. Its dependents build after the join, each platform pulling its own.

    Empty when the plan is: Kubernetes has no valid PipelineRun without a build task.
    """
    if not plan.builds:
        return ""
    if not CLONABLE.match(source.url):
        raise InputError(f"the PipelineRun would clone '{source.url}', which a cluster cannot "
                         "reach: point the 'origin' remote at the repository's https, ssh or "
                         "git URL", field="git_url")
    _check_parents(matrix, plan, command)
    build_id = command.build_id
    run = _Run(matrix, build_id, str(command.tls_verify).lower())
    names = tekton_task_names(plan.builds)
    ready: dict[str, str] = {}  # image key -> the task its dependents' builds run after
    finish: dict[str, int] = {}  # image key -> minutes until that task ends, at most
    for build in plan.builds:
        key = build.image.key
        ready[key] = run.image(build.image, names[key], [ready[need] for need in build.needs])
        finish[key] = max((finish[need] for need in build.needs), default=0) + _chain_minutes(
            build.image)
    product = dns_label(matrix.product.name)
    metadata: dict[str, Any] = {
        "generateName": f"{product}-build-",
        "labels": {"ai.aipcc/build-id": build_id},
    }
    spec: dict[str, Any] = {
        "params": [
            {"name": "git-url", "value": source.url},
            {"name": "git-revision", "value": source.revision},
            {"name": "ci-image", "value": matrix.ci.image},
        ],
        # The longest chain of images, each cloned, fetched, built, validated (and joined)
        # in turn.
        "timeouts": {"pipeline": f"{max(finish.values())}m"},
        "pipelineSpec": {
            "params": [{"name": "git-url", "type": "string"},
                       {"name": "git-revision", "type": "string"},
                       {"name": "ci-image", "type": "string", "default": matrix.ci.image,
                        "description": "The image aipcc-build runs in (matrix ci.image)"}],
            "workspaces": [{"name": w["name"]} for w in run.workspaces],
            "tasks": run.tasks,
        },
        "workspaces": run.workspaces,
    }
    if run.task_run_specs:
        spec["taskRunSpecs"] = run.task_run_specs
    document = {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "metadata": metadata,
                "spec": spec}
    header = ("# Generated by aipcc-build plan --format tekton: per image a clone, a fetch, "
              "a buildah build and a validation.\n")
    return header + yaml_text(document)


@dataclass
class _Run:
    """The PipelineRun's parts, image by image."""

    matrix: Matrix
    build_id: str
    tls_verify: str  # "true" or "false", as the tasks take it
    tasks: list[dict[str, Any]] = field(default_factory=list)
    workspaces: list[dict[str, Any]] = field(default_factory=list)
    task_run_specs: list[dict[str, Any]] = field(default_factory=list)

    def image(self, image: ImageSpec, name: str, parents: list[str]) -> str:
        """The tasks of IMAGE, named after NAME, building after the PARENTS tasks; returns
        the task its dependents build after."""
        reference = f"{image.repository}:{self.matrix.product.version}-{self.build_id}"
        validated, instances = [], []
        for platform in image.platforms:
            # Only an image of several platforms names its tasks and tags by platform.
            arch = describe(platform).arch if image.multi_platform else ""
            ready, workspace = self.source(name, arch, platform)
            build = _name(name, "build", arch)
            tag = f"{reference}-{arch}" if arch else reference
            self.build(build, [ready, *parents], image, platform, tag, workspace)
            validated.append(self.validate(_name(name, "validate", arch), build, tag, platform))
            instances.append(f"{tag}@$(tasks.{build}.results.IMAGE_DIGEST)")
        if not image.multi_platform:
            return validated[0]
        return self.join(f"{name}-join", validated, reference, instances)

    def source(self, name: str, arch: str = "", placed: str = "") -> tuple[str, str]:
        """Clone into a volume of its own and run `ci.fetch` there, on a node of PLACED's
        architecture when given: the task a build waits for, and the workspace."""
        workspace = f"source-{name}" + (f"-{arch}" if arch else "")
        self.workspaces.append({"name": workspace, "volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }}})
        ready = _name(name, "clone", arch)
        self.tasks.append({
            "name": ready,
            "taskRef": {"name": "git-clone"},
            "params": [
                {"name": "url", "value": "$(params.git-url)"},
                {"name": "revision", "value": "$(params.git-revision)"},
                {"name": "subdirectory", "value": ""},
            ],
            "workspaces": [{"name": "output", "workspace": workspace}],
            "timeout": _minutes("clone"),
        })
        self.place(ready, placed)
        checkout = "$(workspaces.source.path)"
        if self.matrix.ci.fetch:
            fetch = _name(name, "fetch", arch)
            self.tasks.append(_ci_task(fetch, "fetch", [ready], self.matrix.ci.fetch,
                                       workspace, checkout))
            self.place(fetch, placed)
            ready = fetch
        return ready, workspace

    def build(self, name: str, after: list[str], image: ImageSpec, platform: str, tag: str,
              workspace: str) -> None:
        """Build IMAGE's PLATFORM with buildah on a node of its architecture and push it as
        TAG."""
        self.tasks.append({
            "name": name,
            "taskRef": {"name": "buildah"},
            "runAfter": after,
            "params": [
                {"name": "IMAGE", "value": tag},
                {"name": "DOCKERFILE", "value": project_path(self.matrix, image.containerfiles.get(
                    platform, image.containerfile))},
                {"name": "CONTEXT", "value": project_path(self.matrix, build_context(image))},
                {"name": "BUILD_ARGS", "value": [f"{BUILD_ID_ARG}={self.build_id}"]},
                {"name": "TLSVERIFY", "value": self.tls_verify},
            ],
            "workspaces": [{"name": "source", "workspace": workspace}],
            "timeout": _minutes("build"),
        })
        self.place(name, platform)

    def validate(self, name: str, build: str, tag: str, placed: str) -> str:
        """aipcc-build validate, in the CI image, on the image BUILD pushed as TAG; that it
        is PLACED's platform too, when given."""
        only = ' --platform "$PLATFORM"' if placed else ""
        task = _ci_task(name, "validate", [build], VALIDATE_SCRIPT.format(only=only), None,
                        None)
        _pass_params(task, {"IMAGE": tag, "DIGEST": f"$(tasks.{build}.results.IMAGE_DIGEST)",
                            "TLSVERIFY": self.tls_verify,
                            **({"PLATFORM": placed} if placed else {})})
        self.tasks.append(task)
        return name

    def join(self, name: str, after: list[str], reference: str, instances: list[str]) -> str:
        """The manifest list of INSTANCES (`tag@digest` each), pushed as REFERENCE once every
        task of AFTER passed."""
        task = _ci_task(name, "join", after, JOIN_SCRIPT, None, None)
        _pass_params(task, {"IMAGE": reference, "TLSVERIFY": self.tls_verify})
        task["params"].append({"name": "IMAGES", "value": instances})
        spec = task["taskSpec"]
        spec["params"].append({"name": "IMAGES", "type": "array"})
        spec["results"] = [{"name": "IMAGE_DIGEST", "description": "The manifest list's digest"},
                           {"name": "IMAGE_URL", "description": "Where it was pushed"}]
        spec["steps"][0]["args"] = ["$(params.IMAGES[*])"]
        self.tasks.append(task)
        return name

    def place(self, task: str, platform: str) -> None:
        """Run TASK on a node of PLATFORM's architecture, when given."""
        if platform:
            self.task_run_specs.append({"pipelineTaskName": task, "podTemplate": {
                "nodeSelector": {NODE_ARCH_LABEL: describe(platform).arch}}})


def _name(image: str, step: str, arch: str) -> str:
    return f"{image}-{step}-{arch}" if arch else f"{image}-{step}"


def _pass_params(task: dict[str, Any], values: dict[str, str]) -> None:
    """Give TASK's one step VALUES as string parameters and as environment variables (in
    place of `ci-image`: the step's image comes from the pipeline's parameter, which Tekton
    propagates into embedded task specs)."""
    task["params"] = [{"name": p, "value": v} for p, v in values.items()]
    task["taskSpec"]["params"] = [{"name": p, "type": "string"} for p in values]
    task["taskSpec"]["steps"][0]["env"] = [{"name": p, "value": f"$(params.{p})"}
                                           for p in values]


def _check_parents(matrix: Matrix, plan: BuildPlan, command: JobCommand) -> None:
    """The buildah task builds FROM what the Containerfile names: the parent in the
    matrix's registry at this run's build id. Refuse what would build on another one."""
    dependents = [b.image.key for b in plan.builds if b.image.depends_on is not None]
    if not dependents:
        return
    if command.registry and command.registry != matrix.registry:
        raise InputError(f"{dependents[0]} would be built FROM its parent in {matrix.registry}, "
                         f"not in {command.registry}: the buildah task builds FROM the "
                         "Containerfile's parent; push Tekton builds to the matrix's registry",
                         field="registry")
    if command.parent_build_id:
        raise InputError(f"{dependents[0]} would be built FROM its parent of this build, not "
                         f"of build {command.parent_build_id}: the buildah task builds FROM the "
                         "Containerfile's parent; plan its parent too", field="parent_build_id")


def _ci_task(name: str, step: str, after: list[str], script: str, workspace: Optional[str],
             checkout: Optional[str]) -> dict[str, Any]:
    """A task of one step in the CI image (aipcc-build, buildah, skopeo, git)."""
    spec_step: dict[str, Any] = {"name": step, "image": "$(params.ci-image)",
                                 "script": f"#!/bin/sh\nset -eu\n{script}\n"}
    task: dict[str, Any] = {
        "name": name,
        "runAfter": after,
        "params": [{"name": "ci-image", "value": "$(params.ci-image)"}],
        "taskSpec": {"params": [{"name": "ci-image", "type": "string"}], "steps": [spec_step]},
        "timeout": _minutes(step),
    }
    if workspace is not None:
        spec_step["workingDir"] = checkout
        task["taskSpec"]["workspaces"] = [{"name": "source"}]
        task["workspaces"] = [{"name": "source", "workspace": workspace}]
    return task


def _chain_minutes(image: ImageSpec) -> int:
    """How long an image's tasks may take one after the other: cloned, fetched, built,
    validated, and joined when it has several platforms."""
    return sum(TIMEOUT_MINUTES[step] for step in STEPS) + (
        TIMEOUT_MINUTES["join"] if image.multi_platform else 0)


def _minutes(step: str) -> str:
    return f"{TIMEOUT_MINUTES[step]}m"


def tekton_task_names(builds: tuple[PlannedBuild, ...]) -> dict[str, str]:
    """Image key -> a unique DNS-1123 label that the image's longest step suffix
    (`-validate`, `-validate-arm64` for an image of several platforms) keeps one:
    `devel/cuda-12.8-el9.6` -> `devel-cuda-12-8-el9-6`.

    A name that is too long or collides after the mapping gets a hash of the key instead of
    its tail, so names stay unique and stable from one plan to the next.
    """
    plain = {b.image.key: dns_label(b.image.key) for b in builds}
    taken = Counter(plain.values())
    names = {}
    for build in builds:
        key, name = build.image.key, plain[build.image.key]
        limit = DNS_LABEL_LIMIT - _longest_suffix(build.image)
        if len(name) > limit or taken[name] > 1:
            digest = hashlib.sha256(key.encode()).hexdigest()[:8]
            name = f"{name[:limit - 9].rstrip('-')}-{digest}"
        names[key] = name
    return names


def _longest_suffix(image: ImageSpec) -> int:
    """The length of the longest suffix a task name adds to the image's name."""
    arch = (max((describe(p).arch for p in image.platforms), key=len)
            if image.multi_platform else "")
    return len(_name("", "validate", arch))

