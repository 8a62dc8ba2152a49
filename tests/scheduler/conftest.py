"""Fixtures of the scheduler tests: the foundation's small project and in-process CLI (for
the `context` tests), and per-test base images and registry namespaces (for real builds)."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from foundation.conftest import cli, project  # noqa: F401  (fixtures)


def buildah_json(*args: str) -> Any:
    out = subprocess.run(["buildah", *args, "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out or "[]") or []


@pytest.fixture
def unique_base(base_image: str) -> Iterator[tuple[str, str]]:
    """(name, image ID) of a base image only this test uses."""
    tag = uuid.uuid4().hex[:10]
    name = f"localhost/aipcc-test-sched/base-{tag}"
    subprocess.run(["buildah", "build", "-q", "-t", name, "-f", "-", "."],
                   input=f"FROM {base_image}\nLABEL aipcc-test-sched={tag}\n", text=True,
                   check=True, capture_output=True)
    image_id = subprocess.run(["buildah", "inspect", "--type", "image", "--format",
                               "{{.FromImageID}}", name],
                              check=True, capture_output=True, text=True).stdout.strip()
    yield name, image_id
    subprocess.run(["buildah", "rmi", "-f", name], capture_output=True)


@pytest.fixture
def namespace(registry: Any) -> Iterator[str]:
    """HOST/NAMESPACE for --registry; the images tagged under it are removed afterwards."""
    prefix = f"{registry.host}/t{uuid.uuid4().hex[:10]}"
    yield prefix
    ours = [image["id"] for image in buildah_json("images")
            if any(name.startswith(prefix + "/") for name in image.get("names") or [])]
    if ours:
        subprocess.run(["buildah", "rmi", "-f", *ours], capture_output=True)


