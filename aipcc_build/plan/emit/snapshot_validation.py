"""The Snapshot validation that Konflux's IntegrationTestScenario runs in the CI image.

`plan --format konflux` embeds this file's source as the script of the scenario's one step,
so it must run on its own: the standard library, skopeo and aipcc-build on PATH, and the
Python versions CI images have (3.9 and later). It is a module, not a string, so that lint,
types and the unit tests reach it like any other code.

Attestations and signatures in an index have the platform unknown/unknown: they are no image
to validate.

The verdicts go into TEST_OUTPUT as an in-toto Statement (`attestation`: each platform's
manifest digest a subject, the verdict predicate type `promote` signs): Tekton Chains signs
the scenario's results with the rest of its provenance, so the verdict is attested by
Konflux's own key; `promote --sign-by-sigstore-private-key` attaches the release key's
signed verdict to each released digest later.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, Callable, Optional

# skopeo reads an index in seconds; a validation reads every layer of one platform.
INSPECT_TIMEOUT = 600
VALIDATE_TIMEOUT = 3600
# Tekton replaces this variable in the step's script with the result file's path.
RESULT_PATH = "$(results.TEST_OUTPUT.path)"
# The verdict's predicate type: publish/attestations.VERDICT_PREDICATE (this program runs
# on its own and imports nothing of aipcc-build).
VERDICT_PREDICATE = "https://aipcc.ai/attestations/toolkit-verdict/v1"
# Tekton's default limit on a step's results is 4096 bytes: TEST_OUTPUT stays below it.
MAX_RESULT = 3500

Run = Callable[..., "subprocess.CompletedProcess[str]"]


def platforms(image: str, tls_verify: str, run: Run = subprocess.run) -> list[str]:
    """The platforms IMAGE's index lists (`linux/arm64`, ...), or [""] for a single manifest."""
    raw = run(["skopeo", "inspect", "--raw", "--tls-verify=" + tls_verify, "docker://" + image],
              capture_output=True, text=True, timeout=INSPECT_TIMEOUT)
    if raw.returncode != 0:
        raise RuntimeError(raw.stderr.strip())
    listed = json.loads(raw.stdout).get("manifests")
    if not listed:
        return [""]
    found = set()
    for entry in listed:
        platform = entry.get("platform") or {}
        if platform.get("os", "unknown") != "unknown":
            parts = (platform["os"], platform.get("architecture"), platform.get("variant"))
            found.add("/".join(part for part in parts if part))
    return sorted(found)


def validate_snapshot(snapshot: dict[str, Any], tls_verify: str, run: Run = subprocess.run,
                      verdicts: Optional[list[dict[str, Any]]] = None
                      ) -> tuple[list[str], list[str]]:
    """Validate every platform of every component: (passed, failed) labels. VERDICTS, when
    given, gets each platform's verdict record (component, platform, digest, verdict)
    from `validate --json`."""
    passed: list[str] = []
    failed: list[str] = []
    for component in snapshot.get("components", []):
        name, image = component["name"], component["containerImage"]
        try:
            wanted = platforms(image, tls_verify, run)
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as error:
            print(f"{name}: {image} cannot be read: {error}", flush=True)
            failed.append(name)
            continue
        for platform in wanted:
            label = f"{name} {platform}".strip()
            print(f"== {label}: {image}", flush=True)
            argv = ["aipcc-build", "validate", "--json",
                    "--tls-verify" if tls_verify == "true" else "--no-tls-verify",
                    *(["--platform", platform] if platform else []), "docker://" + image]
            try:
                done = run(argv, timeout=VALIDATE_TIMEOUT, stdout=subprocess.PIPE, text=True)
                code = done.returncode
                print(done.stdout or "", end="", flush=True)  # the log keeps the report
                if verdicts is not None:
                    verdicts += _records(name, done.stdout or "")
            except subprocess.TimeoutExpired:
                code = 124
            (passed if code == 0 else failed).append(label)
            if code:
                print(f"FAILED {label} (exit {code})", flush=True)
    return passed, failed


def _records(component: str, report: str) -> list[dict[str, Any]]:
    """The verdict of each platform `validate --json` printed (none when it printed no
    report)."""
    try:
        images = json.loads(report).get("images") or []
    except (ValueError, AttributeError):
        return []
    return [{"component": component, "platform": image.get("platform"),
             "digest": image.get("digest"), "verdict": image.get("verdict")}
            for image in images if isinstance(image, dict)]


def verdict_statement(verdicts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The verdicts as an in-toto Statement v1: each platform's manifest digest a subject."""
    return {"_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": f"{v['component']} {v['platform']}",
                         "digest": {"sha256": str(v["digest"]).partition(":")[2]}}
                        for v in verdicts if v.get("digest")],
            "predicateType": VERDICT_PREDICATE,
            "predicate": {"verdicts": list(verdicts)}}


def konflux_test_output(passed: Sequence[str], failed: Sequence[str],
                        now: datetime.datetime) -> dict[str, Any]:
    """Konflux's TEST_OUTPUT result: what integration-service shows for the scenario. A
    Snapshot in which nothing was validated fails: a gate that checked nothing has not
    passed."""
    if not passed and not failed:
        return {"result": "FAILURE", "timestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "successes": 0, "failures": 0, "warnings": 0,
                "note": "the Snapshot names no image to validate"}
    return {"result": "FAILURE" if failed else "SUCCESS",
            "timestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "successes": len(passed), "failures": len(failed), "warnings": 0,
            "note": "failed: " + ", ".join(failed) if failed else "every image validated"}


def main(result_path: str, run: Run = subprocess.run) -> int:
    snapshot = json.loads(os.environ["SNAPSHOT"])
    verdicts: list[dict[str, Any]] = []
    passed, failed = validate_snapshot(snapshot, os.environ.get("TLSVERIFY", "true"), run,
                                       verdicts=verdicts)
    output = konflux_test_output(passed, failed, datetime.datetime.now(datetime.timezone.utc))
    if verdicts:
        statement = verdict_statement(verdicts)
        print("verdicts as an in-toto Statement: " + json.dumps(statement), flush=True)
        if len(json.dumps({**output, "attestation": statement})) <= MAX_RESULT:
            output["attestation"] = statement
        else:
            output["attestation_omitted"] = (f"{len(verdicts)} verdicts: larger than a "
                                             "Tekton result holds; the log has them")
    with open(result_path, "w") as result:
        json.dump(output, result)
    print(output["note"])
    return 0 if output["result"] == "SUCCESS" else 1


if __name__ == "__main__":
    sys.exit(main(RESULT_PATH))
