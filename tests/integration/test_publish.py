"""promote and mirror against real docker-registry servers on 127.0.0.1, with skopeo."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.imagebuild import build_report
from aipcc_build.matrix.model import Product
from aipcc_build.publish import mirror as mirror_core
from aipcc_build.publish import promote as promote_core
from aipcc_build.publish.transfer import Event
from aipcc_build.tools import registry_http
from aipcc_build.tools.retry import Retry, StillFailing
from tests.support.publish import PASSWORD, REPO, FlakyProxy, build_image, digest_at, push, run_cli

pytestmark = pytest.mark.integration


def promote(release: dict[str, Any], to: str, authfile: Path, *extra: str):  # type: ignore[no-untyped-def]
    return run_cli("--matrix", str(release["matrix"]), "promote", "--report",
                   str(release["report"]), "--to", to, "--no-tls-verify", "--authfile",
                   str(authfile), *extra)


def test_promote_by_digest_then_nothing_then_refuse_a_moved_image(
        release: dict[str, Any], registries: dict[str, Any], authfile: Path,
        tmp_path: Path, base_image: str) -> None:
    to = f"{registries['dst'].host}/release"
    dry = promote(release, to, authfile, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("copy\t") == 9  # 3 images x (3.0-42, 3.0, latest)
    assert digest_at(f"{to}/base-images/img0:3.0-42", authfile) is None

    first = promote(release, to, authfile)
    assert first.returncode == 0, first.stderr
    assert "9 copied" in first.stderr
    for entry in release["entries"]:
        for tag in ("3.0-42", "3.0", "latest"):
            ref = f"{to}/base-images/{entry['name']}:{tag}"
            assert digest_at(ref, authfile) == entry["digest"], ref
    again = promote(release, to, authfile)
    assert again.returncode == 0, again.stderr
    assert "0 copied, 9 already there" in again.stderr

    # img1 is re-pushed under the same tag: the report's digest no longer holds.
    other = f"localhost/aipcc-test-release/moved-{os.getpid()}"
    build_image(base_image, other, "moved")
    try:
        push(other, release["entries"][1]["reference"])
    finally:
        subprocess.run(["buildah", "rmi", "-f", other], capture_output=True)
    to2 = f"{registries['dst'].host}/release2"
    refused = promote(release, to2, authfile)
    assert refused.returncode == 2
    assert "base/img1" in refused.stderr and "base/img0" not in refused.stderr
    assert digest_at(f"{to2}/base-images/img0:3.0-42", authfile) is None

    # A report entry not ok is refused by name, nothing published.
    data = json.loads(release["report"].read_text())
    data["images"][2]["status"] = "failed"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    refused = run_cli("--matrix", str(release["matrix"]), "promote", "--report", str(bad),
                      "--to", to2, "--no-tls-verify", "--authfile", str(authfile))
    assert refused.returncode == 2 and "base/img2 is failed" in refused.stderr
    assert not list(tmp_path.rglob("*")) or all(
        PASSWORD not in p.read_text(errors="replace") for p in tmp_path.rglob("*")
        if p.is_file() and p.name not in ("htpasswd",) and "data" not in p.parts)


def mirror(release: dict[str, Any], *args: str, out: Path, auth: Path | None = None):  # type: ignore[no-untyped-def]
    extra = ["--authfile", str(auth)] if auth else []
    return run_cli("--matrix", str(release["matrix"]), "mirror", "--no-tls-verify",
                   "--out", str(out), "--retries", "3", *extra, *args)


def test_mirror_registry_archive_and_back_digests_unchanged(
        release: dict[str, Any], registries: dict[str, Any], authfile: Path,
        tmp_path: Path) -> None:
    dst = registries["dst"].host
    out = tmp_path / "conf"
    done = mirror(release, "--report", str(release["report"]), "--to", f"docker://{dst}/m1",
                  out=out, auth=authfile)
    assert done.returncode == 0, done.stderr
    for entry in release["entries"]:
        assert digest_at(f"{dst}/m1/base-images/{entry['name']}:3.0-42",
                         authfile) == entry["digest"]
    idms = (out / "imagedigestmirrorset.yaml").read_text()
    assert "kind: ImageDigestMirrorSet" in idms
    # One entry per repository mirrored.
    for entry in release["entries"]:
        repository = f"base-images/{entry['name']}"
        assert f'source: "{release["ns"]}/{repository}"' in idms
        assert f'"{dst}/m1/{repository}"' in idms
    conf = (out / "registries.conf").read_text()
    assert "[[registry.mirror]]" in conf
    assert f'location = "{dst}/m1/base-images/img0"' in conf
    assert "imagedigestmirrorset.yaml" in done.stdout

    archive = tmp_path / "release.tar"
    done = mirror(release, "--report", str(release["report"]), "--to",
                  f"oci-archive:{archive}", out=out)
    assert done.returncode == 0, done.stderr
    assert archive.is_file() and not Path(f"{archive}.partial").exists()
    rerun = mirror(release, "--report", str(release["report"]), "--to",
                   f"oci-archive:{archive}", out=out)
    assert "0 copied, 3 already there" in rerun.stderr

    back = mirror(release, "--from", f"oci-archive:{archive}", "--to",
                  f"docker://{dst}/site", out=tmp_path / "site", auth=authfile)
    assert back.returncode == 0, back.stderr
    for entry in release["entries"]:
        assert digest_at(f"{dst}/site/base-images/{entry['name']}:3.0-42",
                         authfile) == entry["digest"]
    assert f'source: "{release["ns"]}/base-images/img1"' in (
        tmp_path / "site" / "imagedigestmirrorset.yaml").read_text()
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix in (".yaml", ".conf", ".json", ".tar"):
            assert PASSWORD.encode() not in path.read_bytes()


def test_mirror_killed_halfway_resumes(release: dict[str, Any], registries: dict[str, Any],
                                       tmp_path: Path) -> None:
    dst = f"{registries['src'].host}/resume"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = [sys.executable, "-m", "aipcc_build", "--matrix", str(release["matrix"]), "mirror",
            "--no-tls-verify", "--out", str(tmp_path), "--report", str(release["report"]),
            "--jobs", "1", "--to", f"docker://{dst}"]
    child = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True,
                             stdout=subprocess.DEVNULL, start_new_session=True)
    assert child.stderr is not None
    for line in child.stderr:
        if "copied" in line:  # the first image is there: kill the run
            os.killpg(child.pid, signal.SIGKILL)
            break
    child.wait()
    there = [e for e in release["entries"]
             if digest_at(f"{dst}/base-images/{e['name']}:3.0-42") == e["digest"]]
    assert 1 <= len(there) < 3
    rerun = run_cli(*args[3:])
    assert rerun.returncode == 0, rerun.stderr
    # Only what was missing is copied (a manifest the killed push had already sent may
    # land in the registry a moment after the check above: it then counts as there).
    summary = re.search(r"(\d) copied, (\d) already there", rerun.stderr)
    assert summary is not None
    copied, present = int(summary[1]), int(summary[2])
    assert copied + present == 3 and present >= len(there) >= 1
    assert rerun.stderr.count(": copying ") == copied
    for entry in release["entries"]:
        assert digest_at(f"{dst}/base-images/{entry['name']}:3.0-42") == entry["digest"]


def test_mirror_retries_503_and_marks_a_dead_registry_failed(
        release: dict[str, Any], registries: dict[str, Any], tmp_path: Path) -> None:
    upstream = registries["src"].host
    with FlakyProxy(upstream, failures=8) as flaky:
        done = mirror(release, "--report", str(release["report"]), "--to",
                      f"docker://{flaky.host}/flaky", out=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "retry" in done.stderr and "503" in done.stderr
        for entry in release["entries"]:
            assert digest_at(f"{upstream}/flaky/base-images/{entry['name']}:3.0-42") == \
                entry["digest"]

    # One image's source answers 503 for good: it fails, the others are mirrored.
    images = mirror_core.images_from_report(build_report.read(release["report"]),
                                            release["ns"])
    with FlakyProxy(upstream, failures=-1) as dead:
        images[0] = dataclasses.replace(images[0],
                                        source=images[0].source.replace(upstream, dead.host))
        events: list[Event] = []
        result = mirror_core.mirror(
            mirror_core.MirrorRequest(images=tuple(images), to=f"docker://{upstream}/half",
                                      source_registry=release["ns"], out=str(tmp_path),
                                      tls_verify=False,
                                      retry=Retry(attempts=3, first=0.1, cap=0.2)),
            on_event=events.append)
    assert [o.status for o in result.outcomes] == ["failed", "copied", "copied"]
    assert "503" in result.outcomes[0].message
    assert sum(e.kind == "retry" and e.key == "base/img0" for e in events) == 2
    assert digest_at(f"{upstream}/half/base-images/img0:3.0-42") is None
    for entry in release["entries"][1:]:
        assert digest_at(f"{upstream}/half/base-images/{entry['name']}:3.0-42") == \
            entry["digest"]


def test_mirror_by_build_id_pins_the_matrix_tags_to_their_digests(
        release: dict[str, Any], registries: dict[str, Any], tmp_path: Path) -> None:
    # The matrix of the release fixture has one image, base/cpu-el9; build 42 pushed it.
    reference = f"{release['ns']}/base-images/cpu-el9:3.0-42"
    digest = push(release["names"][0], reference)
    dst = f"{registries['src'].host}/by-id"
    done = mirror(release, "--build-id", "42", "--kind", "base", "--to", f"docker://{dst}",
                  out=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 copied" in done.stderr
    assert digest_at(f"{dst}/base-images/cpu-el9:3.0-42") == digest
    # A build id the registry does not hold is named, and nothing is mirrored.
    missing = mirror(release, "--build-id", "43", "--to", f"docker://{dst}", out=tmp_path)
    assert missing.returncode == 2
    assert "base/cpu-el9" in missing.stderr and "3.0-43 does not exist" in missing.stderr
    assert digest_at(f"{dst}/base-images/cpu-el9:3.0-43") is None


def test_promote_waits_out_429_with_retry_after_and_a_copy_that_keeps_failing_exits_1(
        release: dict[str, Any], registries: dict[str, Any], authfile: Path,
        tmp_path: Path) -> None:
    """Issue 22.4: one table of transient errors for every registry call, Retry-After
    honoured, skopeo's 429 retried; a copy that still fails is a failure (exit 1), not a
    refusal (exit 2)."""
    upstream = registries["src"].host
    # Our own look at a tag (an HTTP HEAD) gets 429 twice: each retry waits what the
    # registry asked (2 s, more than the backoff's first second). The first request is the
    # registry check's GET /v2/: a 429 there says the registry is up, and is not waited out.
    with FlakyProxy(upstream, failures=3, status=429, retry_after=2) as slow:
        done = promote(release, f"{slow.host}/looked", authfile)
        assert done.returncode == 0, done.stderr
        assert "retry" in done.stderr and "429" in done.stderr
        answered = slow.answered
    refused = [n for n, (_, status) in enumerate(answered) if status == 429]
    assert refused[0] == 0 and len(refused) == 3
    for n in refused[1:]:
        assert answered[n + 1][0] - answered[n][0] >= 1.9, answered[:6]
    for entry in release["entries"]:
        assert digest_at(f"{upstream}/looked/base-images/{entry['name']}:3.0-42") == \
            entry["digest"]

    # skopeo itself waits out a few 429s, then gives up ("too many requests"): the copy is
    # tried again and lands. (skopeo 1.9 asks 8 times before it gives up; Retry-After: 0
    # keeps its waits short.) No quick look here: every GET is skopeo's.
    report = build_report.read(release["report"])[:1]
    events: list[Event] = []
    with FlakyProxy(upstream, failures=9, status=429, retry_after=0, methods=("GET",)) as busy:
        result = promote_core.promote(
            promote_core.PromoteRequest(
                reports=(str(release["report"]),), to=f"{busy.host}/busy",
                source_registry=release["ns"], product=Product("aipcc", "3.0", ()),
                tls_verify=False, retry=Retry(attempts=3, first=0.1, cap=0.2), jobs=1),
            on_event=events.append)
    assert len(result.copied) == 3
    assert any(e.kind == "retry" and "too many requests" in e.message.lower()
               for e in events), [e.message for e in events if e.kind == "retry"]
    assert digest_at(f"{upstream}/busy/base-images/{report[0].name}:3.0-42") == \
        report[0].digest

    # Uploads answered 503 for good: the copy fails after its attempts, and the run ends
    # as a failure (exit 1), not as refused input (exit 2).
    with FlakyProxy(upstream, failures=-1, methods=("POST", "PUT", "PATCH")) as dead, \
            pytest.raises(StillFailing) as failed:
        promote_core.promote(
            promote_core.PromoteRequest(
                reports=(str(release["report"]),), to=f"{dead.host}/dead",
                source_registry=release["ns"], product=Product("aipcc", "3.0", ()),
                tls_verify=False, retry=Retry(attempts=2, first=0.1, cap=0.1), jobs=1),
            probe=registry_http.manifest_digest)
    assert failed.value.exit_code == 1 and "503" in str(failed.value)

def test_promote_refuses_to_move_a_release_tag_and_colliding_report_entries(
        release: dict[str, Any], registries: dict[str, Any], authfile: Path,
        tmp_path: Path, base_image: str) -> None:
    """Issue 22.2: `{version}-{build_id}` is immutable; two entries for one destination tag
    would flip it on every rerun."""
    src = registries["src"].host
    to = f"{src}/held"
    # The same build id was rebuilt and promoted before: img1's release tag holds another
    # digest.
    other = f"localhost/aipcc-test-release/rebuilt-{os.getpid()}"
    build_image(base_image, other, "rebuilt")
    try:
        held = push(other, f"{to}/base-images/img1:3.0-42")
    finally:
        subprocess.run(["buildah", "rmi", "-f", other], capture_output=True)
    refused = promote(release, to, authfile)
    assert refused.returncode == 1, refused.stderr
    assert f"{to}/base-images/img1:3.0-42 already holds {held}" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert digest_at(f"{to}/base-images/img1:3.0-42") == held
    for name in ("img0", "img2"):
        assert digest_at(f"{to}/base-images/{name}:3.0-42") is None, name
    assert digest_at(f"{to}/base-images/img1:latest") is None

    # Two entries (other keys) land on one destination: refused before anything is looked at.
    data = json.loads(release["report"].read_text())
    data["images"][2]["reference"] = data["images"][0]["reference"]
    colliding = tmp_path / "colliding.json"
    colliding.write_text(json.dumps(data))
    clash = run_cli("--matrix", str(release["matrix"]), "promote", "--report",
                    str(colliding), "--to", f"{src}/clash", "--no-tls-verify")
    assert clash.returncode == 2, clash.stderr
    assert f"{src}/clash/base-images/img0:3.0-42" in clash.stderr
    assert "base/img0" in clash.stderr and "base/img2" in clash.stderr
    assert digest_at(f"{src}/clash/base-images/img0:3.0-42") is None


def test_promote_and_mirror_hash_the_manifest_not_the_digest_header(
        release: dict[str, Any], registries: dict[str, Any], tmp_path: Path,
        base_image: str) -> None:
    """Issue 22.3: a registry (or proxy) that answers Docker-Content-Digest for other
    content does not make promote or mirror skip a copy."""
    src = registries["src"].host
    wanted = release["entries"][0]["digest"]
    other = f"localhost/aipcc-test-release/stale-{os.getpid()}"
    build_image(base_image, other, "stale")
    try:
        # A moving tag (promote may move it) and a mirror's tag hold stale content.
        push(other, f"{src}/lied/base-images/img0:latest")
        push(other, f"{src}/mlied/base-images/img0:3.0-42")
    finally:
        subprocess.run(["buildah", "rmi", "-f", other], capture_output=True)
    with FlakyProxy(src, failures=0, lie=("/base-images/img0/manifests/", wanted)) as liar:
        result = promote_core.promote(
            promote_core.PromoteRequest(
                reports=(str(release["report"]),), to=f"{liar.host}/lied",
                source_registry=release["ns"],
                product=Product("aipcc", "3.0", ("latest",)), tls_verify=False, jobs=1),
            probe=registry_http.manifest_digest)
        mirrored = mirror_core.mirror(
            mirror_core.MirrorRequest(
                images=tuple(mirror_core.images_from_report(
                    build_report.read(release["report"]), release["ns"])),
                to=f"docker://{liar.host}/mlied", source_registry=release["ns"],
                out=str(tmp_path / "conf"), tls_verify=False, jobs=1),
            probe=registry_http.manifest_digest)
    assert f"{liar.host}/lied/base-images/img0:latest" in {c.dest for c in result.copied}
    assert digest_at(f"{src}/lied/base-images/img0:latest") == wanted
    assert {o.image.key: o.status for o in mirrored.outcomes}["base/img0"] == "copied"
    assert digest_at(f"{src}/mlied/base-images/img0:3.0-42") == wanted


def test_promote_and_mirror_take_the_registry_the_report_records(
        release: dict[str, Any], registries: dict[str, Any], tmp_path: Path) -> None:
    """Issue 22.20: the build pushed elsewhere than the matrix's registry (`matrix
    --registry`); its report says where, and promote and mirror need no --registry."""
    src = registries["src"].host
    elsewhere = release["matrix"].parent / "elsewhere.yaml"
    elsewhere.write_text(release["matrix"].read_text().replace(
        f"registry: {release['ns']}", "registry: quay.example/not-here"))
    data = json.loads(release["report"].read_text())
    data["registry"] = release["ns"]
    recorded = tmp_path / "recorded.json"
    recorded.write_text(json.dumps(data))
    done = run_cli("--matrix", str(elsewhere), "promote", "--report", str(recorded),
                   "--to", f"{src}/rec", "--no-tls-verify")
    assert done.returncode == 0, done.stderr
    mirrored = run_cli("--matrix", str(elsewhere), "mirror", "--report", str(recorded),
                       "--to", f"docker://{src}/recm", "--no-tls-verify", "--out",
                       str(tmp_path / "conf"))
    assert mirrored.returncode == 0, mirrored.stderr
    for entry in release["entries"]:
        assert digest_at(f"{src}/rec/base-images/{entry['name']}:3.0-42") == entry["digest"]
        assert digest_at(f"{src}/recm/base-images/{entry['name']}:3.0-42") == entry["digest"]
    assert f'source: "{release["ns"]}/base-images/img2"' in (
        tmp_path / "conf" / "imagedigestmirrorset.yaml").read_text()
    # An explicit --registry still wins: the report's images are not below it.
    wrong = run_cli("--matrix", str(elsewhere), "promote", "--report", str(recorded),
                    "--to", f"{src}/rec2", "--no-tls-verify", "--registry", "other.io/ns")
    assert wrong.returncode == 2 and "is not below other.io/ns" in wrong.stderr


def test_promote_and_compat_from_a_report_of_a_build_made_with_another_matrix(
        release: dict[str, Any], registries: dict[str, Any], tmp_path: Path) -> None:
    """Issue 30: a build made with a matrix of product version 2.0, whose only image was
    built for one of its two platforms. promote without --matrix tags 2.0 (the default
    matrix, matrix/aipcc.yaml here, says 3.0); a matrix of 3.0 is refused; compat lists the
    reference the build pushed and the platform it built."""
    src = registries["src"].host
    ns = release["ns"]
    reference = f"{ns}/base-images/cpu-el9:2.0-42"
    digest = push(release["names"][0], reference)
    data = {"schema": 1, "build_id": "42", "registry": ns,
            "product": {"name": "aipcc", "version": "2.0", "moving_tags": ["{version}"]},
            "images": [{"name": "cpu-el9", "key": "base/cpu-el9", "kind": "base",
                        "reference": reference, "platform": "linux/amd64", "status": "ok",
                        "digest": digest}]}
    report = tmp_path / "other-build.json"
    report.write_text(json.dumps(data))
    other = release["matrix"].parent / "other.yaml"
    other.write_text(release["matrix"].read_text().replace('version: "3.0"', 'version: "2.0"')
                     .replace("templates: templates\n",
                              "templates: templates\nplatforms: [linux/amd64, linux/arm64]\n"))

    done = run_cli("promote", "--report", str(report), "--to", f"{src}/rel",
                   "--no-tls-verify", cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert digest_at(f"{src}/rel/base-images/cpu-el9:2.0-42") == digest
    assert digest_at(f"{src}/rel/base-images/cpu-el9:2.0") == digest
    assert digest_at(f"{src}/rel/base-images/cpu-el9:3.0-42") is None

    refused = run_cli("--matrix", str(release["matrix"]), "promote", "--report", str(report),
                      "--to", f"{src}/rel3", "--no-tls-verify")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "2.0" in refused.stderr and "3.0" in refused.stderr and str(report) in refused.stderr
    assert digest_at(f"{src}/rel3/base-images/cpu-el9:3.0-42") is None
    mirrored = run_cli("--matrix", str(release["matrix"]), "mirror", "--report", str(report),
                       "--to", f"docker://{src}/m3", "--no-tls-verify", "--out",
                       str(tmp_path / "m3"))
    assert mirrored.returncode == 2 and "3.0" in mirrored.stderr
    assert not (tmp_path / "m3").exists()

    table = run_cli("--matrix", str(other), "compat", "--report", str(report), "--format",
                    "json")
    assert table.returncode == 0, table.stderr
    rows = json.loads(table.stdout)["images"]
    assert [(r["reference"], r["digest"], r["platforms"]) for r in rows] == [
        (reference, digest, ["linux/amd64"])]
    assert run_cli("--matrix", str(release["matrix"]), "compat", "--report",
                   str(report)).returncode == 2


def test_mirror_to_a_registry_that_refuses_every_push_writes_no_mirror_config(
        release: dict[str, Any], registries: dict[str, Any], tmp_path: Path) -> None:
    """Issue 30: a mirror run that mirrored nothing exits 1 and tells no site to pull from
    a mirror that does not hold the images."""
    upstream = registries["src"].host
    out = tmp_path / "conf"
    with FlakyProxy(upstream, failures=-1, status=403,
                    methods=("POST", "PUT", "PATCH")) as refusing:
        done = mirror(release, "--report", str(release["report"]), "--retries", "1",
                      "--to", f"docker://{refusing.host}/m", out=out)
    assert done.returncode == 1, done.stderr
    assert "3 failed" in done.stderr
    assert not (out / "imagedigestmirrorset.yaml").exists()
    assert not (out / "registries.conf").exists()
