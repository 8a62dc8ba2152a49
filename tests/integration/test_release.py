"""Issue 38 against real docker-registry servers and real skopeo: a build fanned out as the
CI recipes fan it (one report per image) promoted and mirrored in one command each, the
release manifest read back from the registry, a registry front that answers 201 to a tag
write and keeps nothing under the tag, and a plain-HTTP registry asked with TLS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.publish import FlakyProxy, digest_at, push, run_cli

pytestmark = pytest.mark.integration


def fan_out(release: dict[str, Any], root: Path) -> Path:
    """One build report per image, each in its job's directory, as CI artifacts land."""
    data = json.loads(release["report"].read_text())
    for entry in data["images"]:
        job = root / f"{entry['kind']}-{entry['name']}"
        job.mkdir(parents=True)
        (job / "build-report.json").write_text(json.dumps(dict(data, images=[entry])))
    return root


def test_a_fanned_out_build_is_promoted_and_mirrored_in_one_command_each(
        release: dict[str, Any], registries: dict[str, Any], authfile: Path,
        tmp_path: Path) -> None:
    reports = fan_out(release, tmp_path / "reports")
    dst = registries["dst"].host
    manifest = tmp_path / "release.json"
    done = run_cli("--matrix", str(release["matrix"]), "promote", "--report", str(reports),
                   "--to", f"docker://{dst}/release", "--tls-verify=false", "--authfile",
                   str(authfile), "--json", "--manifest", str(manifest))
    assert done.returncode == 0, done.stderr
    assert "deprecated" not in done.stderr
    assert "9 tag(s), 9 copied, 0 already there, every tag read back" in done.stderr
    document = json.loads(done.stdout)
    assert document == json.loads(manifest.read_text())
    assert (document["version"], document["build_id"]) == ("3.0", "42")
    assert len(document["images"]) == 9  # 3 images x (3.0-42, 3.0, latest)
    for image in document["images"]:
        assert digest_at(image["reference"], authfile) == image["digest"]
        assert image["platforms"] and all(p.startswith("linux/") for p in image["platforms"])

    # mirror: the same reports, --to as HOST/NS (skopeo's docker:// spelling optional).
    out = tmp_path / "conf"
    mirrored = run_cli("--matrix", str(release["matrix"]), "mirror", "--report",
                       str(reports), "--to", f"{dst}/mirror", "--tls-verify=false",
                       "--authfile", str(authfile), "--out", str(out), "--json")
    assert mirrored.returncode == 0, mirrored.stderr
    outcome = json.loads(mirrored.stdout)
    assert outcome["ok"] and {i["status"] for i in outcome["images"]} == {"copied"}
    assert str(out / "imagedigestmirrorset.yaml") in outcome["written"]
    for entry in release["entries"]:
        assert digest_at(f"{dst}/mirror/base-images/{entry['name']}:3.0-42",
                         authfile) == entry["digest"]
    assert "base-images/img2" in (out / "imagedigestmirrorset.yaml").read_text()

    # Without reports: the matrix's images of build 42, at the digests their tags hold.
    pushed = push(release["names"][0], f"{release['ns']}/base-images/cpu-el9:3.0-42")
    by_build = run_cli("--matrix", str(release["matrix"]), "promote", "--build-id", "42",
                       "--to", f"{dst}/bybuild", "--tls-verify=false", "--authfile",
                       str(authfile), "--json")
    assert by_build.returncode == 0, by_build.stderr
    assert {(i["reference"], i["digest"]) for i in json.loads(by_build.stdout)["images"]} \
        == {(f"{dst}/bybuild/base-images/cpu-el9:{tag}", pushed)
            for tag in ("3.0-42", "3.0", "latest")}

    # A report of another build among them: refused, both files named, nothing copied.
    other = json.loads((reports / "base-img0" / "build-report.json").read_text())
    (reports / "late").mkdir()
    (reports / "late" / "build-report.json").write_text(json.dumps(dict(other,
                                                                        build_id="43")))
    refused = run_cli("--matrix", str(release["matrix"]), "promote", "--report",
                      str(reports), "--to", f"{dst}/other", "--tls-verify=false",
                      "--authfile", str(authfile))
    assert refused.returncode == 2, refused.stderr
    assert "late/build-report.json" in refused.stderr and "base-img0" in refused.stderr
    assert digest_at(f"{dst}/other/base-images/img0:3.0-42", authfile) is None


def test_a_registry_that_keeps_no_tag_fails_promote_and_mirror_naming_the_tag(
        release: dict[str, Any], registries: dict[str, Any], tmp_path: Path) -> None:
    with FlakyProxy(registries["src"].host, failures=0, digest_only=True) as front:
        promoted = run_cli("--matrix", str(release["matrix"]), "promote", "--report",
                           str(release["report"]), "--to", f"{front.host}/release",
                           "--no-tls-verify", "--json")
        assert promoted.returncode == 1, promoted.stderr
        assert f"{front.host}/release/base-images/img0:3.0-42 serves nothing" in \
            promoted.stderr
        assert "copied" not in promoted.stdout  # no release manifest for an unread release
        out = tmp_path / "conf"
        mirrored = run_cli("--matrix", str(release["matrix"]), "mirror", "--report",
                           str(release["report"]), "--to", f"docker://{front.host}/m",
                           "--no-tls-verify", "--out", str(out), "--retries", "1")
        assert mirrored.returncode == 1, mirrored.stderr
        assert f"{front.host}/m/base-images/img1:3.0-42 serves nothing" in mirrored.stderr
        assert not (out / "imagedigestmirrorset.yaml").exists()
        assert not (out / "registries.conf").exists()


def test_a_plain_http_registry_without_the_option_says_so_and_names_it(
        registries: dict[str, Any], tmp_path: Path) -> None:
    host = registries["src"].host
    report = tmp_path / "r.json"
    report.write_text(json.dumps({
        "schema": 1, "build_id": "42", "registry": f"{host}/aipcc",
        "product": {"name": "aipcc", "version": "3.0", "moving_tags": []},
        "images": [{"key": "base/a", "status": "ok", "digest": "sha256:" + "ab" * 32,
                    "reference": f"{host}/aipcc/base/a:3.0-42"}]}))
    for command in (["promote", "--to", f"{host}/release"],
                    ["mirror", "--to", f"{host}/mirror", "--out", str(tmp_path)]):
        done = run_cli(*command, "--report", str(report))
        assert done.returncode == 1, done.stderr
        assert f"the registry {host} speaks plain HTTP, not HTTPS" in done.stderr
        assert "--tls-verify/--no-tls-verify" in done.stderr
        assert "WRONG_VERSION_NUMBER" not in done.stderr and "within" not in done.stderr


def test_validate_reads_a_registry_that_asks_for_a_login_with_authfile(
        registries: dict[str, Any], authfile: Path, base_image: str) -> None:
    import subprocess

    remote = f"{registries['dst'].host}/auth/busybox:1"
    subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", "--dest-authfile",
                    str(authfile), f"containers-storage:{base_image}", f"docker://{remote}"],
                   check=True, timeout=300, capture_output=True)
    given = run_cli("validate", "--tls-verify=false", "--authfile", str(authfile),
                    "--expect", "cpu", remote)
    assert given.returncode == 0, given.stderr
    assert "deprecated" not in given.stderr
    without = run_cli("validate", "--tls-verify=false", "--expect", "cpu", remote)
    assert without.returncode == 2
    assert "wants credentials it was not given" in without.stderr, without.stderr
