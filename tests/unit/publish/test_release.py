"""Issue 38: a fanned-out build's reports joined into one release, every tag read back
after the copy, the release manifest, unreleased build ids, and the ecosystem's spellings
(--to, --tls-verify=, --json, --authfile). A recording runner: no program starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipcc_build.cli.options import cli as group
from aipcc_build.errors import CheckFailed, InputError
from aipcc_build.imagebuild import build_report
from aipcc_build.publish.mirror import Image, MirrorRequest, destination, mirror
from aipcc_build.publish.promote import promote, release_manifest
from aipcc_build.publish.transfer import Event, release_namespace
from tests.support.fakes import RecordingRunner
from tests.unit.publish.test_publish_units import (
    DIGEST,
    MANIFEST,
    fake_registry,
    request,
    source_store,
)

PRODUCT = {"name": "aipcc", "version": "3.0", "moving_tags": ["{version}", "latest"]}


def job_report(path: Path, key: str, **header: object) -> str:
    """The report one CI job leaves: one image."""
    name = key.split("/")[1]
    document = {"schema": 1, "build_id": "7", "registry": "src.io/ns", "product": PRODUCT,
                "start": f"2026-01-01T00:0{len(name) % 9}:00.000+00:00",
                "images": [{"key": key, "reference": f"src.io/ns/{key}:3.0-7",
                            "status": "ok", "digest": DIGEST.get(name, DIGEST["a"])}]}
    document.update(header)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return str(path)


def test_reports_of_one_build_join_into_one_release_files_or_a_directory(
        tmp_path: Path) -> None:
    job_report(tmp_path / "jobs" / "base-a" / "build-report.json", "base/a")
    job_report(tmp_path / "jobs" / "base-b" / "build-report.json", "base/b")
    release = build_report.read_releases([str(tmp_path / "jobs")])
    assert [e.key for e in release.images] == ["base/a", "base/b"]
    assert release.build_id == "7" and release.product is not None
    assert release.product.version == "3.0" and release.registry == "src.io/ns"
    # The same report given twice, or a file and its directory: read once.
    again = build_report.read_releases([str(tmp_path / "jobs"),
                                        str(tmp_path / "jobs" / "base-a" /
                                            "build-report.json")])
    assert [e.key for e in again.images] == ["base/a", "base/b"]


@pytest.mark.parametrize("field,value", [("build_id", "8"), ("registry", "other.io/ns"),
                                         ("product", dict(PRODUCT, version="3.1")),
                                         ("product", dict(PRODUCT, name="other"))])
def test_reports_of_different_builds_are_refused_naming_both_files(
        tmp_path: Path, field: str, value: object) -> None:
    first = job_report(tmp_path / "a.json", "base/a")
    second = job_report(tmp_path / "b.json", "base/b", **{field: value})
    with pytest.raises(InputError) as info:
        build_report.read_releases([first, second])
    assert first in str(info.value) and second in str(info.value)
    assert "not one release" in str(info.value)


def test_one_image_with_two_digests_in_two_reports_is_refused(tmp_path: Path) -> None:
    first = job_report(tmp_path / "a.json", "base/a")
    second = job_report(tmp_path / "b.json", "base/a")
    data = json.loads(Path(second).read_text())
    data["images"][0]["digest"] = DIGEST["b"]
    Path(second).write_text(json.dumps(data))
    with pytest.raises(InputError, match="base/a is in .*a.json and in .*b.json"):
        build_report.read_releases([first, second])


def test_a_directory_without_reports_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no build report"):
        build_report.read_releases([str(tmp_path / "empty")])


def test_merge_reports_writes_one_report_every_reader_takes(tmp_path: Path, cli) -> None:
    job_report(tmp_path / "jobs" / "a.json", "base/a")
    job_report(tmp_path / "jobs" / "b.json", "base/b")
    out = tmp_path / "build-report.json"
    done = cli("merge-reports", str(tmp_path / "jobs"), "-o", str(out))
    assert done.code == 0, done.err
    release = build_report.read_release(out)
    assert [e.key for e in release.images] == ["base/a", "base/b"]
    assert json.loads(out.read_text())["start"] == "2026-01-01T00:01:00.000+00:00"
    job_report(tmp_path / "jobs" / "c.json", "base/c", build_id="9")
    refused = cli("merge-reports", str(tmp_path / "jobs"), "-o", str(tmp_path / "x.json"))
    assert refused.code == 2 and "c.json" in refused.err and "Traceback" not in refused.err
    assert not (tmp_path / "x.json").exists()


def test_promote_joins_the_reports_of_the_jobs(tmp_path: Path) -> None:
    job_report(tmp_path / "jobs" / "a.json", "base/a")
    job_report(tmp_path / "jobs" / "b.json", "base/b")
    result = promote(request(str(tmp_path / "jobs")), RecordingRunner(
        fake_registry(source_store())))
    assert len(result.copied) == 6 and len(result.released) == 6


def lying_registry(store: dict[str, bytes]):  # type: ignore[no-untyped-def]
    """A registry front that answers a tag write as done but keeps the manifest under its
    digest only."""
    honest = fake_registry(store)

    def answer(argv: list[str]) -> tuple[int, bytes, bytes]:
        done = honest(argv)
        if argv[1] == "copy" and argv[-1].startswith("docker://rel.io/"):
            store.pop(argv[-1])
        return done
    return answer


def test_promote_fails_naming_each_tag_the_registry_does_not_serve(tmp_path: Path) -> None:
    from tests.unit.publish.test_publish_units import report

    events: list[Event] = []
    manifest = tmp_path / "release.json"
    with pytest.raises(CheckFailed) as info:
        promote(request(report(tmp_path), manifest=str(manifest)),
                RecordingRunner(lying_registry(source_store())), events.append)
    assert "rel.io/release/base/a:3.0-7 serves nothing, not the " + DIGEST["a"] + " sent" \
        in str(info.value)
    assert "rel.io/release/base/b:latest serves nothing" in str(info.value)
    assert sum(e.kind == "failed" for e in events) == 6
    assert not manifest.exists()  # nothing reported released that was not read back


def test_the_release_manifest_lists_every_reference_with_digest_and_platforms(
        tmp_path: Path) -> None:
    from tests.unit.publish.test_publish_units import report

    manifest = tmp_path / "out" / "release.json"
    result = promote(request(report(tmp_path), manifest=str(manifest)),
                     RecordingRunner(fake_registry(source_store())))
    document = json.loads(manifest.read_text())
    assert document == json.loads(json.dumps(release_manifest(result)))
    assert (document["product"], document["version"], document["build_id"]) == \
        ("aipcc", "3.0", "7")
    assert len(document["images"]) == 6
    first = document["images"][0]
    assert first == {"key": "base/a", "reference": "rel.io/release/base/a:3.0-7",
                     "digest": DIGEST["a"], "pull": f"rel.io/release/base/a@{DIGEST['a']}",
                     "platforms": ["linux/arm64/v8"]}


@pytest.mark.parametrize("build_id", ["dev", "on-pr-0123abc", "pr-12", "mr-7", "dev-me"])
def test_a_dev_or_pull_request_build_is_promoted_only_when_asked(
        tmp_path: Path, build_id: str) -> None:
    path = job_report(tmp_path / "r.json", "base/a", build_id=build_id)
    runner = RecordingRunner(fake_registry({
        "docker://src.io/ns/base/a:3.0-7": MANIFEST["a"]}))
    with pytest.raises(InputError, match=f"build id {build_id} is a development or "
                                         "pull-request build"):
        promote(request(path), runner)
    assert not runner.calls
    done = promote(request(path, allow_unreleased_build_id=True), runner)
    assert done.copied[0].dest == f"rel.io/release/base/a:3.0-{build_id}"


def test_to_takes_host_namespace_with_or_without_docker_transport() -> None:
    assert release_namespace("docker://h.io:5000/ns/") == "h.io:5000/ns"
    assert release_namespace("h.io/ns") == "h.io/ns"
    assert release_namespace("localhost:5000") == "localhost:5000"
    for bad in ("oci:/x", "dir:/x", "https://h.io/ns", "release.tar"):
        with pytest.raises(InputError):
            release_namespace(bad)
    assert destination("h.io:5000/ns") == ("docker", "h.io:5000/ns")
    assert destination("docker://h.io/ns") == ("docker", "h.io/ns")


def test_mirror_config_names_only_what_was_read_back(tmp_path: Path) -> None:
    store: dict[str, bytes] = {}
    images = tuple(Image(f"base/{n}", f"base/{n}", "3.0-7", DIGEST[n],
                         f"docker://src.io/ns/base/{n}@{DIGEST[n]}") for n in "ab")

    def answer(argv: list[str]) -> tuple[int, bytes, bytes]:
        done = fake_registry(store)(argv)
        if argv[1] == "copy" and "base/b:" in argv[-1]:
            store.pop(argv[-1])  # a tag write answered 201, nothing kept under the tag
        return done

    result = mirror(MirrorRequest(images, "m.io/x", "src.io/ns", out=str(tmp_path)),
                    RecordingRunner(answer))
    assert [o.status for o in result.outcomes] == ["copied", "failed"]
    assert "m.io/x/base/b:3.0-7 serves nothing" in result.outcomes[1].message
    idms = (tmp_path / "imagedigestmirrorset.yaml").read_text()
    assert "m.io/x/base/a" in idms and "base/b" not in idms
    # A rerun with nothing new: the quick looks read every tag, no program starts.
    import hashlib

    runner = RecordingRunner(answer)
    again = mirror(MirrorRequest(images[:1], "m.io/x", "src.io/ns", out=str(tmp_path)),
                   runner, probe=lambda ref, tls: "sha256:" + hashlib.sha256(
                       store[ref]).hexdigest() if ref in store else None)
    assert [o.status for o in again.outcomes] == ["skipped"] and not runner.calls


def test_one_json_spelling_and_authfile_wherever_a_registry_is_reached(cli) -> None:
    from tests.support.project import REPO

    demo = str(REPO / "matrix" / "demo.yaml")
    spelled = cli("--matrix", demo, "plan", "--json", "--build-id", "1")
    assert spelled.code == 0, spelled.err
    assert spelled.out == cli("--matrix", demo, "plan", "--format", "json", "--build-id",
                              "1").out
    assert json.loads(cli("--matrix", demo, "compat", "--json").out)
    for command in ("matrix", "validate", "promote", "mirror"):
        options = {o for p in group.commands[command].params for o in p.opts}
        assert {"--authfile", "--tls-verify"} <= options, command
    assert "--json" in {o for p in group.commands["promote"].params for o in p.opts}


def test_a_plain_http_registry_asked_with_tls_is_named_as_one_with_the_option() -> None:
    import http.server

    from aipcc_build.cli import message
    from aipcc_build.imagebuild.preflight import check_registries
    from aipcc_build.tools import registry_http
    from tests.support.http_server import serving

    class V2(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    with serving(V2) as origin:
        host = origin[len("http://"):]
        with pytest.raises(registry_http.PlainHTTP, match="speaks plain HTTP"):
            registry_http.get(host, "/v2/", True, 5)
        with pytest.raises(CheckFailed) as info:
            check_registries([f"{host}/ns/a:1"], True, {})
        assert registry_http.get(host, "/v2/", False, 5).status == 200
    said = message(info.value)
    assert said == (f"the registry {host} speaks plain HTTP, not HTTPS: use it with TLS "
                    "verification off (--tls-verify/--no-tls-verify)")


MATRIX = """\
schema: 1
product: {name: aipcc, version: "3.0", moving_tags: ["latest"]}
registry: src.io/ns
templates: templates
output: out
os:
  el9: {from: localhost/base:1}
accelerators:
  cpu: {}
images:
  base:
    template: base.j2
    repository: "{registry}/base/{name}"
    os: [el9]
"""


def test_promote_by_build_id_pins_the_matrix_images_to_their_digests_now(
        tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "base.j2").write_text("FROM {{ from }}\n")
    (tmp_path / "m.yaml").write_text(MATRIX)
    from aipcc_build.publish.promote import PromoteRequest
    from aipcc_build.tools.retry import Retry

    def by_build(build_id: str) -> PromoteRequest:
        return PromoteRequest(reports=(), build_id=build_id, to="rel.io/r",
                              source_registry=None, matrix_path=str(tmp_path / "m.yaml"),
                              retry=Retry(attempts=1, first=0, cap=0))

    store = {"docker://src.io/ns/base/cpu-el9:3.0-42": MANIFEST["a"]}
    result = promote(by_build("42"), RecordingRunner(fake_registry(store)))
    assert [c.dest for c in result.copied] == ["rel.io/r/base/cpu-el9:3.0-42",
                                               "rel.io/r/base/cpu-el9:latest"]
    assert {c.digest for c in result.copied} == {DIGEST["a"]}
    with pytest.raises(InputError, match="build 43 is not in the registry: "
                                         "src.io/ns/base/cpu-el9:3.0-43 not found"):
        promote(by_build("43"), RecordingRunner(fake_registry(store)))


def test_the_cli_names_the_option_a_dev_build_needs_and_refuses_an_unwritable_manifest(
        tmp_path: Path, cli) -> None:
    dev = job_report(tmp_path / "dev.json", "base/a", build_id="dev")
    done = cli("promote", "--report", dev, "--to", "127.0.0.1:9/r")
    assert done.code == 2, done.err
    assert "build id dev is a development or pull-request build" in done.err
    assert "--allow-unreleased-build-id" in done.err and "Traceback" not in done.err
    release = job_report(tmp_path / "r.json", "base/a")
    (tmp_path / "taken").mkdir()
    refused = cli("promote", "--report", release, "--to", "127.0.0.1:9/r", "--manifest",
                  str(tmp_path / "taken"))
    assert refused.code == 2 and "is a directory" in refused.err, refused.err
    assert "--manifest" in refused.err


def test_authfile_reaches_the_tools_for_the_command_only(tmp_path: Path, cli,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """matrix and validate hand --authfile to buildah, skopeo and the registry check as
    REGISTRY_AUTH_FILE, for the command's run only."""
    import os

    from aipcc_build.validate import matrix_run

    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    seen: list[object] = []

    def record(*args: object, **kwargs: object) -> None:
        seen.append(os.environ.get("REGISTRY_AUTH_FILE"))
        raise InputError("stop here")

    monkeypatch.setattr(matrix_run, "validate_references", record)
    auth = tmp_path / "auth.json"
    auth.write_text("{}")
    done = cli("validate", "--authfile", str(auth), "--expect", "cpu", "h.io/ns/a:1")
    assert done.code == 2 and "stop here" in done.err, done.err
    assert seen == [str(auth)]
    assert "REGISTRY_AUTH_FILE" not in os.environ


def test_an_output_behind_a_dangling_link_makes_no_directory_where_it_points(
        tmp_path: Path, cli) -> None:
    """merge-reports -o LINK, LINK pointing into a directory that does not exist: the
    writer made that directory (anywhere the link pointed) and wrote there; promote
    --manifest LINK passed its check before the copies the same way. Now one line, exit 2,
    nothing made; a link into an existing directory still has its target written."""
    job_report(tmp_path / "jobs" / "a.json", "base/a")
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "missing" / "dir" / "report.json")
    done = cli("merge-reports", str(tmp_path / "jobs"), "-o", str(link))
    assert done.code == 2 and "Traceback" not in done.err, done.err
    assert str(link) in done.err and len(done.err.strip().splitlines()) == 1, done.err
    assert not (tmp_path / "missing").exists()
    with pytest.raises(InputError, match="whose directory is missing"):
        build_report.check_writable(link, field="manifest")
    (tmp_path / "missing" / "dir").mkdir(parents=True)
    build_report.check_writable(link, field="manifest")
    assert cli("merge-reports", str(tmp_path / "jobs"), "-o", str(link)).code == 0
    assert link.is_symlink() and build_report.read_release(link).images
