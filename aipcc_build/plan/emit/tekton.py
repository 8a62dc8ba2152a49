"""Tekton: a tekton.dev/v1 PipelineRun, per image a clone, a fetch, a buildah build and a
validation; and the same as a Pipelines-as-Code PipelineRun for Konflux (`.tekton/`)."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Any, Optional

import yaml

from ...errors import InputError
from ...matrix import Matrix
from ...render import BUILD_ID_ARG
from ..dag import BuildPlan, PlannedBuild, build_context, project_path
from . import GitSource, JobCommand

# Kubernetes object names used as Tekton task names: DNS-1123 labels.
DNS_LABEL_LIMIT = 63
# Per image: <name>-clone, <name>-fetch, <name>-build, <name>-validate.
STEPS = ("clone", "fetch", "build", "validate")
SUFFIX_LIMIT = max(len(step) for step in STEPS) + 1
# Per-task timeouts (Tekton's default, one hour for the whole run, would stop long builds).
TIMEOUT_MINUTES = {"clone": 10, "fetch": 30, "build": 4 * 60, "validate": 30}
# What a cluster can clone: a network URL or scp-like ssh (user@host:path), not a path.
CLONABLE = re.compile(r"^((https?|ssh|git)://|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:)")
# What Pipelines-as-Code substitutes when it starts the run (Konflux's .tekton/ files).
PAC_URL, PAC_REVISION = "{{source_url}}", "{{revision}}"
# Konflux's git-clone task checks out into this subdirectory of its `output` workspace, and
# its buildah task builds from there (SOURCE_CODE_DIR); the catalog's pair uses the root.
KONFLUX_SOURCE_DIR = "source"


def tekton(matrix: Matrix, plan: BuildPlan, command: JobCommand,
           source: Optional[GitSource]) -> str:
    """A tekton.dev/v1 PipelineRun. SOURCE None: the Pipelines-as-Code form for Konflux
    (bundles resolver, {{source_url}}, {{revision}} as the build id, on-event annotations);
    else a plain PipelineRun cloning SOURCE with the catalog's tasks installed in the
    cluster (git-clone, buildah 0.8 or later: BUILD_ARGS, TLSVERIFY).

    Per image: clone into the image's own volume (no ReadWriteOnce volume shared by every
    task, which would pin the whole run to one node), run the matrix's `ci.fetch`, build and
    push with buildah, validate the pushed image with aipcc-build in the CI image; an image
    built FROM another starts building once its parent is validated.

    Empty when the plan is: Kubernetes has no valid PipelineRun without a build task.
    """
    if not plan.builds:
        return ""
    if source is not None and not CLONABLE.match(source.url):
        raise InputError(f"the PipelineRun would clone '{source.url}', which a cluster cannot "
                         "reach: point the 'origin' remote at the repository's https, ssh or "
                         "git URL", field="git_url")
    _check_parents(matrix, plan, command)
    _check_platforms(plan)
    konflux = source is None
    build_id = PAC_REVISION if konflux else command.build_id
    names = tekton_task_names(plan.builds)
    tasks: list[dict[str, Any]] = []
    workspaces: list[dict[str, Any]] = []
    for build in plan.builds:
        image = build.image
        name = names[image.key]
        workspace = f"source-{name}"
        workspaces.append({"name": workspace, "volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }}})
        ready = f"{name}-clone"
        tasks.append({
            "name": ready,
            "taskRef": _task_ref(matrix, "git-clone", konflux),
            "params": [
                {"name": "url", "value": "$(params.git-url)"},
                {"name": "revision", "value": "$(params.git-revision)"},
                {"name": "subdirectory", "value": KONFLUX_SOURCE_DIR if konflux else ""},
            ],
            "workspaces": [{"name": "output", "workspace": workspace},
                           *([{"name": "basic-auth", "workspace": "git-auth"}]
                             if konflux else [])],
            "timeout": _minutes("clone"),
        })
        checkout = "$(workspaces.source.path)" + (f"/{KONFLUX_SOURCE_DIR}" if konflux else "")
        if matrix.ci.fetch:
            tasks.append(_ci_task(f"{name}-fetch", "fetch", [ready], matrix.ci.fetch,
                                  workspace, checkout))
            ready = f"{name}-fetch"
        reference = f"{image.repository}:{matrix.product.version}-{build_id}"
        tasks.append({
            "name": f"{name}-build",
            "taskRef": _task_ref(matrix, "buildah", konflux),
            "runAfter": [ready, *(f"{names[need]}-validate" for need in build.needs)],
            "params": [
                {"name": "IMAGE", "value": reference},
                {"name": "DOCKERFILE", "value": project_path(
                    matrix, image.containerfiles.get(image.platforms[0], image.containerfile)
                    if image.platforms else image.containerfile)},
                {"name": "CONTEXT", "value": project_path(matrix, build_context(image))},
                {"name": "BUILD_ARGS", "value": [f"{BUILD_ID_ARG}={build_id}"]},
                {"name": "TLSVERIFY", "value": str(command.tls_verify).lower()},
            ],
            "workspaces": [{"name": "source", "workspace": workspace}],
            "timeout": _minutes("build"),
        })
        validate = _ci_task(
            f"{name}-validate", "validate", [f"{name}-build"],
            'aipcc-build validate --tls-verify "$TLSVERIFY" "docker://$IMAGE@$DIGEST"', None,
            None)
        validate["params"] = [
            {"name": "IMAGE", "value": reference},
            {"name": "DIGEST", "value": f"$(tasks.{name}-build.results.IMAGE_DIGEST)"},
            {"name": "TLSVERIFY", "value": str(command.tls_verify).lower()},
        ]
        validate["taskSpec"]["params"] = [{"name": p, "type": "string"}
                                          for p in ("IMAGE", "DIGEST", "TLSVERIFY")]
        validate["taskSpec"]["steps"][0]["env"] = [
            {"name": p, "value": f"$(params.{p})"} for p in ("IMAGE", "DIGEST", "TLSVERIFY")]
        tasks.append(validate)
    if konflux:
        workspaces.append({"name": "git-auth", "secret": {"secretName": "{{ git_auth_secret }}"}})
    depth = len(plan.waves)
    product = _dns_label(matrix.product.name)
    metadata: dict[str, Any] = {
        "name": f"{product}-images-on-push",
        "annotations": {
            "pipelinesascode.tekton.dev/on-event": "[push]",
            "pipelinesascode.tekton.dev/on-target-branch": "[main]",
            "pipelinesascode.tekton.dev/max-keep-runs": "3",
        },
    } if konflux else {
        "generateName": f"{product}-build-",
        "labels": {"ai.aipcc/build-id": build_id},
    }
    document = {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": metadata,
        "spec": {
            "params": [
                {"name": "git-url", "value": source.url if source else PAC_URL},
                {"name": "git-revision", "value": source.revision if source else PAC_REVISION},
                {"name": "ci-image", "value": matrix.ci.image},
            ],
            # The longest chain of images, each cloned, fetched, built and validated in turn.
            "timeouts": {"pipeline": f"{depth * sum(TIMEOUT_MINUTES.values())}m"},
            "pipelineSpec": {
                "params": [{"name": "git-url", "type": "string"},
                           {"name": "git-revision", "type": "string"},
                           {"name": "ci-image", "type": "string", "default": matrix.ci.image,
                            "description": "The image aipcc-build runs in (matrix ci.image)"}],
                "workspaces": [{"name": w["name"]} for w in workspaces],
                "tasks": tasks,
            },
            "workspaces": workspaces,
        },
    }
    header = ("# Generated by aipcc-build plan --format konflux: a Pipelines-as-Code "
              "PipelineRun for .tekton/.\n" if konflux else
              "# Generated by aipcc-build plan --format tekton: per image a clone, a fetch, "
              "a buildah build and a validation.\n")
    return header + yaml.safe_dump(document, sort_keys=False, width=4096)


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


def _check_platforms(plan: BuildPlan) -> None:
    """The buildah task builds the platform of the node it runs on: neither the catalog's
    task nor Konflux's bundle (whose PLATFORM only names cache tags) builds another one, or
    joins platforms in a manifest list. Refuse an image that needs that."""
    for build in plan.builds:
        if build.image.multi_platform:
            raise InputError(
                f"{build.image.key} is built for {', '.join(build.image.platforms)}, and the "
                "buildah task builds one platform, its node's: plan one platform of it",
                field="filters.platforms")


def _task_ref(matrix: Matrix, task: str, konflux: bool) -> dict[str, Any]:
    if not konflux:
        return {"name": task}
    return {"resolver": "bundles", "params": [
        {"name": "name", "value": task},
        {"name": "bundle", "value": matrix.ci.bundles[task]},
        {"name": "kind", "value": "task"},
    ]}


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


def _minutes(step: str) -> str:
    return f"{TIMEOUT_MINUTES[step]}m"


def tekton_task_names(builds: tuple[PlannedBuild, ...]) -> dict[str, str]:
    """Image key -> a unique DNS-1123 label that a step suffix (`-validate`) keeps one:
    `devel/cuda-12.8-el9.6` -> `devel-cuda-12-8-el9-6`.

    A name that is too long or collides after the mapping gets a hash of the key instead of
    its tail, so names stay unique and stable from one plan to the next.
    """
    limit = DNS_LABEL_LIMIT - SUFFIX_LIMIT
    plain = {b.image.key: _dns_label(b.image.key) for b in builds}
    taken = Counter(plain.values())
    names = {}
    for key, name in plain.items():
        if len(name) > limit or taken[name] > 1:
            digest = hashlib.sha256(key.encode()).hexdigest()[:8]
            name = f"{name[:limit - 9].rstrip('-')}-{digest}"
        names[key] = name
    return names


def _dns_label(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"

