"""`aipcc-build matrix` validates each image between build and push (issue 4's wiring):
a CUDA 12.8 image into which a 12.9 wheel was installed fails, is not pushed, and its
dependents are skipped, while the clean images are pushed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from aipcc_build.matrix import load
from aipcc_build.render import apply, render_all
from tests.support.artifacts import wheel

from .test_matrix_build import aipcc_build, by_key, report

pytestmark = pytest.mark.integration

TEMPLATE = """\
FROM {{ os_from }}
{% if version %}
COPY {{ vars.wheels | join(' ') }} /tmp/
RUN for w in /tmp/*.whl; do unzip -q -o "$w" -d /usr/lib/python3.9/site-packages; done \\
 && rm /tmp/*.whl
ENV CUDA_VERSION={{ version }}
{% endif %}
"""


def test_mixed_image_fails_validation_and_is_not_pushed(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str,
        wheelhouse: Path) -> None:
    context = tmp_path / "wheels"
    context.mkdir()
    clean = [wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.8.90"),
             wheel(wheelhouse, "nvidia-nvtx-cu12", "12.8.90")]
    # The classic failure: a dependency drags a 12.9 library into the 12.8 image.
    dragged = wheel(wheelhouse, "nvidia-nvtx-cu12", "12.9.79")
    for path in (*clean, dragged):
        shutil.copy(path, context)
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "base.j2").write_text(TEMPLATE)
    (tmp_path / "templates" / "child.j2").write_text("FROM {{ from_ref }}\nRUN true\n")
    (tmp_path / "matrix").mkdir()
    wheels_129 = [clean[0].name, dragged.name]
    matrix_path = tmp_path / "matrix" / "test.yaml"
    matrix_path.write_text(
        "schema: 1\n"
        "product: {name: t, version: '1'}\n"
        "registry: localhost/aipcc-test-sched/unused\n"
        f"os:\n  bb: {{from: {unique_base[0]}}}\n"
        "accelerators:\n"
        "  cuda:\n"
        "    versions:\n"
        f"      - {{version: 12.8.1, vars: {{wheels: {wheels_129}}}}}\n"
        "  cpu: {}\n"
        "images:\n"
        "  base: {template: base.j2, os: [bb], context: ../wheels}\n"
        "  child: {template: child.j2, os: [bb], from_image: base}\n")
    matrix = load(matrix_path)
    apply(matrix, render_all(matrix), check=False, remove_stale=False)

    result = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--push",
                         "--registry", namespace, "--no-tls-verify", "--jobs", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    images = by_key(report(tmp_path))
    failed = images["base/cuda-12.8-bb"]
    assert failed["status"] == "failed"
    assert "validation failed" in failed["message"]
    assert "12.9" in failed["message"] and "nvtx" in failed["message"]
    assert set(failed["toolkits"]["cuda"]) >= {"12.8", "12.9"}
    assert not failed.get("digest")
    assert images["child/cuda-12.8-bb"]["status"] == "skipped"
    for key in ("base/cpu-bb", "child/cpu-bb"):
        assert images[key]["status"] == "ok" and images[key]["digest"].startswith("sha256:")

    log = (tmp_path / failed["log"]).read_text()  # an absolute path stays as it is
    assert "nvidia_nvtx_cu12-12.9.79.dist-info" in log

    missing = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false",
         f"docker://{namespace}/base/cuda-12.8-bb:1-dev"], capture_output=True, text=True)
    assert missing.returncode != 0, "a failed validation must not be pushed"

    # `validate --matrix` checks what local storage holds of the matrix: the mixed image
    # (built and tagged, never pushed) fails again, the skipped child is not there.
    checked = aipcc_build(tmp_path, "validate", "--matrix", "matrix/test.yaml", "--json",
                          "--registry", namespace)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    payload = json.loads(checked.stdout)
    verdicts = {image["name"]: image["verdict"] for image in payload["images"]}
    assert verdicts == {"base/cuda-12.8-bb": "failed", "base/cpu-bb": "ok",
                        "child/cpu-bb": "ok"}
    assert [s["name"] for s in payload["skipped"]] == ["child/cuda-12.8-bb"]
