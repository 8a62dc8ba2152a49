"""How buildah failures are explained. A stand-in `buildah` on PATH prints what the real
one prints on hosts whose cgroups the OCI runtime cannot use (the real failure is covered
by the integration tests' environment, which sets BUILDAH_ISOLATION=chroot to avoid it)."""

from __future__ import annotations

import os
from pathlib import Path

from aipcc_build.imagebuild.buildah_builder import BuildahBuilder
from aipcc_build.imagebuild.builder import BuildJob, BuildOutcome
from aipcc_build.matrix import ImageSpec
from aipcc_build.tools.buildah import Storage
from aipcc_build.tools.runner import ProcessRunner

# Neither test pushes nor cleans up: the store is never opened.
STORE = Storage(Path("/nonexistent/graph"), Path("/nonexistent/run"), "overlay")

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


# crun 1.8 on a loaded machine (this suite's CI): the RUN step's container never started.
FAKE_BUILDAH_RUNTIME_START = """#!/bin/sh
case "$1" in
  containers) echo "[]" ;;
  build)
    echo 'STEP 2/3: RUN make'
    echo 'Close_Fd sealing memfd copy: Device or resource busy'
    echo 'subprocess exited with status 1'
    echo 'Error: building at STEP "RUN make": exit status 1'
    exit 1 ;;
esac
"""


def _build_with(tmp_path: Path, script: str) -> BuildOutcome:
    fake = tmp_path / "bin" / "buildah"
    fake.parent.mkdir()
    fake.write_text(script)
    fake.chmod(0o755)
    environ = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    image = ImageSpec(
        name="cuda-12.8-ubi9", kind="builder", accelerator="cuda", version="12.8.1",
        os="ubi9", os_from="x", variant="cuda-ubi9", repository="reg.example/b/cuda-12.8-ubi9",
        tag="1-dev", template="t.j2", containerfile=str(tmp_path / "Containerfile"))
    job = BuildJob(image=image, from_image=None, build_args={}, labels={}, layers=None,
                   pull=None, platform=None)
    return BuildahBuilder(ProcessRunner(environ), "rtest", STORE).build(job, lambda line: None)


def test_oci_isolation_failure_names_the_setting_that_fixes_it(tmp_path: Path) -> None:
    outcome = _build_with(tmp_path, FAKE_BUILDAH)
    assert not outcome.ok and not outcome.transient
    assert outcome.error.startswith('building at STEP "RUN make"')
    assert "set BUILDAH_ISOLATION=chroot" in outcome.error


def test_a_run_step_whose_container_never_started_is_built_again(tmp_path: Path) -> None:
    """A RUN step that failed is the template's fault, not retried; one the runtime could
    not start never ran: transient, as a network error is."""
    outcome = _build_with(tmp_path, FAKE_BUILDAH_RUNTIME_START)
    assert not outcome.ok and outcome.transient


def test_secret_looking_build_args_are_masked_in_the_logged_command() -> None:
    """issue 16.11"""
    from aipcc_build.tools.buildah import shown

    line = shown(["buildah", "build", "--build-arg", "HF_TOKEN=hf_abc", "--build-arg",
                  "DB_PASSWORD=pw", "--build-arg", "api_key=k", "--build-arg",
                  "CUDA_VERSION=12.8.1", "--build-arg", "NPM_AUTH=x", "-t", "img", "."])
    assert "hf_abc" not in line and "=pw" not in line and "=k " not in line
    assert "HF_TOKEN=***" in line and "NPM_AUTH=***" in line
    assert "CUDA_VERSION=12.8.1" in line


def test_the_build_log_never_shows_a_secret_build_arg() -> None:
    from aipcc_build.imagebuild.buildah_builder import BuildahBuilder
    from aipcc_build.tools.runner import Completed

    class Child:
        def stream(self, on_line, timeout=None, stall=None):  # type: ignore[no-untyped-def]
            on_line("STEP 1/1: FROM scratch")
            return 0, None

    class Processes:
        environ: dict[str, str] = {}

        def run(self, argv, **options):  # type: ignore[no-untyped-def]
            return Completed(tuple(argv), 0, b"[]", b"")  # `buildah containers`: none

        def start(self, argv):  # type: ignore[no-untyped-def]
            return Child()

    lines: list[str] = []
    BuildahBuilder(Processes(), "rtest", STORE)._run(  # type: ignore[arg-type]
        ["buildah", "build", "--build-arg", "GITHUB_TOKEN=ghp_secret", "."], lines.append)
    assert lines[0] == "$ buildah build --build-arg GITHUB_TOKEN=*** ."
    assert not any("ghp_secret" in line for line in lines)


def test_validate_tls_verify_false_reaches_skopeo() -> None:
    from aipcc_build.tools.skopeo import Skopeo
    from tests.support.fakes import RecordingRunner

    runner = RecordingRunner(lambda argv: (0, b"{}", b""))
    Skopeo(runner, tls_verify=False).inspect_raw("docker://127.0.0.1:5000/x:1")
    Skopeo(runner, tls_verify=False).copy("docker://127.0.0.1:5000/x:1", "oci:/tmp/o")
    Skopeo(runner).inspect_raw("docker://127.0.0.1:5000/x:1")
    assert "--tls-verify=false" in runner.calls[0]
    assert "--src-tls-verify=false" in runner.calls[1]
    assert not any("tls" in part for part in runner.calls[2])


def test_the_run_id_build_arg_stays_out_of_buildahs_unconsumed_warning() -> None:
    """issue 16.3: the run id every build passes is not the user's unused argument."""
    from aipcc_build.imagebuild.runs import RUN_ARG
    from aipcc_build.tools.buildah import without_unconsumed

    warning = "[Warning] one or more build args were not consumed: [{}]"
    assert without_unconsumed(warning.format(RUN_ARG), [RUN_ARG]) is None
    assert without_unconsumed(warning.format(f"FOO {RUN_ARG}"), [RUN_ARG]) == \
        warning.format("FOO")
    assert without_unconsumed("STEP 1/2: FROM x", [RUN_ARG]) == "STEP 1/2: FROM x"
