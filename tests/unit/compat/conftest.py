"""Fixtures for the compatibility matrix: the packaged facts and hand-built images."""

from __future__ import annotations

import datetime as dt

import pytest

from aipcc_build.matrix import ImageSpec
from tests.unit.compat.compat_images import image


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
