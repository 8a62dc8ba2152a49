"""Hand-built images for the compatibility tests (importable, unlike conftest)."""

from __future__ import annotations

import datetime as dt
from typing import Optional

from aipcc_build.matrix import ImageSpec, ToolkitVersion

TODAY = dt.date(2025, 9, 1)


def image(
    accelerator: str,
    version: Optional[str],
    os: str = "ubi9",
    kind: str = "builder",
    *,
    eol: Optional[dt.date] = None,
    native_driver: Optional[str] = None,
    gpu_archs: tuple[str, ...] = (),
) -> ImageSpec:
    """One image as `matrix.expand` would produce it."""
    minor = ".".join(version.split(".")[:2]) if version else None
    name = f"{accelerator}-{minor}-{os}" if minor else f"{accelerator}-{os}"
    toolkit = ToolkitVersion(version, native_driver=native_driver, eol=eol, gpu_archs=gpu_archs) \
        if version else None
    return ImageSpec(
        name=name, kind=kind, accelerator=accelerator, version=version, os=os,
        os_from=f"registry.access.redhat.com/{os}/ubi:latest", variant=f"{accelerator}-{os}",
        repository=f"quay.io/aipcc/{kind}/{name}", tag="3.0-1", template=f"{kind}.j2",
        containerfile=f"/tmp/{kind}/{name}/Containerfile", toolkit=toolkit,
    )

