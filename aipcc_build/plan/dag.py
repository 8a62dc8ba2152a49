"""The build plan: the selected images as a DAG, in dependency order.

A node is one image on one platform: a multi-platform image has a node per platform, each
built FROM its parent's node of the same platform; a manifest list joins them afterwards."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..matrix import ImageSpec, Matrix
from ..matrix.platforms import describe, host_platform, needs_emulation


@dataclass(frozen=True)
class PlannedBuild:
    image: ImageSpec
    needs: tuple[str, ...]  # keys of builds in this plan that must finish first
    wave: int  # 0 for builds with no dependency in the plan; a wave can run together
    platform: str = ""  # the platform this build makes; "" for a hand-made plan
    emulated: bool = False  # a foreign platform: built under qemu emulation, slower

    @property
    def key(self) -> str:
        """`kind/name`, or `kind/name@linux/arm64` for one platform of a multi-platform image."""
        return node_key(self.image, self.platform)

    @property
    def containerfile(self) -> str:
        return self.image.containerfiles.get(self.platform, self.image.containerfile)

    @property
    def tag(self) -> str:
        """What the build is tagged locally: the image's reference, or for one platform of
        a multi-platform image `reference-arch` (the reference names the manifest list)."""
        if not self.image.multi_platform:
            return self.image.reference
        return f"{self.image.reference}-{describe(self.platform).arch}"


@dataclass(frozen=True)
class BuildPlan:
    builds: tuple[PlannedBuild, ...]  # dependency order: every build after what it needs

    @property
    def waves(self) -> tuple[tuple[PlannedBuild, ...], ...]:
        depth = max((b.wave for b in self.builds), default=-1) + 1
        return tuple(tuple(b for b in self.builds if b.wave == w) for w in range(depth))

    def dependents(self) -> dict[str, tuple[str, ...]]:
        """Key -> keys of the builds that need it directly."""
        result: dict[str, list[str]] = {b.key: [] for b in self.builds}
        for build in self.builds:
            for need in build.needs:
                result[need].append(build.key)
        return {key: tuple(value) for key, value in result.items()}

    def siblings(self) -> dict[str, tuple[str, ...]]:
        """Image key -> keys of its platform builds, for images a manifest list joins."""
        result: dict[str, list[str]] = {}
        for build in self.builds:
            if build.image.multi_platform:
                result.setdefault(build.image.key, []).append(build.key)
        return {key: tuple(value) for key, value in result.items()}


def node_key(image: ImageSpec, platform: str) -> str:
    return f"{image.key}@{platform}" if image.multi_platform and platform else image.key


def build_context(image: ImageSpec) -> str:
    """The directory a build gets as its context: the image kind's `context`, else the
    rendered Containerfile's own."""
    return image.context or os.path.dirname(image.containerfile)


def project_root(matrix: Matrix) -> Path:
    """The project root: the matrix directory's parent, where CI runs."""
    return Path(matrix.path).resolve().parent.parent


def project_path(matrix: Matrix, path: str) -> str:
    """PATH relative to the project root, where CI runs."""
    return Path(path).resolve().relative_to(project_root(matrix)).as_posix()


def make_plan(images: list[ImageSpec], host: str = "", per_platform: bool = True) -> BuildPlan:
    """Order IMAGES so each follows its from_image parent when the parent is selected too;
    one build per image and platform, platforms other than HOST's (default: this
    machine's) emulated. Not PER_PLATFORM: one build per image, all its platforms (a CI
    job that runs `matrix` on one image).

    A parent outside the selection is not built: the child uses the parent reference
    its Containerfile names. The matrix loader has already rejected from_image cycles, and
    made sure a child's platforms are among its parent's.
    """
    host = host or host_platform()
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
            needs=(node_key(selected[image.depends_on], platform),)
            if image.depends_on in selected else (),
            wave=wave[image.key], platform=platform,
            emulated=bool(platform) and needs_emulation(platform, host),
        )
        for image in ordered
        for platform in (image.platforms if per_platform else ()) or ("",)
    ))


def outside_parents(plan: BuildPlan, parents: list[ImageSpec]) -> dict[str, str]:
    """Key of each planned image whose from_image parent is not planned -> that parent's
    reference, looked up in PARENTS (the matrix expanded at the parents' build id)."""
    planned = {build.image.key for build in plan.builds}
    by_key = {image.key: image for image in parents}
    return {
        build.key: by_key[build.image.depends_on].reference
        for build in plan.builds
        if build.image.depends_on is not None and build.image.depends_on not in planned
    }

