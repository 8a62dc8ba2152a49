"""`validate --matrix --pushed` as a CI gate against a real docker-registry: it fails
unless every selected image was found and validated (issue 30: a gate that checked nothing
passed)."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from aipcc_build.toolkit.constraints import CONSTRAINTS_PATH, constraints_text, target_of
from tests.support.publish import make_registry, push, run_cli

pytestmark = pytest.mark.integration

MATRIX = """\
schema: 1
product: {{name: aipcc, version: "3.0"}}
registry: {registry}
templates: templates
output: out
os:
  el9: {{from: localhost/base:1}}
accelerators:
  cpu: {{}}
images:
  base: {{template: base.j2, os: [el9]}}
  extra: {{template: base.j2, os: [el9]}}
"""


def test_validate_matrix_pushed_fails_closed_on_a_registry_missing_images(
        tmp_path: Path, base_image: str) -> None:
    registry = make_registry(tmp_path / "registry")
    local = f"localhost/aipcc-test-gate/img-{uuid.uuid4().hex[:8]}"
    try:
        ns = f"{registry.host}/aipcc"
        (tmp_path / "templates").mkdir()
        (tmp_path / "templates" / "base.j2").write_text("FROM {{ from }}\n")
        matrix = tmp_path / "matrix.yaml"
        matrix.write_text(MATRIX.format(registry=ns))

        def gate(*extra: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
            done = run_cli("--matrix", str(matrix), "validate", "--matrix", str(matrix),
                           "--pushed", "--build-id", "9", "--tls-verify", "false",
                           "--cache-dir", str(tmp_path / "cache"), "--json", *extra)
            return done.returncode, json.loads(done.stdout), done.stderr

        # The registry holds none of the images: nothing checked, the gate fails.
        code, payload, err = gate()
        assert code == 1, err
        assert payload["summary"]["validated"] == 0 and payload["summary"]["skipped"] == 2
        assert gate("--allow-missing")[0] == 1  # allowed missing, but nothing checked

        # A clean image of the cell, carrying the constraints the renderer gives every image.
        context = tmp_path / "context"
        context.mkdir()
        (context / "constraints.txt").write_text(constraints_text(target_of("cpu", None)))
        subprocess.run(["buildah", "build", "-q", "-t", local, "-f", "-", str(context)],
                       check=True, text=True, capture_output=True,
                       input=f"FROM {base_image}\nENV FROMAGER_VARIANT=cpu-el9 "
                             f"PIP_CONSTRAINT={CONSTRAINTS_PATH} UV_CONSTRAINT={CONSTRAINTS_PATH}\n"
                             f"COPY constraints.txt {CONSTRAINTS_PATH}\n")
        push(local, f"{ns}/base/cpu-el9:3.0-9")
        code, payload, err = gate()
        assert code == 1, json.dumps(payload["images"] + payload["unreadable"])[:3000]
        assert payload["summary"] == {"validated": 1, "skipped": 1, "failed": 0,
                                      "allow_missing": False, "exit_code": 1}, \
            json.dumps(payload["images"] + payload["unreadable"])[:3000]
        assert [s["name"] for s in payload["skipped"]] == ["extra/cpu-el9"]
        assert [i["name"] for i in payload["images"]] == ["base/cpu-el9"]
        code, payload, err = gate("--allow-missing")
        assert code == 0, err
        human = run_cli("--matrix", str(matrix), "validate", "--matrix", str(matrix), "--pushed",
                        "--build-id", "9", "--tls-verify", "false",
                        "--cache-dir", str(tmp_path / "cache"))
        assert human.returncode == 1
        assert "1 validated, 1 skipped (not found), 0 failed" in human.stderr
        assert "extra/cpu-el9" in human.stderr

        push(local, f"{ns}/extra/cpu-el9:3.0-9")
        code, payload, err = gate()
        assert code == 0 and payload["summary"]["validated"] == 2, err
    finally:
        registry.stop()
        subprocess.run(["buildah", "rmi", "-f", local], capture_output=True)
