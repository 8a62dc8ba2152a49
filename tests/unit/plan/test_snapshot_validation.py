"""The Snapshot validation program that the Konflux scenario runs, tested as a module: the
platforms it reads from an index, what it runs for each, and the TEST_OUTPUT it reports."""

from __future__ import annotations

import datetime
import json
import subprocess
from typing import Any

from aipcc_build.plan.emit import snapshot_validation

INDEX = {"manifests": [
    {"platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
    {"platform": {"os": "linux", "architecture": "amd64"}},
    {"platform": {"os": "unknown", "architecture": "unknown"}},  # an attestation
]}


class Skopeo:
    """Answers `skopeo inspect --raw` from a table and `aipcc-build validate` with an exit
    code per platform; records every call."""

    def __init__(self, raw: dict[str, Any], codes: dict[str, int]) -> None:
        self.raw, self.codes, self.calls = raw, codes, []

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        if argv[0] == "skopeo":
            image = argv[-1].removeprefix("docker://")
            if image not in self.raw:
                return subprocess.CompletedProcess(argv, 1, "", "manifest unknown")
            return subprocess.CompletedProcess(argv, 0, json.dumps(self.raw[image]), "")
        platform = argv[argv.index("--platform") + 1] if "--platform" in argv else ""
        return subprocess.CompletedProcess(argv, self.codes.get(platform, 0), "", "")


def test_every_platform_but_attestations_is_validated() -> None:
    run = Skopeo({"r/a@sha256:1": INDEX}, {"linux/arm64/v8": 1})
    passed, failed = snapshot_validation.validate_snapshot(
        {"components": [{"name": "a", "containerImage": "r/a@sha256:1"}]}, "false", run)
    assert passed == ["a linux/amd64"]
    assert failed == ["a linux/arm64/v8"]
    validated = [call for call in run.calls if call[0] == "aipcc-build"]
    assert all("--no-tls-verify" in call for call in validated)
    assert len(validated) == 2


def test_an_unreadable_image_fails_its_component() -> None:
    run = Skopeo({}, {})
    passed, failed = snapshot_validation.validate_snapshot(
        {"components": [{"name": "gone", "containerImage": "r/gone@sha256:2"}]}, "true", run)
    assert (passed, failed) == ([], ["gone"])


def test_a_single_manifest_is_validated_without_a_platform() -> None:
    run = Skopeo({"r/b:1": {"schemaVersion": 2, "layers": []}}, {})
    passed, _ = snapshot_validation.validate_snapshot(
        {"components": [{"name": "b", "containerImage": "r/b:1"}]}, "true", run)
    assert passed == ["b"]
    assert "--platform" not in run.calls[-1]


def test_output_is_what_integration_service_reads() -> None:
    now = datetime.datetime(2026, 11, 28, 1, 2, 3, tzinfo=datetime.timezone.utc)
    assert snapshot_validation.konflux_test_output(["a"], [], now) == {
        "result": "SUCCESS", "timestamp": "2026-11-28T01:02:03Z", "successes": 1,
        "failures": 0, "warnings": 0, "note": "every image validated"}
    failed = snapshot_validation.konflux_test_output([], ["x", "y"], now)
    assert (failed["result"], failed["note"]) == ("FAILURE", "failed: x, y")


def test_a_snapshot_with_nothing_to_validate_fails(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SNAPSHOT", json.dumps({"components": []}))
    result = tmp_path / "TEST_OUTPUT"
    assert snapshot_validation.main(str(result)) == 1
    written = json.loads(result.read_text())
    assert (written["result"], written["note"]) == (
        "FAILURE", "the Snapshot names no image to validate")


def test_the_verdicts_go_into_test_output_as_a_statement(tmp_path, monkeypatch) -> None:
    """Each platform's verdict from `validate --json`, with its manifest digest as the
    subject; a Snapshot too large for a Tekton result keeps them in the log only."""
    from aipcc_build.publish.attestations import VERDICT_PREDICATE

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        if argv[0] == "skopeo":
            return subprocess.CompletedProcess(argv, 0, json.dumps({"layers": []}), "")
        report = {"images": [{"platform": "linux/amd64", "digest": "sha256:" + "a" * 64,
                              "verdict": "ok"}]}
        return subprocess.CompletedProcess(argv, 0, json.dumps(report), "")

    for count, kept in ((2, True), (40, False)):
        components = [{"name": f"c{n}", "containerImage": f"r/c{n}:1"} for n in range(count)]
        monkeypatch.setenv("SNAPSHOT", json.dumps({"components": components}))
        result = tmp_path / f"TEST_OUTPUT-{count}"
        assert snapshot_validation.main(str(result), run) == 0
        written = json.loads(result.read_text())
        assert len(result.read_text()) <= 4096
        if kept:
            statement = written["attestation"]
            assert statement["predicateType"] == VERDICT_PREDICATE
            assert statement["subject"][0]["digest"] == {"sha256": "a" * 64}
            assert statement["predicate"]["verdicts"][1]["component"] == "c1"
        else:
            assert "attestation" not in written and "40 verdicts" in \
                written["attestation_omitted"]
