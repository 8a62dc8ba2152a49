"""The renderer's wheel index guarantee: every image of a matrix with `wheel_index` gets pip's
and uv's variables, both config files and a label, whatever its template writes."""

from __future__ import annotations

from aipcc_build.matrix import load
from aipcc_build.render import RenderedFile, render_all
from tests.support.project import Project

PATTERN = "https://idx.example/{release}/{variant}/simple/"
URL128 = "https://idx.example/3.0/cuda12.8-el9.6/simple/"


def rendered(project: Project) -> dict[str, str]:
    return {key: item.text for key, item in rendered_files(project).items()}


def rendered_files(project: Project) -> dict[str, RenderedFile]:
    return {item.image.key: item for item in render_all(load(project.matrix))}


COPY_ETC = ("COPY --chmod=0644 image-files/aipcc-constraints.txt image-files/pip.conf "
            "image-files/aipcc-uv-with.txt /etc/")


def with_index(project: Project) -> None:
    project.edit("registry: quay.io/aipcc", f'registry: quay.io/aipcc\nwheel_index: "{PATTERN}"')


def test_config_follows_from_so_the_template_pip_already_uses_it(project: Project) -> None:
    with_index(project)
    project.template("base.Containerfile.j2",
                     "FROM {{ os_from }}\nRUN pip install torch\n")
    item = rendered_files(project)["base/cuda-12.8-el9.6"]
    text = item.text
    lines = text.splitlines()
    start = lines.index("FROM registry.redhat.io/rhel9/rhel:9.6")
    config = "\n".join(lines[start + 1:lines.index("RUN pip install torch")])
    for variable in ("PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        assert f"{variable}={URL128}" in config
    assert "PIP_CONFIG_FILE=/etc/pip.conf" in config
    assert "UV_CONFIG_FILE=/etc/uv/uv.toml" in config
    assert COPY_ETC in config
    assert "COPY --chmod=0644 image-files/uv.toml /etc/uv/" in config
    assert f"index-url = {URL128}\nconstraint = /etc/aipcc-constraints.txt\n" \
        "build-constraint = /etc/aipcc-constraints.txt\n" in item.files["pip.conf"]
    assert f'index-url = "{URL128}"\nconstraint-dependencies = [' in item.files["uv.toml"]
    identity = text[text.index("# Image identity"):]
    assert f'ai.aipcc.wheel-index="{URL128}"' in identity
    assert f"PIP_INDEX_URL={URL128}" in identity  # the template cannot override it


def test_every_stage_gets_it_but_scratch_and_the_parent_image(project: Project) -> None:
    with_index(project)
    project.template("builder.Containerfile.j2",
                     "FROM --platform=linux/amd64 {{ os_from }} AS build\nRUN make\n"
                     "FROM scratch AS files\nCOPY --from=build /x /x\n"
                     "FROM \\\n  {{ os_from }}\nCOPY --from=files /x /x\n")
    text = rendered(project)["builder/cuda-12.9-ubi9"]
    assert text.count(COPY_ETC) == 2
    assert "FROM scratch AS files\nCOPY" in text
    assert "FROM \\\n  registry.access.redhat.com/ubi9/ubi:9.6\n# The wheel index" in text
    # devel is built FROM base of the same cell: it inherits the configuration.
    devel = rendered(project)["devel/cuda-12.9-el9.6"]
    assert COPY_ETC not in devel
    assert 'ai.aipcc.wheel-index="https://idx.example/3.0/cuda12.9-el9.6/simple/"' in devel


def test_templates_see_the_versioned_variant_and_url(project: Project) -> None:
    with_index(project)
    project.template("builder.Containerfile.j2",
                     "FROM {{ os_from }}\nLABEL v={{ versioned_variant }} i={{ wheel_index }}\n")
    assert "LABEL v=rocm6.4-ubi9 i=https://idx.example/3.0/rocm6.4-ubi9/simple/" in \
        rendered(project)["builder/rocm-6.4-ubi9"]


def test_without_wheel_index_only_the_constraints_are_added(project: Project) -> None:
    item = rendered_files(project)["builder/cuda-12.9-ubi9"]
    assert "PIP_INDEX_URL" not in item.text and "wheel-index" not in item.text
    assert COPY_ETC in item.text
    assert "[global]\nconstraint = /etc/aipcc-constraints.txt\n" in item.files["pip.conf"]
    assert "index-url" not in item.files["uv.toml"]


def test_an_image_whose_last_stage_is_from_scratch_promises_no_constraints(
        project: Project) -> None:
    # A multi-platform base's way: a root file system made in one stage, copied FROM
    # scratch; no pip, uv or Python of its own (issue 39). The validator asks the file of a
    # labelled image only: neither the label nor the variables go in.
    project.template("builder.Containerfile.j2",
                     "FROM {{ os_from }} AS build\nRUN make\n"
                     "FROM scratch\nCOPY --from=build /rootfs /\n")
    text = rendered(project)["builder/cuda-12.9-ubi9"]
    identity = text[text.index("# Image identity"):]
    assert "ai.aipcc.constraints" not in identity and "CONSTRAINT" not in identity
    assert text.count(COPY_ETC) == 1  # the build stage has them
    other = rendered(project)["base/cuda-12.9-el9.6"]
    assert 'ai.aipcc.constraints="/etc/aipcc-constraints.txt"' in other
    assert "PIP_BUILD_CONSTRAINT=/etc/aipcc-constraints.txt" in other
