"""Fan a build plan out on CI engines: one module per engine, each returning its
document's text (`report` writes it); `ci_document` picks it by format. What every engine's
per-image job runs is here. The formats and their limits are explained in
docs/ci/README.md."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from ... import defaults

if TYPE_CHECKING:
    from ...matrix import Matrix
    from ..dag import BuildPlan

def yaml_text(document: Any) -> str:
    """DOCUMENT as the YAML every engine's file is written in: keys in the order built,
    long lines kept whole. libyaml's emitter when PyYAML has it: the pure-Python one spent
    nineteen twentieths of a 2,000-image Konflux plan (two minutes) writing YAML."""
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(document, Dumper=dumper, sort_keys=False, width=4096)


# Where every per-image job writes what the engine keeps as artifacts, relative to the
# project root the job runs in.
REPORT = defaults.REPORT_FILE
JUNIT = "junit.xml"
LOG_DIR = defaults.LOG_DIR


@dataclass(frozen=True)
class JobCommand:
    """The one per-image job contract every engine runs, pinned to what the plan was made
    with: from the project root of a clean checkout, run `fetch` (the matrix's `ci.fetch`,
    when it has one), then build one image FROM the parent this build id pushed to
    `registry` (or the parents' build, `parent_build_id`), validate it, push it, and write
    the report, the logs and the JUnit file. The plan's platform filter applies to every
    job: it builds those platforms of its image, all of them when there is none."""

    matrix_path: str  # relative to the project root, where CI jobs run
    build_id: str
    registry: Optional[str] = None
    tls_verify: bool = True
    parent_build_id: Optional[str] = None
    jobs: Optional[int] = None
    capacity: str = ""  # slots over the runner's own: "cpu=8,memory=32Gi"
    fetch: Optional[str] = None
    platforms: tuple[str, ...] = ()  # the plan's --platform filter
    push: bool = True  # False: build and validate only (a pull request from a fork)

    def argv(self, key: str) -> list[str]:
        args = ["aipcc-build", "--matrix", self.matrix_path, "matrix", "--only", key,
                "--build-id", self.build_id]
        if self.registry:
            args += ["--registry", self.registry]
        for platform in self.platforms:
            args += ["--platform", platform]
        if not self.tls_verify:
            args += ["--no-tls-verify"]
        if self.parent_build_id:
            args += ["--parent-build-id", self.parent_build_id]
        if self.jobs is not None:
            args += ["--jobs", str(self.jobs)]
        if self.capacity:
            args += ["--capacity", self.capacity]
        return [*args, "--report", REPORT, "--junit", JUNIT, "--log-dir", LOG_DIR,
                *(["--push"] if self.push else [])]

    def script(self, key: str) -> list[str]:
        """The job's shell lines: the fetch command, then the build."""
        return [*([self.fetch] if self.fetch else []), shlex.join(self.argv(key))]


@dataclass(frozen=True)
class GitSource:
    """The commit a Tekton PipelineRun clones: the one the plan was made from."""

    url: str
    revision: str


# Formats whose document names the commit it was planned from (a GitSource).
PINS_COMMIT = frozenset({"tekton"})


def ci_document(output_format: str, matrix: Matrix, plan: BuildPlan, command: JobCommand,
                source: Optional[GitSource] = None) -> str:
    """The one-document CI format OUTPUT_FORMAT (github, gitlab, tekton) for PLAN; SOURCE
    for the formats in PINS_COMMIT. (Konflux is a tree of files: `konflux.write`.)"""
    from . import github, gitlab, tekton

    def pinned() -> str:
        assert source is not None, "tekton pins the commit it was planned from"
        return tekton.tekton(matrix, plan, command, source)

    emitters: dict[str, Callable[[], str]] = {
        "github": lambda: github.github(matrix, plan, command),
        "gitlab": lambda: gitlab.gitlab(matrix, plan, command),
        "tekton": pinned,
    }
    return emitters[output_format]()
