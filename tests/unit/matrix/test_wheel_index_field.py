"""The matrix's wheel_index pattern: the URL every image's pip and uv use, per variant."""

from __future__ import annotations

import pytest

from aipcc_build.matrix import expand, load
from aipcc_build.matrix.model import index_release
from tests.support.project import Project
from tests.unit.matrix.test_matrix_errors import assert_input_error

RHAI = "https://packages.redhat.com/api/pypi/public-rhai/rhoai/{release}/{variant}/simple/"


def with_index(project: Project, top: str, cpu: str | None = None) -> None:
    project.edit("registry: quay.io/aipcc", f"registry: quay.io/aipcc\nwheel_index: \"{top}\"")
    if cpu is not None:
        project.edit("  cpu: {}", f"  cpu: {{wheel_index: \"{cpu}\"}}")


def test_every_image_gets_its_versioned_variant_and_url(project: Project) -> None:
    with_index(project, RHAI)
    images = {image.key: image for image in expand(load(project.matrix))}
    cuda = images["builder/cuda-12.8-ubi9"]
    assert cuda.versioned_variant == "cuda12.8-ubi9"
    assert cuda.variant == "cuda-ubi9"  # FROMAGER_VARIANT stays generic
    assert cuda.wheel_index == ("https://packages.redhat.com/api/pypi/public-rhai/rhoai/3.0/"
                                "cuda12.8-ubi9/simple/")
    assert images["builder/rocm-6.4-ubi9"].wheel_index.endswith("/3.0/rocm6.4-ubi9/simple/")
    assert images["builder/cpu-ubi9"].versioned_variant == "cpu-ubi9"
    assert images["base/cuda-12.9-el9.6"].wheel_index.endswith("/cuda12.9-el9.6/simple/")


def test_an_accelerator_overrides_the_pattern(project: Project) -> None:
    with_index(project, "https://h.example/{release}/{accelerator}{major}.{minor}-ubi9/simple/",
               cpu="https://h.example/{release}/{accelerator}-ubi9/simple/")
    images = {image.key: image for image in expand(load(project.matrix))}
    assert images["base/cuda-12.8-el9.6"].wheel_index == \
        "https://h.example/3.0/cuda12.8-ubi9/simple/"
    assert images["base/cpu-el9.6"].wheel_index == "https://h.example/3.0/cpu-ubi9/simple/"


def test_without_a_pattern_images_have_no_index(project: Project) -> None:
    assert all(image.wheel_index is None for image in expand(load(project.matrix)))


@pytest.mark.parametrize("version, release", [
    ("3.0", "3.0"), ("3.4.1", "3.4"), ("3.4-EA1", "3.4-EA1"), ("3.4.2-EA1", "3.4-EA1")])
def test_release_is_major_minor_and_channel(version: str, release: str) -> None:
    assert index_release(version) == release


@pytest.mark.parametrize("pattern, fragment", [
    ("https://h/{release}/{flavour}/simple/", "unknown placeholder '{flavour}'"),
    ("ftp://h/{variant}/simple/", "must start with http:// or https://"),
    ("https://user:pw@h/{variant}/simple/", "must not hold credentials"),
    ("https://{release}.h/{variant}/simple/", "placeholder in its host"),
    ("https://h/3.0/cuda-ubi9/simple/", "names no field"),
    ("https://h/{variant}/simple/?x=$(id)", "holds characters a wheel index URL may not"),
    ("https://h/{variant}/simple", "must end with '/'"),
    ("https://h/{release}/{variant}/", "needs a fixed path segment after the last"),
])
def test_a_bad_pattern_is_located(project: Project, cli, pattern: str, fragment: str) -> None:
    with_index(project, pattern)
    assert_input_error(project, cli, "wheel_index", fragment, at="wheel_index:")


def test_an_unversioned_accelerator_cannot_fill_major(project: Project, cli) -> None:
    with_index(project, "https://h/{release}/{accelerator}{major}.{minor}-{os}/simple/")
    assert_input_error(project, cli, "wheel_index", "accelerator 'cpu' has no versions",
                       "accelerators.cpu.wheel_index", at="wheel_index:")


def test_two_variants_sharing_one_url_is_refused(project: Project, cli) -> None:
    with_index(project, "https://h/{release}/{accelerator}-{os}/simple/")
    assert_input_error(project, cli, "wheel_index", "cuda12.9-ubi9 and cuda12.8-ubi9 would "
                       "share the wheel index https://h/3.0/cuda-ubi9/simple/",
                       at="wheel_index:")


def test_an_index_directory_holding_another_variants_is_refused(project: Project,
                                                                cli) -> None:
    """The shipped matrix's cpu pattern had no field after {release}: its index directory
    (3.0/) held the CUDA variants' (3.0/cuda12.8-ubi9/), so publishing cpu replaced them."""
    with_index(project, "https://h/{release}/{accelerator}{major}.{minor}-ubi9/simple/",
               cpu="https://h/{release}/cpu-ubi9/simple/")
    assert_input_error(project, cli, "accelerators.cpu.wheel_index", "cpu-ubi9's wheel index "
                       "directory (https://h/3.0/) holds cuda12.9-ubi9's "
                       "(https://h/3.0/cuda12.9-ubi9/)", at="cpu: {wheel_index")


def test_one_index_directory_behind_two_urls_is_refused(project: Project, cli) -> None:
    with_index(project, "https://g/{release}/{variant}/simple/",
               cpu="https://h/{release}/cpu/")
    project.edit("      - {version: 6.3.4}\n", "")
    project.edit("  rocm:\n", '  rocm:\n    wheel_index: "https://h/{release}/rocm/"\n')
    assert_input_error(project, cli, "accelerators.cpu.wheel_index", "cpu-ubi9's wheel index "
                       "directory (https://h/3.0/) is also the directory of rocm6.4-ubi9's "
                       "(https://h/3.0/rocm/)", at="cpu: {wheel_index")


def test_a_bad_override_is_located(project: Project, cli) -> None:
    with_index(project, RHAI, cpu="https://h/{release}/cpu{major}-ubi9/simple/")
    assert_input_error(project, cli, "accelerators.cpu.wheel_index", "uses {major}",
                       at="cpu: {wheel_index")


def test_authentication_is_per_index_and_an_accelerator_overrides_it(project: Project) -> None:
    with_index(project, RHAI, cpu="https://h.example/{release}/cpu-ubi9/simple/")
    project.edit(f'wheel_index: "{RHAI}"', f'wheel_index: "{RHAI}"\nwheel_index_auth: client-cert')
    project.edit("  cpu: {wheel_index:", "  cpu: {wheel_index_auth: netrc, wheel_index:")
    images = {image.key: image for image in expand(load(project.matrix))}
    assert images["builder/cuda-12.8-ubi9"].wheel_index_auth == "client-cert"
    assert images["base/cpu-el9.6"].wheel_index_auth == "netrc"


def test_without_a_setting_readers_do_not_authenticate(project: Project) -> None:
    with_index(project, RHAI)
    assert {image.wheel_index_auth for image in expand(load(project.matrix))} == {"none"}


def test_an_unknown_authentication_is_located(project: Project, cli) -> None:
    with_index(project, RHAI)
    project.edit(f'wheel_index: "{RHAI}"', f'wheel_index: "{RHAI}"\nwheel_index_auth: kerberos')
    assert_input_error(project, cli, "wheel_index_auth", "unknown authentication 'kerberos'",
                       "client-cert, netrc", at="wheel_index_auth:")


def test_authentication_without_an_index_is_refused(project: Project, cli) -> None:
    project.edit("  cpu: {}", "  cpu: {wheel_index_auth: client-cert}")
    assert_input_error(project, cli, "accelerators.cpu.wheel_index_auth",
                       "no wheel_index for it to apply to", at="cpu: {wheel_index_auth")


def test_a_top_level_authentication_without_an_index_is_refused(project: Project, cli) -> None:
    project.edit("registry: quay.io/aipcc", "registry: quay.io/aipcc\nwheel_index_auth: netrc")
    assert_input_error(project, cli, "wheel_index_auth", "no wheel_index",
                       at="wheel_index_auth:")
