"""What the CI engine running us says through its environment: the build id, the commit
being built, and which engine it is. The one place that knows those variable names."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

CI_BUILD_ID_VARIABLES = ("BUILD_ID", "CI_PIPELINE_IID", "GITHUB_RUN_NUMBER")
# Where the CI says which commit it builds: (revision variable, source URL variables).
CI_PROVENANCE = (
    ("GITHUB_SHA", ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY")),
    ("CI_COMMIT_SHA", ("CI_PROJECT_URL",)),
)


def resolve_build_id(explicit: Optional[str], environ: Mapping[str, str]) -> str:
    return build_id_and_source(explicit, environ)[0]


def build_id_and_source(explicit: Optional[str],
                        environ: Mapping[str, str]) -> tuple[str, Optional[str]]:
    """The build id and the CI variable it came from (None: given, or the `dev` default)."""
    if explicit:
        return explicit, None
    for variable in CI_BUILD_ID_VARIABLES:
        if environ.get(variable):
            return environ[variable], variable
    return "dev", None


def provenance_labels(environ: Mapping[str, str]) -> dict[str, str]:
    """The OCI source and revision labels, when the CI tells them (rendered files cannot
    carry them: they are committed before the commit they belong to exists)."""
    for revision, source_parts in CI_PROVENANCE:
        if environ.get(revision):
            labels = {"org.opencontainers.image.revision": environ[revision]}
            if all(environ.get(part) for part in source_parts):
                labels["org.opencontainers.image.source"] = "/".join(
                    environ[part] for part in source_parts)
            return labels
    return {}


def in_ci(environ: Mapping[str, str]) -> bool:
    """rich does not detect CI by itself: CI engines set CI (GitHub, GitLab, Tekton tasks
    of ours)."""
    return bool(environ.get("CI"))


def on_github_actions(environ: Mapping[str, str]) -> bool:
    return environ.get("GITHUB_ACTIONS") == "true"


def on_gitlab_ci(environ: Mapping[str, str]) -> bool:
    return environ.get("GITLAB_CI") == "true"
