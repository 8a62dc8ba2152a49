"""`aipcc-build matrix` end to end: real buildah builds, a real registry on 127.0.0.1.

Every test builds FROM its own base image (busybox plus a unique label, hence a unique
image ID) and tags into its own registry namespace, so it can tell its images, processes
and containers from those of anyone else using buildah on this machine.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.matrix import load
from aipcc_build.render import apply, render_all
from tests.support.layers import buildah_json
from tests.support.processes import default_signals

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
Registry = Any  # tests/conftest.py's Registry: .host, .stop()

CUDA_VERSIONS = ("12.9.1", "12.8.1")


def write_matrix(root: Path, base: str, versions: dict[str, dict[str, object]],
                 extra_kinds: str = "", child: bool = True) -> Path:
    """A matrix of cuda VERSIONS (with per-version vars: sleep, fail) on BASE: kind `base`
    (sleeps, may fail) and, with CHILD, kind `child` FROM it. Rendered, ready to build."""
    (root / "templates").mkdir(parents=True)
    (root / "templates" / "base.j2").write_text(
        "FROM {{ os_from }}\n"
        "RUN echo start; sleep {{ vars.sleep }}"
        "{% if vars.get('fail') %}; echo boom; false{% endif %}\n"
        "RUN echo {{ name }} > /base\n")
    (root / "templates" / "child.j2").write_text(
        "FROM {{ from_ref }}\nRUN cat /base > /child\n")
    (root / "templates" / "gpu.j2").write_text("FROM {{ os_from }}\nRUN true\n")
    entries = "\n".join(f"      - {{version: {v}, vars: {json.dumps(values)}}}"
                        for v, values in versions.items())
    child_kind = "  child: {template: child.j2, os: [bb], from_image: base}\n" if child else ""
    (root / "matrix").mkdir()
    path = root / "matrix" / "test.yaml"
    path.write_text(
        "schema: 1\n"
        "product: {name: t, version: '1'}\n"
        "registry: localhost/aipcc-test-sched/unused\n"
        f"os:\n  bb: {{from: {base}}}\n"
        f"accelerators:\n  cuda:\n    versions:\n{entries}\n"
        "images:\n"
        "  base: {template: base.j2, os: [bb]}\n"
        f"{child_kind}{extra_kinds}")
    matrix = load(path)
    apply(matrix, render_all(matrix), check=False, remove_stale=False)
    return path


def aipcc_build(cwd: Path, *args: str, env: dict[str, str] | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aipcc_build", *args], cwd=cwd, capture_output=True,
        text=True, timeout=timeout, env=_env(env),
    )


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **(extra or {})}


def report(cwd: Path) -> dict[str, Any]:
    return json.loads((cwd / "build-report.json").read_text())


def by_key(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {image["key"]: image for image in data["images"]}


def when(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def our_containers(image_id: str) -> list[str]:
    """Working containers started from our unique base (a killed build would leave one)."""
    return [c["id"] for c in buildah_json("containers")
            if c.get("imageid") == image_id.replace("sha256:", "")]


def skopeo_inspect(reference: str, *extra: str) -> dict[str, Any]:
    out = subprocess.run(["skopeo", "inspect", "--tls-verify=false", *extra,
                          f"docker://{reference}"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_concurrent_dag_build_pushed_with_tags_and_labels(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str) -> None:
    write_matrix(tmp_path, unique_base[0], {v: {"sleep": 2} for v in CUDA_VERSIONS})
    done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--jobs", "4",
                       "--push", "--registry", namespace, "--no-tls-verify",
                       "--build-id", "42", "--junit", "junit.xml")
    assert done.returncode == 0, done.stderr
    images = by_key(report(tmp_path))
    assert {i["status"] for i in images.values()} == {"ok"}

    # Concurrency happened: the two base builds overlap in time.
    first, second = (images[f"base/cuda-{v[:4]}-bb"] for v in CUDA_VERSIONS)
    assert when(first["start"]) < when(second["end"])
    assert when(second["start"]) < when(first["end"])
    # DAG order: each child starts after its parent ended, FROM the parent's local image.
    for version in CUDA_VERSIONS:
        name = f"cuda-{version[:4]}-bb"
        parent, child = images[f"base/{name}"], images[f"child/{name}"]
        built = when(parent["start"]) + dt.timedelta(seconds=parent["build_duration"])
        assert when(child["start"]) >= built - dt.timedelta(milliseconds=2)
        assert f"FROM {parent['image_id']}" in Path(tmp_path / child["log"]).read_text()

    # Pushed: pullable with skopeo, with the tag scheme and the identity labels.
    for key, image in images.items():
        kind, name = key.split("/")
        reference = f"{namespace}/{kind}/{name}:1-42"
        assert image["reference"] == reference
        assert image["digest"].startswith("sha256:")
        inspected = skopeo_inspect(reference)
        assert inspected["Digest"] == image["digest"]
        labels = inspected["Labels"]
        assert labels["ai.aipcc.image.kind"] == kind
        assert labels["ai.aipcc.accelerator"] == "cuda"
        assert labels["ai.aipcc.accelerator.version"] in CUDA_VERSIONS
        assert labels["org.opencontainers.image.version"] == "1-42"
        assert "FROMAGER_VARIANT=cuda-bb" in inspected["Env"]
    tags = skopeo_inspect(f"{namespace}/base/cuda-12.8-bb:1-42")["RepoTags"]
    assert tags == ["1-42"]

    junit = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert junit is not None and junit.get("tests") == "4" and junit.get("failures") == "0"


def test_failing_step_fails_the_image_and_skips_its_dependents(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str) -> None:
    write_matrix(tmp_path, unique_base[0], {"12.9.1": {"sleep": 1},
                                            "12.8.1": {"sleep": 0, "fail": True}})
    done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--jobs", "2",
                       "--registry", namespace, "--junit", "junit.xml")
    assert done.returncode == 1
    statuses = {k: v["status"] for k, v in by_key(report(tmp_path)).items()}
    assert statuses == {"base/cuda-12.9-bb": "ok", "child/cuda-12.9-bb": "ok",
                        "base/cuda-12.8-bb": "failed", "child/cuda-12.8-bb": "skipped"}
    # The failure shows the end of the build's log, prefixed by the image.
    assert "[base/cuda-12.8-bb] | boom" in done.stderr
    assert "[child/cuda-12.8-bb] skipped: base/cuda-12.8-bb failed" in done.stderr
    failure = ET.parse(tmp_path / "junit.xml").getroot().find(".//testcase[@name='cuda-12.8-bb']"
                                                               "/failure")
    assert failure is not None and "boom" in (failure.text or "")
    assert 'building at STEP "RUN' in failure.get("message", "")
    assert by_key(report(tmp_path))["base/cuda-12.8-bb"]["retries"] == 0  # RUN: no retry


def test_fail_fast_cancels_the_rest(tmp_path: Path, unique_base: tuple[str, str],
                                    namespace: str) -> None:
    write_matrix(tmp_path, unique_base[0], {"12.9.1": {"sleep": 60},
                                            "12.8.1": {"sleep": 0, "fail": True}})
    started = time.monotonic()
    done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--jobs", "2",
                       "--registry", namespace, "--fail-fast")
    assert time.monotonic() - started < 30
    assert done.returncode == 1
    data = report(tmp_path)
    assert data["stopped_by"] == "fail-fast"
    statuses = {k: v["status"] for k, v in by_key(data).items()}
    assert statuses == {"base/cuda-12.8-bb": "failed", "child/cuda-12.8-bb": "skipped",
                        "base/cuda-12.9-bb": "cancelled", "child/cuda-12.9-bb": "cancelled"}
    assert our_containers(unique_base[1]) == []


# SIGHUP: a closed terminal; it used to end the run at once, builds running, no report.
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_interrupting_a_four_way_build_leaves_nothing_behind(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str, signum: int) -> None:
    versions = {f"12.{minor}.0": {"sleep": 120} for minor in range(4)}
    write_matrix(tmp_path, unique_base[0], versions, child=False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "aipcc_build", "--matrix", "matrix/test.yaml", "matrix",
         "--jobs", "4", "--registry", namespace],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=default_signals)
    logs = [tmp_path / "logs" / "base" / f"cuda-12.{minor}-bb.log" for minor in range(4)]
    deadline = time.monotonic() + 60
    # Wait until all four builds are inside their RUN step.
    while not all(log.exists() and "start" in log.read_text().split("RUN echo start")[-1]
                  for log in logs):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    assert len(our_containers(unique_base[1])) == 4
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, stderr
    data = report(tmp_path)
    assert data["stopped_by"] == "interrupt"
    assert {image["status"] for image in data["images"]} == {"cancelled"}
    # No buildah process and no working container of ours is left.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert namespace not in ps and unique_base[0] not in ps
    assert our_containers(unique_base[1]) == []


def test_a_slot_nobody_provides_fails_at_once(tmp_path: Path, unique_base: tuple[str, str],
                                              namespace: str) -> None:
    write_matrix(tmp_path, unique_base[0], {"12.9.1": {"sleep": 0}}, child=False,
                 extra_kinds="  gpu: {template: gpu.j2, os: [bb], resources: {gpu: 1}}\n")
    done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix",
                       "--registry", namespace, "--capacity", "cpu=2")
    assert done.returncode == 1
    images = by_key(report(tmp_path))
    assert images["base/cuda-12.9-bb"]["status"] == "ok"
    gpu = images["gpu/cuda-12.9-bb"]
    assert gpu["status"] == "failed" and gpu["image_id"] is None
    assert "no capacity provides 'gpu'" in gpu["message"]
    assert gpu["duration"] is None  # never started
    assert "[gpu/cuda-12.9-bb] failed: needs gpu=1" in done.stderr


def test_push_to_a_stopped_registry_ends_push_failed(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str,
        registry: Registry) -> None:
    write_matrix(tmp_path, unique_base[0], {"12.9.1": {"sleep": 3}}, child=False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "aipcc_build", "--matrix", "matrix/test.yaml", "matrix",
         "--push", "--registry", namespace, "--no-tls-verify", "--retries", "1"],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The registry answered the check before the first build, then stops.
    log = tmp_path / "logs" / "base" / "cuda-12.9-bb.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and "RUN echo start" in log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    registry.stop()
    _, stderr = proc.communicate(timeout=120)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    assert done.returncode == 1
    image = report(tmp_path)["images"][0]
    assert image["status"] == "push-failed"
    assert image["retries"] == 1 and image["image_id"] and image["digest"] is None
    assert image["message"].startswith(f"push to {namespace}/base/cuda-12.9-bb:1-dev "
                                       "failed after 2 attempt(s):")
    assert "connection refused" in image["message"]
    assert "push failed (" in done.stderr and "attempt 2 in 2 s" in done.stderr


def test_credentials_from_an_auth_file_never_show(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str,
        registry: Registry) -> None:
    write_matrix(tmp_path, unique_base[0], {"12.9.1": {"sleep": 0}}, child=False)
    token = "s3cr3t-" + uuid.uuid4().hex
    auth = base64.b64encode(f"robot:{token}".encode()).decode()
    auth_file = tmp_path / "auth.json"
    auth_file.write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))
    done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--push",
                       "--registry", namespace, "--no-tls-verify", "--junit", "junit.xml",
                       env={"REGISTRY_AUTH_FILE": str(auth_file)})
    assert done.returncode == 0, done.stderr
    # Where the run pushed: promote and mirror default to it (issue 22.20).
    assert report(tmp_path)["registry"] == namespace
    # What the build was made with: promote, mirror and compat take it from the report.
    assert report(tmp_path)["product"] == {"name": "t", "version": "1", "moving_tags": []}
    log = (tmp_path / "logs" / "base" / "cuda-12.9-bb.log").read_text()
    assert f"--authfile {auth_file}" in log  # the file's path, never its content
    outputs = [done.stdout, done.stderr, log, (tmp_path / "build-report.json").read_text(),
               (tmp_path / "junit.xml").read_text()]
    for text in outputs:
        assert token not in text and auth not in text


def test_parent_outside_the_plan_is_taken_at_the_parent_build_id(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str) -> None:
    write_matrix(tmp_path, unique_base[0], {"12.8.1": {"sleep": 0}})
    first = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--kind", "base",
                        "--registry", namespace, "--build-id", "100")
    assert first.returncode == 0, first.stderr
    # A change-aware plan selected only the child (its parent did not change): it is built
    # FROM the parent of build 100, not from a build-101 parent that nobody built.
    again = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix",
                        "--only", "child/cuda-12.8-bb", "--registry", namespace,
                        "--build-id", "101", "--parent-build-id", "100",
                        "--report", "second.json")
    assert again.returncode == 0, again.stderr
    child = by_key(json.loads((tmp_path / "second.json").read_text()))["child/cuda-12.8-bb"]
    assert child["status"] == "ok"
    assert child["reference"] == f"{namespace}/child/cuda-12.8-bb:1-101"
    log = (tmp_path / child["log"]).read_text()
    assert f"--from {namespace}/base/cuda-12.8-bb:1-100" in log


def test_one_image_job_builds_from_the_parent_this_build_pushed_to_its_registry(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str) -> None:
    # The per-image CI job: `--only KEY --registry R` after the parent's job pushed to R.
    # It used to build FROM the matrix's own registry (localhost/aipcc-test-sched/unused).
    write_matrix(tmp_path, unique_base[0], {"12.8.1": {"sleep": 0}})
    parent = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--only",
                         "base/cuda-12.8-bb", "--registry", namespace, "--build-id", "7",
                         "--push", "--no-tls-verify")
    assert parent.returncode == 0, parent.stderr
    child = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--only",
                        "child/cuda-12.8-bb", "--registry", namespace, "--build-id", "7",
                        "--push", "--no-tls-verify", "--report", "child.json")
    assert child.returncode == 0, child.stderr
    built = by_key(json.loads((tmp_path / "child.json").read_text()))["child/cuda-12.8-bb"]
    log = (tmp_path / built["log"]).read_text()
    assert f"--from {namespace}/base/cuda-12.8-bb:1-7" in log


def test_real_oci_isolation_failure_names_the_fix(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str) -> None:
    write_matrix(tmp_path, unique_base[0], {"12.8.1": {"sleep": 0}}, child=False)
    done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix",
                       "--registry", namespace, env={"BUILDAH_ISOLATION": "oci"})
    if done.returncode == 0:
        pytest.skip("this host runs RUN steps under OCI isolation: nothing to explain")
    image = by_key(report(tmp_path))["base/cuda-12.8-bb"]
    assert image["status"] == "failed"
    assert "set BUILDAH_ISOLATION=chroot" in image["message"]


@pytest.fixture
def small_fs(tmp_path: Path) -> Any:
    """A 256 KiB tmpfs under tmp_path (unmounted afterwards): a log directory that fills."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_build_stopped_by_its_timeout_or_a_full_log_dir_leaves_no_container(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str, small_fs: Path) -> None:
    """Issue 22.15: a run removes the working containers it made on every path, not only
    when interrupted."""
    write_matrix(tmp_path, unique_base[0], {"12.9.1": {"sleep": 120}}, child=False)
    started = time.monotonic()
    # One retry: neither limit is retried, but a RUN step whose container the runtime
    # could not start on a loaded machine is (tools.retry.RUNTIME_START).
    done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--registry",
                       namespace, "--build-timeout", "5", "--retries", "1")
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 60
    image = report(tmp_path)["images"][0]
    assert image["status"] == "failed" and "build_timeout" in image["message"]
    assert our_containers(unique_base[1]) == []

    # The RUN step prints more than the log directory holds, then sleeps.
    noisy = tmp_path / "noisy"
    write_matrix(noisy, unique_base[0], {"12.9.1": {"sleep": "0; seq 1 200000; sleep 120"}},
                 child=False)
    done = aipcc_build(noisy, "--matrix", "matrix/test.yaml", "matrix", "--registry",
                       namespace, "--log-dir", str(small_fs), "--retries", "1",
                       "--report", str(tmp_path / "noisy.json"))
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 120
    image = json.loads((tmp_path / "noisy.json").read_text())["images"][0]
    assert image["status"] == "failed" and "No space left" in image["message"], image
    assert "Traceback" not in done.stderr
    assert our_containers(unique_base[1]) == []


def test_two_concurrent_runs_of_one_build_id_never_overwrite_each_other(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str) -> None:
    """Issue 22.8: two `matrix --push` runs with one build id at once: one pushes, the other
    refuses to overwrite it (before, both succeeded and the tag held the later one's)."""
    runs = []
    for name in ("first", "second"):
        root = tmp_path / name
        write_matrix(root, unique_base[0], {"12.9.1": {"sleep": 2}}, child=False)
        runs.append((root, subprocess.Popen(
            [sys.executable, "-m", "aipcc_build", "--matrix", "matrix/test.yaml", "matrix",
             "--push", "--registry", namespace, "--no-tls-verify", "--build-id", "7",
             "--retries", "0", "--no-layers"],
            cwd=root, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    outcomes = {}
    for root, proc in runs:
        _, stderr = proc.communicate(timeout=240)
        image = report(root)["images"][0]
        outcomes[image["status"]] = (proc.returncode, image, stderr)
    assert set(outcomes) == {"ok", "push-failed"}, outcomes
    code, refused, stderr = outcomes["push-failed"]
    assert code == 1 and ("already holds other images" in refused["message"]
                          or "being pushed by another run" in refused["message"]), refused
    assert "Traceback" not in stderr
    winner = outcomes["ok"][1]
    reference = f"{namespace}/base/cuda-12.9-bb:1-7"
    held = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                           f"docker://{reference}"], capture_output=True, check=True).stdout
    import hashlib
    assert "sha256:" + hashlib.sha256(held).hexdigest() == winner["digest"]


def test_a_registry_that_never_answers_or_refuses_the_login_stops_the_run_before_building(
        tmp_path: Path, unique_base: tuple[str, str], cli: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22.17: checked with a short timeout before the first build (it held every push
    for the whole push timeout, after the builds). The silent registry's run is in-process,
    its per-attempt timeout 1 s (registry_http's 10 s, tried twice, waited 21 s)."""
    import socket

    import bcrypt

    from aipcc_build.tools import registry_http
    from tests.support.registry import Registry as Real

    write_matrix(tmp_path, unique_base[0], {"12.9.1": {"sleep": 0}}, child=False)
    with socket.socket() as silent, monkeypatch.context() as patch:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections are accepted by the kernel; nothing ever answers
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        patch.chdir(tmp_path)
        patch.setattr(registry_http, "TIMEOUT", 1.0)
        started = time.monotonic()
        done = cli("--matrix", "matrix/test.yaml", "matrix", "--push",
                   "--registry", f"{host}/ns", "--no-tls-verify")
        took = time.monotonic() - started
    assert done.code == 1, done.err
    assert f"registry {host} does not answer within 1 s" in done.err
    assert "(tried 2 times)" in done.err  # a timeout is asked again, within --retries
    assert took < 60 and "Traceback" not in done.err
    assert not (tmp_path / "logs").exists()  # nothing was built

    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text("robot:" + bcrypt.hashpw(b"right", bcrypt.gensalt(5)).decode() + "\n")
    (tmp_path / "reg").mkdir()
    locked = Real(tmp_path / "reg", htpasswd)
    locked.start()
    auth_file = tmp_path / "auth.json"

    def push_as(login: bytes) -> tuple[subprocess.CompletedProcess[str], str]:
        auth = base64.b64encode(login).decode()
        auth_file.write_text(json.dumps({"auths": {locked.host: {"auth": auth}}}))
        return aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--push",
                           "--registry", f"{locked.host}/ns", "--no-tls-verify",
                           env={"REGISTRY_AUTH_FILE": str(auth_file)}), auth

    try:
        done, wrong = push_as(b"robot:wrong")
        assert done.returncode == 1, done.stderr
        assert f"registry {locked.host} does not accept the credentials" in done.stderr
        assert "wrong" not in done.stderr and wrong not in done.stderr
        assert not (tmp_path / "logs").exists()
        done, _ = push_as(b"robot:right")
        assert done.returncode == 0, done.stderr
    finally:
        locked.stop()
        ours = [image["id"] for image in buildah_json("images")
                if any(name.startswith(f"{locked.host}/") for name in image.get("names") or [])]
        if ours:
            subprocess.run(["buildah", "rmi", "-f", *ours], capture_output=True)


def test_a_push_that_makes_no_progress_is_stopped(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str,
        registry: Registry) -> None:
    """Issue 22.17: a registry that answers the check, then accepts uploads and never
    answers, stops a push after --push-stall seconds without progress (it held it for the
    whole push timeout, 600 s by default)."""
    from tests.support.publish import FlakyProxy

    write_matrix(tmp_path, unique_base[0], {"12.9.1": {"sleep": 0}}, child=False)
    path = namespace.split("/", 1)[1]
    with FlakyProxy(registry.host, failures=0, hang=("POST", "PUT", "PATCH")) as silent:
        started = time.monotonic()
        done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--push",
                           "--registry", f"{silent.host}/{path}", "--no-tls-verify",
                           "--retries", "0", "--push-stall", "3")
        took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    image = report(tmp_path)["images"][0]
    assert image["status"] == "push-failed"
    assert "made no progress for 3 s (push_stall)" in image["message"], image
    assert took < 60
    ours = [i["id"] for i in buildah_json("images")
            if any(name.startswith(f"{silent.host}/") for name in i.get("names") or [])]
    if ours:
        subprocess.run(["buildah", "rmi", "-f", *ours], capture_output=True)


@pytest.mark.parametrize("engine", ["github", "gitlab"])
def test_a_failed_build_in_ci_shows_why_where_and_its_last_lines(
        tmp_path: Path, unique_base: tuple[str, str], engine: str) -> None:
    """Issue 38.4: a real failing RUN step in a CI job's log: its last lines unfolded, the
    log's path, on GitHub an error annotation on the Containerfile and a step-summary
    section, on GitLab an expanded section; the summary says why it failed."""
    write_matrix(tmp_path, unique_base[0], {"12.8.1": {"sleep": 0, "fail": True}}, child=False)
    summary = tmp_path / "step-summary.md"
    env = ({"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
           if engine == "github" else {"GITLAB_CI": "true"})
    done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix",
                       env={"CI": "true", "COLUMNS": "80", **env})
    assert done.returncode == 1
    key = "base/cuda-12.8-bb"
    assert f"[{key}] | boom" in done.stderr
    assert f"[{key}] whole log: logs/base/cuda-12.8-bb.log" in done.stderr
    assert "boom" in (tmp_path / "logs/base/cuda-12.8-bb.log").read_text()
    if engine == "github":
        assert f"::error file=containerfiles/base/cuda-12.8-bb/Containerfile,title={key} " \
               "failed::" in done.stderr
        assert "::group::" not in done.stderr
        assert f"### {key} failed" in summary.read_text() and "boom" in summary.read_text()
    else:
        assert "section_start:" in done.stderr and "[collapsed=false]" in done.stderr
    assert 'building at STEP "RUN' in done.stdout  # the summary's WHY
    assert max(len(line) for line in done.stdout.splitlines()) <= 80


def test_a_step_printing_150_mb_without_a_newline_completes_with_its_log_capped(
        tmp_path: Path, unique_base: tuple[str, str]) -> None:
    """Issue 38.7: it completed once, then never finished: every piece of the line went
    through the credential masking, quadratic on a long run of letters."""
    from aipcc_build.imagebuild.build_log import HEAD_BYTES, TAIL_BYTES

    write_matrix(tmp_path, unique_base[0], {"12.8.1": {"sleep": 0}}, child=False)
    template = tmp_path / "templates" / "base.j2"
    template.write_text("FROM {{ os_from }}\n"
                        "RUN head -c 157286400 /dev/zero | tr '\\0' a; echo; echo done\n")
    started = time.monotonic()
    done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--render",
                       env={"CI": "true"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    log = tmp_path / "logs/base/cuda-12.8-bb.log"
    assert log.stat().st_size <= HEAD_BYTES + TAIL_BYTES + 200 * 1024
    assert "left out of this log" in log.read_text()
    assert time.monotonic() - started < 240
