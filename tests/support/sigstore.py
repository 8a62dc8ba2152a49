"""A skopeo that verifies sigstore signatures (Debian 13's, in the image
scripts/sigstore-skopeo builds), run in a working container with chroot isolation: it
shares the host's network, so it reaches a test registry on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def sigstore_skopeo_image() -> str:
    done = subprocess.run([str(REPO / "scripts" / "sigstore-skopeo")], capture_output=True,
                          text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/sigstore-skopeo failed: {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


class VerifyingSkopeo:
    """skopeo 1.18 in a working container of IMAGE; WORK (a host directory) is /w in it."""

    def __init__(self, image: str, work: Path) -> None:
        self.work = work
        self.container = subprocess.run(["buildah", "from", "--quiet", image], check=True,
                                         capture_output=True, text=True).stdout.strip()

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = ["buildah", "run", "--isolation", "chroot", "-v", f"{self.work}:/w",
                   self.container, "skopeo", *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0 and not _said_anything(done.stderr):
            # On a loaded machine buildah's chroot run once ended with status 1 and no
            # word from skopeo (which always says why it fails): run it again.
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        return done

    def policy(self, host: str, key: str = "/w/key.pub") -> None:
        """A policy that lets through only images of HOST signed by KEY (a path in the
        container), and a registries.d that reads sigstore attachments there."""
        (self.work / "policy.json").write_text(json.dumps({
            "default": [{"type": "reject"}],
            "transports": {"docker": {host: [{
                "type": "sigstoreSigned", "keyPath": key,
                "signedIdentity": {"type": "matchRepoDigestOrExact"}}]}}}))
        (self.work / "registries.d").mkdir(exist_ok=True)
        (self.work / "registries.d" / "test.yaml").write_text(
            f"docker:\n  {host}:\n    use-sigstore-attachments: true\n")

    def pull(self, ref: str, *extra: str) -> subprocess.CompletedProcess[str]:
        """`skopeo copy` of REF to a dir: under the policy (the dir is removed first)."""
        subprocess.run(["rm", "-rf", str(self.work / "out")], check=True)
        return self.run("--policy", "/w/policy.json", "--registries.d", "/w/registries.d",
                        "copy", "--src-tls-verify=false", *extra, f"docker://{ref}",
                        "dir:/w/out")

    def remove(self) -> None:
        subprocess.run(["buildah", "rm", self.container], capture_output=True)


def _said_anything(stderr: str) -> bool:
    """Whether STDERR holds more than buildah's own report of the exit status."""
    return any(line.strip() and not line.startswith(("subprocess exited with status",
                                                     "Error: exit status"))
               for line in stderr.splitlines())
