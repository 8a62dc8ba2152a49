"""Fan a build plan out on CI engines: one module per engine, each returning its
document's text (`report` writes it); `ci_document` picks it by format. What every engine's
per-image job runs is here. The formats and their limits are explained in
docs/ci/README.md."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from ... import defaults
from ...functional import cache

if TYPE_CHECKING:
    from ...matrix import Matrix
    from ..dag import BuildPlan

def yaml_text(document: Any) -> str:
    """DOCUMENT as the YAML every engine's file is written in: keys in the order built,
    long lines kept whole. libyaml's emitter when PyYAML has it: the pure-Python one spent
    nineteen twentieths of a 2,000-image Konflux plan (two minutes) writing YAML."""
    import yaml

    return yaml.dump(document, Dumper=_dumper(), sort_keys=False, width=4096)


@cache
def _dumper() -> Any:
    """The safe dumper (libyaml's when PyYAML has it) with the plain documents the engines
    are built of (dicts, lists, strings, booleans, ints, None) turned into nodes in one
    walk: PyYAML's representer looks each value's type up, asks whether it may be aliased
    and recomputes the flow style, which was two fifths of the time a Konflux plan spent
    writing YAML. The nodes are the ones it makes (same tags, no style, block collections,
    a dict or list met again is the same node, an alias), so the text is the same; any other
    type goes to its representer, which refuses what a safe dump refuses."""
    import yaml
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    tag = "tag:yaml.org,2002:"
    text, integer, boolean, null = tag + "str", tag + "int", tag + "bool", tag + "null"
    mapping, sequence = tag + "map", tag + "seq"

    class PlainDumper(base):  # type: ignore[misc,valid-type]
        def represent(self, data: Any) -> None:
            made: dict[int, Any] = {}

            def node(value: Any) -> Any:
                kind = type(value)
                if kind is str:
                    return ScalarNode(text, value)
                if kind is dict or kind is list:
                    seen = made.get(id(value))
                    if seen is not None:
                        return seen
                    items: list[Any] = []
                    if kind is dict:
                        made[id(value)] = MappingNode(mapping, items, flow_style=False)
                        items.extend((node(key), node(item)) for key, item in value.items())
                    else:
                        made[id(value)] = SequenceNode(sequence, items, flow_style=False)
                        items.extend(node(item) for item in value)
                    return made[id(value)]
                if kind is bool:
                    return ScalarNode(boolean, "true" if value else "false")
                if kind is int:
                    return ScalarNode(integer, str(value))
                if value is None:
                    return ScalarNode(null, "null")
                return self.represent_data(value)

            self.serialize(node(data))
            self.represented_objects.clear()
            self.object_keeper.clear()

    return PlainDumper


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
