"""Fixtures for the compatibility matrix: the packaged facts and hand-built images."""

from __future__ import annotations

import datetime as dt
from typing import Optional

import pytest

from aipcc_build.model import ImageSpec, ToolkitVersion
from aipcc_build.toolkit_facts import ToolkitFacts, load_facts

TODAY = dt.date(2025, 9, 1)


@pytest.fixture(scope="session")
def facts() -> ToolkitFacts:
    return load_facts()


def image(
    accelerator: str,
    version: Optional[str],
    os: str = "ubi9",
    kind: str = "builder",
    *,
    eol: Optional[dt.date] = None,
    min_driver: Optional[str] = None,
    gpu_archs: tuple[str, ...] = (),
) -> ImageSpec:
    """One image as `matrix.expand` would produce it."""
    minor = ".".join(version.split(".")[:2]) if version else None
    name = f"{accelerator}-{minor}-{os}" if minor else f"{accelerator}-{os}"
    toolkit = ToolkitVersion(version, min_driver=min_driver, eol=eol, gpu_archs=gpu_archs) \
        if version else None
    return ImageSpec(
        name=name, kind=kind, accelerator=accelerator, version=version, os=os,
        os_from=f"registry.access.redhat.com/{os}/ubi:latest", variant=f"{accelerator}-{os}",
        repository=f"quay.io/aipcc/{kind}/{name}", tag="3.0-1", template=f"{kind}.j2",
        containerfile=f"/tmp/{kind}/{name}/Containerfile", toolkit=toolkit,
    )


@pytest.fixture
def images() -> list[ImageSpec]:
    """A matrix like the shipped one, plus CUDA 13.0 and an EOL CUDA 12.6."""
    return [
        image("cuda", "12.9.1", eol=dt.date(2026, 6, 30)),
        image("cuda", "12.8.1", eol=dt.date(2025, 10, 15)),
        image("cuda", "13.0.2", eol=dt.date(2027, 8, 31)),
        image("cuda", "12.6.3", eol=dt.date(2025, 6, 30)),
        image("rocm", "6.4", eol=dt.date(2026, 6, 30)),
        image("rocm", "6.3", eol=dt.date(2026, 1, 31)),
        image("cpu", None),
    ]
