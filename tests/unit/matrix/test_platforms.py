"""Matrix `platforms`: levels narrow each other, excludes drop one platform, per-platform
base images, the template context's spellings, and located errors (issue 13.1)."""

from __future__ import annotations

import pytest

from aipcc_build.matrix import Filters, expand, load
from aipcc_build.matrix.platforms import host_platform
from tests.support.project import Project
from tests.unit.matrix.test_matrix_errors import assert_input_error

BOTH = "platforms: [linux/amd64, linux/arm64]\nos:"


def platforms_of(project: Project) -> dict[str, tuple[str, ...]]:
    return {image.key: image.platforms for image in expand(load(project.matrix))}


def test_default_is_the_host_platform(project: Project) -> None:
    assert set(platforms_of(project).values()) == {(host_platform(),)}


def test_top_level_platforms_apply_to_every_image_but_rocm_is_refused(project: Project,
                                                                      cli) -> None:
    project.edit("os:", BOTH)
    assert_input_error(project, cli, "rocm is published for linux/amd64 only",
                       ": platforms: rocm", "exclude it", at="platforms:")


def test_exclude_drops_one_platform_of_a_cell(project: Project) -> None:
    project.edit("os:", BOTH)
    project.edit("exclude:\n", "exclude:\n  - {accelerator: rocm, platform: linux/arm64}\n")
    found = platforms_of(project)
    assert found["builder/rocm-6.4-ubi9"] == ("linux/amd64",)
    assert found["builder/cuda-12.9-ubi9"] == ("linux/amd64", "linux/arm64")
    assert found["devel/cpu-el9.6"] == ("linux/amd64", "linux/arm64")


def test_a_version_may_say_rocm_runs_on_arm64(project: Project) -> None:
    project.edit("os:", BOTH)
    project.edit("- {version: 6.4.1}",
                 "- {version: 6.4.1, platforms: [linux/amd64, linux/arm64]}")
    project.edit("exclude:\n", "exclude:\n  - {accelerator: rocm, version: '6.3',"
                 " platform: linux/arm64}\n")
    found = platforms_of(project)
    assert found["builder/rocm-6.4-ubi9"] == ("linux/amd64", "linux/arm64")
    assert found["builder/rocm-6.3-ubi9"] == ("linux/amd64",)


def test_levels_narrow_each_other(project: Project) -> None:
    project.edit("os:", BOTH)
    project.edit("  el9.6: {from: registry.redhat.io/rhel9/rhel:9.6}",
                 "  el9.6: {from: registry.redhat.io/rhel9/rhel:9.6,"
                 " platforms: [linux/arm64]}")
    project.edit("    os: [ubi9]", "    os: [ubi9]\n    platforms: [linux/amd64]")
    found = platforms_of(project)
    assert found["builder/cuda-12.9-ubi9"] == ("linux/amd64",)
    assert found["base/cuda-12.9-el9.6"] == ("linux/arm64",)


def test_levels_that_leave_nothing_are_an_error(project: Project, cli) -> None:
    project.edit("    os: [ubi9]", "    os: [ubi9]\n    platforms: [linux/arm64]")
    project.edit("os:", "platforms: [linux/amd64]\nos:")
    assert_input_error(project, cli, "no platform is left for builder", "images.builder.platforms",
                       at="platforms: [linux/arm64]")


@pytest.mark.parametrize("bad, hint", [("linux/x86_64", "the OCI name is 'linux/amd64'"),
                                       ("linux/arm46", "did you mean 'linux/arm64'"),
                                       ("windows", "known: linux/amd64")])
def test_unknown_platform(project: Project, cli, bad: str, hint: str) -> None:
    project.edit("os:", f"platforms: [linux/amd64, {bad}]\nos:")
    assert_input_error(project, cli, f"unknown platform '{bad}'", hint, "platforms[1]",
                       at=bad)


def test_unknown_platform_in_an_exclude(project: Project, cli) -> None:
    project.edit("exclude:\n", "exclude:\n  - {platform: linux/aarch64}\n")
    assert_input_error(project, cli, "exclude[0].platform", "linux/arm64", at="aarch64")


def test_child_needs_its_parent_on_each_platform(project: Project, cli) -> None:
    project.edit("os:", BOTH)
    project.edit("exclude:\n", "exclude:\n  - {accelerator: rocm, platform: linux/arm64}\n"
                 "  - {kind: base, platform: linux/arm64}\n")
    assert_input_error(project, cli, "is built for linux/arm64 FROM base/",
                       "images.devel.from_image", at="from_image: base")


def test_per_platform_base_images_and_template_spellings(project: Project, cli) -> None:
    project.edit("os:", BOTH)
    project.edit("exclude:\n", "exclude:\n  - {accelerator: rocm, platform: linux/arm64}\n")
    project.edit("  el9.6: {from: registry.redhat.io/rhel9/rhel:9.6}",
                 "  el9.6:\n    from: {linux/amd64: example.com/el:x86,"
                 " linux/arm64: example.com/el:arm}")
    project.template("base.Containerfile.j2",
                     "FROM {{ os_from }}\nRUN echo {{ platform }} {{ arch }} {{ machine }} "
                     "{{ nvidia_arch }} {{ platforms | join(',') }}\n")
    result = cli("--matrix", str(project.matrix), "render")
    assert result.code == 0, result.err
    directory = project.output / "base" / "cuda-12.8-el9.6"
    # Both platforms' Containerfiles COPY the one directory of files render writes.
    assert sorted(p.name for p in directory.iterdir()) == ["Containerfile.amd64",
                                                         "Containerfile.arm64", "image-files"]
    arm = (directory / "Containerfile.arm64").read_text()
    assert "FROM example.com/el:arm" in arm
    assert "RUN echo linux/arm64 arm64 aarch64 sbsa linux/amd64,linux/arm64" in arm
    amd = (directory / "Containerfile.amd64").read_text()
    assert "RUN echo linux/amd64 amd64 x86_64 x86_64" in amd
    # A single-platform image keeps its one Containerfile.
    assert (project.output / "builder" / "rocm-6.4-ubi9" / "Containerfile").is_file()
    assert cli("--matrix", str(project.matrix), "render", "--check").code == 0


def test_a_platform_without_a_base_image_is_an_error(project: Project, cli) -> None:
    project.edit("os:", BOTH)
    project.edit("exclude:\n", "exclude:\n  - {accelerator: rocm, platform: linux/arm64}\n")
    project.edit("  el9.6: {from: registry.redhat.io/rhel9/rhel:9.6}",
                 "  el9.6:\n    platforms: [linux/amd64, linux/arm64]\n"
                 "    from: {linux/amd64: example.com/el:x86}")
    assert_input_error(project, cli, "names no base image for linux/arm64", "os.el9.6.from",
                       at="from: {linux/amd64")


def test_platform_filter_narrows_images(project: Project) -> None:
    project.edit("os:", BOTH)
    project.edit("exclude:\n", "exclude:\n  - {accelerator: rocm, platform: linux/arm64}\n")
    images = expand(load(project.matrix), filters=Filters(platforms=("linux/arm64",)))
    assert images and all(image.platforms == ("linux/arm64",) for image in images)
    assert not any(image.accelerator == "rocm" for image in images)


def test_platform_filter_names_the_oci_spelling(project: Project, cli) -> None:
    result = cli("--matrix", str(project.matrix), "list", "--platform", "linux/x86_64")
    assert result.code == 2
    assert "--platform: 'linux/x86_64' matches nothing" in result.err
    assert "did you mean 'linux/amd64'" in result.err
