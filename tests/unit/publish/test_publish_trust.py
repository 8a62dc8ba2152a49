"""Issue 22.19: no password echoed, build ids checked wherever they come from, mirror's
filters honoured for a report, valid Kubernetes names, report fields named as such, and
validate's copy timeout an option."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.errors import InputError, ToolError
from aipcc_build.imagebuild import build_report
from aipcc_build.publish import mirror_config
from aipcc_build.tools.retry import Retry
from aipcc_build.tools.skopeo import COPY_TIMEOUT, Skopeo
from tests.support.fakes import RecordingRunner
from tests.support.project import REPO

DEMO = str(REPO / "matrix" / "demo.yaml")
SECRET = "s3cret-pw"
DIGEST = "sha256:" + "cd" * 32
KEYS = ("base/cuda-12.9-debian", "base/cpu-debian")


def report(path: Path, build_id: object = "7") -> Path:
    images = [{"key": key, "status": "ok", "digest": DIGEST,
               "reference": f"localhost/aipcc-demo/{key}:1.0-7"} for key in KEYS]
    path.write_text(json.dumps({"schema": 1, "build_id": build_id, "images": images}))
    return path


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    found = tmp_path / "layout"
    found.mkdir()
    (found / "index.json").write_text('{"schemaVersion": 2, "manifests": []}')
    (found / "aipcc-mirror.json").write_text(
        '{"schema": 1, "source_registry": "localhost/aipcc-demo"}')
    return found


def test_a_password_in_mirror_to_is_never_shown(layout: Path, cli) -> None:
    done = cli("--matrix", DEMO, "mirror", "--from", f"dir:{layout}", "--to",
               f"docker://me:{SECRET}@127.0.0.1:9/ns", "--out", str(layout.parent))
    assert done.code == 2, done.err
    assert SECRET not in done.out + done.err
    assert "***@127.0.0.1:9" in done.err and "--authfile" in done.err


def test_a_password_in_promote_to_is_never_shown(tmp_path: Path, cli) -> None:
    done = cli("--matrix", DEMO, "promote", "--report", str(report(tmp_path / "r.json")),
               "--to", f"me:{SECRET}@127.0.0.1:9/release", "--no-tls-verify")
    assert done.code == 2, done.err
    assert SECRET not in done.out + done.err


def test_a_tool_error_never_keeps_a_password() -> None:
    error = ToolError(["skopeo", "copy", "a", f"docker://me:{SECRET}@host/ns/x:1"], 1,
                      f'invalid reference "docker://me:{SECRET}@host/ns/x:1"')
    assert SECRET not in str(error) + error.stderr + " ".join(error.command)
    # An image reference by digest is no credential.
    kept = ToolError(["skopeo"], 1, "reading quay.io/ns/img:3.0@sha256:ab and img:1@sha256:cd")
    assert "quay.io/ns/img:3.0@sha256:ab" in kept.stderr


@pytest.mark.parametrize("value", ["7\nRUN evil", "bad/id"])
@pytest.mark.parametrize("command", [["matrix"], ["matrix", "--dry-run"], ["plan"]])
def test_parent_build_id_is_checked_and_named(tmp_path: Path, cli, command: list[str],
                                              value: str) -> None:
    # --build-id refuses both values: --parent-build-id, under the same rule, too (a dry
    # run of matrix took "bad/id").
    extra = ["--report", str(tmp_path / "r.json")] if command == ["matrix"] else []
    assert cli("--matrix", DEMO, *command, "--build-id", value, *extra).code == 2
    done = cli("--matrix", DEMO, *command, "--parent-build-id", value, *extra)
    assert done.code == 2, done.err
    assert "Traceback" not in done.err
    assert "--parent-build-id" in done.err and "--build-id:" not in done.err, done.err
    assert len(done.err.strip().splitlines()) == 1


@pytest.mark.parametrize("build_id", [None, 5, "a b"])
def test_a_bad_build_id_in_the_report_is_blamed_on_the_report(tmp_path: Path, cli,
                                                                build_id: object) -> None:
    path = report(tmp_path / "r.json", build_id)
    done = cli("--matrix", DEMO, "promote", "--report", str(path), "--to", "127.0.0.1:9/r",
               "--dry-run")
    assert done.code == 2, done.err
    assert "--build-id" not in done.err, done.err
    assert str(path) in done.err and '"build_id"' in done.err, done.err


def test_mirror_report_honours_only(tmp_path: Path) -> None:
    from aipcc_build.errors import CheckFailed
    from aipcc_build.matrix import Filters
    from aipcc_build.publish.mirror import MirrorRelease, mirror_release

    checked: list[str] = []

    def check(references: object, tls_verify: bool, authfile: object, retry: object
              ) -> None:
        checked.extend(references)  # type: ignore[call-overload]
        raise CheckFailed("registry 127.0.0.1:9 does not answer")

    request = MirrorRelease(to="127.0.0.1:9/ns", matrix_path=DEMO,
                            reports=(str(report(tmp_path / "r.json")),),
                            filters=Filters(names=("cpu-debian",)), out=str(tmp_path))
    with pytest.raises(CheckFailed):
        mirror_release(request, check=check)
    # The registries are checked first, for the images the filter picks only.
    assert checked == [f"localhost/aipcc-demo/base/cpu-debian@{DIGEST}", "127.0.0.1:9/ns/x"]


def test_the_mirror_set_name_is_a_kubernetes_name(tmp_path: Path, layout: Path, cli) -> None:
    done = cli("--matrix", DEMO, "mirror", "--from", f"dir:{layout}", "--to",
               "docker://Mirror_Host.example:5000/My_NS/sub_dir", "--out", str(tmp_path))
    assert done.code == 0, done.err
    text = (tmp_path / mirror_config.IDMS_FILE).read_text()
    name = json.loads(re.search(r"^  name: (.*)$", text, re.M).group(1))
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name), name
    assert name == "aipcc-mirror-host-example-5000-my-ns-sub-dir"


def test_validate_copy_timeout_is_an_option_with_one_default(cli) -> None:
    done = cli("validate", "--help")
    assert "--copy-timeout" in done.out and f"{COPY_TIMEOUT:g}" in done.out.replace(
        "3600.0", "3600")
    runner = RecordingRunner(lambda argv: (0, b"", b""))
    seen: list[float] = []
    real = runner.run

    def timed(argv, *, timeout: float = 120.0, **options):  # type: ignore[no-untyped-def]
        seen.append(timeout)
        return real(argv, timeout=timeout, **options)

    runner.run = timed  # type: ignore[method-assign]
    Skopeo(runner, copy_timeout=42.0).copy("oci:a", "dir:b")
    assert seen == [42.0]


def test_promote_takes_the_product_from_the_report_never_from_a_default_matrix(
        tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(REPO)  # where the default matrix/aipcc.yaml (version 3.0) is
    old = report(tmp_path / "old.json")  # no "product": written before it was recorded
    done = cli("promote", "--report", str(old), "--to", "127.0.0.1:9/r", "--dry-run",
               "--registry", "localhost/aipcc-demo")
    assert done.code == 2, done.err
    assert "does not record the product version" in done.err and str(old) in done.err
    assert len(done.err.strip().splitlines()) == 1

    data = json.loads(old.read_text())
    data["product"] = {"name": "aipcc", "version": "9.9", "moving_tags": []}
    recorded = tmp_path / "recorded.json"
    recorded.write_text(json.dumps(data))
    for named in (["--matrix", DEMO], []):
        if not named:
            monkeypatch.setenv("AIPCC_BUILD_MATRIX", DEMO)  # named through the environment
        refused = cli(*named, "promote", "--report", str(recorded), "--to", "127.0.0.1:9/r",
                      "--dry-run")
        assert refused.code == 2, refused.err
        assert "9.9" in refused.err and "1.0" in refused.err, refused.err
    with pytest.raises(InputError, match="version 9.9, m.yaml says 1.0"):
        build_report.read_release(recorded).check_matrix("1.0", matrix_path="m.yaml")
    for product in ({"name": "aipcc", "version": 2}, {"name": "a", "version": "3.0\nX"},
                    {"name": "a", "version": "3.0", "moving_tags": ["{nope}"]},
                    {"name": "a", "version": "3.0", "moving_tags": ["a b"]}):
        data["product"] = product
        recorded.write_text(json.dumps(data))
        bad = cli("promote", "--report", str(recorded), "--to", "127.0.0.1:9/r", "--dry-run")
        assert bad.code == 2 and "product" in bad.err and "Traceback" not in bad.err
        assert len(bad.err.strip().splitlines()) == 1

def test_promote_to_a_dead_registry_says_so_before_any_retry(
        tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """As `matrix` does, promote asks each registry's /v2/ first: a registry that is down
    ends the run after the check's tries, before any look is tried again (each used to
    retry for 16 s). The request's retry bound, which the check keeps to, is two tries
    here (their one wait 0.01 s: what is tested is the bound, not the backoff): the default
    five wait 15 s."""
    from aipcc_build.publish import promote as promote_module

    real_promote = promote_module.promote

    def with_two_tries(request: Any, **kwargs: Any) -> Any:
        return real_promote(replace(request, retry=Retry(attempts=2, first=0.01, cap=0.01)),
                            **kwargs)

    monkeypatch.setattr(promote_module, "promote", with_two_tries)
    path = tmp_path / "r.json"
    images = [{"key": key, "status": "ok", "digest": DIGEST,
               "reference": f"127.0.0.1:9/aipcc-demo/{key}:1.0-7"} for key in KEYS]
    path.write_text(json.dumps({"schema": 1, "build_id": "7", "registry": "127.0.0.1:9/aipcc-demo",
                                "images": images}))
    done = cli("--matrix", DEMO, "promote", "--report", str(path), "--to",
               "127.0.0.1:9/release", "--registry", "127.0.0.1:9/aipcc-demo",
               "--no-tls-verify")
    assert done.code == 1, done.err
    assert "registry 127.0.0.1:9 does not answer" in done.err
    assert "(tried 2 times)" in done.err
    assert "retry" not in done.out + done.err


@pytest.mark.parametrize("stderr, says, option", [
    ('time="2026-11-28T00:42:39Z" level=fatal msg="Error parsing image name \\"docker://'
     '127.0.0.1:9/ns/x:1\\": pinging container registry 127.0.0.1:9: Get \\"http://'
     '127.0.0.1:9/v2/\\": dial tcp 127.0.0.1:9: connect: connection refused"',
     "nothing answers at 127.0.0.1:9 (connection refused): is the registry running there?",
     None),
    ('time="2026-11-28T00:50:01Z" level=fatal msg="Error parsing image name \\"docker://'
     '127.0.0.1:5000/ns/x:1\\": pinging container registry 127.0.0.1:5000: Get \\"https://'
     '127.0.0.1:5000/v2/\\": http: server gave HTTP response to HTTPS client"',
     "the registry 127.0.0.1:5000 speaks plain HTTP, not HTTPS", "tls_verify"),
    ('time="2026-11-28T00:50:01Z" level=fatal msg="initializing source docker://quay.io/a/b:1:'
     ' reading manifest 1 in quay.io/a/b: unauthorized: access to the requested resource is '
     'not authorized"', "the registry quay.io wants credentials", None),
])
def test_registry_errors_say_what_happened_and_what_fixes_it(stderr: str, says: str,
                                                             option: str | None) -> None:
    """skopeo's words (as the real skopeo printed them) stay, as the detail only."""
    error = ToolError(["skopeo", "inspect", "docker://x"], 1, stderr)
    assert str(error).startswith(says), str(error)
    assert "(skopeo: " in str(error) and "level=fatal" not in str(error)
    assert error.field == option
