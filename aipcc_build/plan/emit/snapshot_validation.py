"""The Snapshot validation that Konflux's IntegrationTestScenario runs in the CI image.

`plan --format konflux` embeds this file's source as the script of the scenario's one step,
so it must run on its own: the standard library, skopeo and aipcc-build on PATH, and the
Python versions CI images have (3.9 and later). It is a module, not a string, so that lint,
types and the unit tests reach it like any other code.

Attestations and signatures in an index have the platform unknown/unknown: they are no image
to validate.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, Callable

# skopeo reads an index in seconds; a validation reads every layer of one platform.
INSPECT_TIMEOUT = 600
VALIDATE_TIMEOUT = 3600
# Tekton replaces this variable in the step's script with the result file's path.
RESULT_PATH = "$(results.TEST_OUTPUT.path)"

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


def validate_snapshot(snapshot: dict[str, Any], tls_verify: str,
                      run: Run = subprocess.run) -> tuple[list[str], list[str]]:
    """Validate every platform of every component: (passed, failed) labels."""
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
            argv = ["aipcc-build", "validate",
                    "--tls-verify" if tls_verify == "true" else "--no-tls-verify",
                    *(["--platform", platform] if platform else []), "docker://" + image]
            try:
                code = run(argv, timeout=VALIDATE_TIMEOUT).returncode
            except subprocess.TimeoutExpired:
                code = 124
            (passed if code == 0 else failed).append(label)
            if code:
                print(f"FAILED {label} (exit {code})", flush=True)
    return passed, failed


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


def main(result_path: str) -> int:
    snapshot = json.loads(os.environ["SNAPSHOT"])
    passed, failed = validate_snapshot(snapshot, os.environ.get("TLSVERIFY", "true"))
    output = konflux_test_output(passed, failed, datetime.datetime.now(datetime.timezone.utc))
    with open(result_path, "w") as result:
        json.dump(output, result)
    print(output["note"])
    return 0 if output["result"] == "SUCCESS" else 1


if __name__ == "__main__":
    sys.exit(main(RESULT_PATH))
