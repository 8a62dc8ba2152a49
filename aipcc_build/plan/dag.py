"""The build plan: the selected images as a DAG, in dependency order."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..matrix import ImageSpec, Matrix


@dataclass(frozen=True)
class PlannedBuild:
    image: ImageSpec
    needs: tuple[str, ...]  # keys of builds in this plan that must finish first
    wave: int  # 0 for builds with no dependency in the plan; a wave can run together


@dataclass(frozen=True)
class BuildPlan:
    builds: tuple[PlannedBuild, ...]  # dependency order: every build after what it needs

    @property
    def waves(self) -> tuple[tuple[PlannedBuild, ...], ...]:
        depth = max((b.wave for b in self.builds), default=-1) + 1
        return tuple(tuple(b for b in self.builds if b.wave == w) for w in range(depth))

    def dependents(self) -> dict[str, tuple[str, ...]]:
        """Key -> keys of the builds that need it directly."""
        result: dict[str, list[str]] = {b.image.key: [] for b in self.builds}
        for build in self.builds:
            for need in build.needs:
                result[need].append(build.image.key)
        return {key: tuple(value) for key, value in result.items()}


def build_context(image: ImageSpec) -> str:
    """The directory a build gets as its context: the image kind's `context`, else the
    rendered Containerfile's own."""
    return image.context or os.path.dirname(image.containerfile)


def project_path(matrix: Matrix, path: str) -> str:
    """PATH relative to the project root (the matrix directory's parent), where CI runs."""
    project = Path(matrix.path).resolve().parent.parent
    return Path(path).resolve().relative_to(project).as_posix()


def make_plan(images: list[ImageSpec]) -> BuildPlan:
    """Order IMAGES so each follows its from_image parent when the parent is selected too.

    A parent outside the selection is not built: the child uses the parent reference
    its Containerfile names. The matrix loader has already rejected from_image cycles.
    """
    selected = {image.key: image for image in images}
    wave: dict[str, int] = {}

    def depth(key: str) -> int:
        if key not in wave:
            parent = selected[key].depends_on
            wave[key] = depth(parent) + 1 if parent in selected else 0
        return wave[key]

    for key in selected:
        depth(key)
    # sorted() is stable: matrix order is kept within a wave.
    ordered = sorted(images, key=lambda image: wave[image.key])
    return BuildPlan(builds=tuple(
        PlannedBuild(
            image=image,
            needs=(image.depends_on,) if image.depends_on in selected else (),
            wave=wave[image.key],
        )
        for image in ordered
    ))


def outside_parents(plan: BuildPlan, parents: list[ImageSpec]) -> dict[str, str]:
    """Key of each planned image whose from_image parent is not planned -> that parent's
    reference, looked up in PARENTS (the matrix expanded at the parents' build id)."""
    planned = {build.image.key for build in plan.builds}
    by_key = {image.key: image for image in parents}
    return {
        build.image.key: by_key[build.image.depends_on].reference
        for build in plan.builds
        if build.image.depends_on is not None and build.image.depends_on not in planned
    }

