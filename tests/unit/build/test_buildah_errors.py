"""How buildah failures are explained. A stand-in `buildah` on PATH prints what the real
one prints on hosts whose cgroups the OCI runtime cannot use (the real failure is covered
by the integration tests' environment, which sets BUILDAH_ISOLATION=chroot to avoid it)."""

from __future__ import annotations

import os
from pathlib import Path

from aipcc_build.build.runner import BuildahRunner
from aipcc_build.build.schedule import BuildJob
from aipcc_build.matrix import ImageSpec
from aipcc_build.tools.runner import ProcessRunner

FAKE_BUILDAH = """#!/bin/sh
case "$1" in
  containers) echo "[]" ;;
  build)
    echo 'STEP 2/3: RUN make'
    echo 'error running container: from /usr/bin/crun creating container for' \
      '[/bin/sh -c make]: cgroups in hybrid mode not supported, drop all controllers'
    echo 'Error: building at STEP "RUN make": while running runtime: exit status 1'
    exit 1 ;;
esac
"""


def test_oci_isolation_failure_names_the_setting_that_fixes_it(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "buildah"
    fake.parent.mkdir()
    fake.write_text(FAKE_BUILDAH)
    fake.chmod(0o755)
    environ = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    image = ImageSpec(
        name="cuda-12.8-ubi9", kind="builder", accelerator="cuda", version="12.8.1",
        os="ubi9", os_from="x", variant="cuda-ubi9", repository="reg.example/b/cuda-12.8-ubi9",
        tag="1-dev", template="t.j2", containerfile=str(tmp_path / "Containerfile"))
    job = BuildJob(image=image, from_image=None, build_args={}, labels={}, layers=None,
                   pull=None, platform=None)
    outcome = BuildahRunner(ProcessRunner(environ)).build(job, lambda line: None)
    assert not outcome.ok and not outcome.transient
    assert outcome.error.startswith('building at STEP "RUN make"')
    assert "set BUILDAH_ISOLATION=chroot" in outcome.error
