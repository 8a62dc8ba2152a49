"""Fan a build plan out on CI engines: one module per engine, each returning its
document's text (`report` writes it). What every engine's per-image job runs is here.
The formats and their limits are explained in docs/ci/README.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class JobCommand:
    """How each per-image job calls aipcc-build, pinned to what the plan was made with."""

    matrix_path: str  # relative to the project root, where CI jobs run
    build_id: str
    registry: Optional[str] = None

    def argv(self, key: str) -> list[str]:
        args = ["aipcc-build", "--matrix", self.matrix_path, "matrix", "--only", key,
                "--build-id", self.build_id]
        if self.registry:
            args += ["--registry", self.registry]
        return [*args, "--push"]


@dataclass(frozen=True)
class GitSource:
    """The commit a Tekton PipelineRun clones: the one the plan was made from."""

    url: str
    revision: str
