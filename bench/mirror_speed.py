"""Benchmark `aipcc-build mirror`: 12 images from one registry into an empty one,
against `skopeo sync` of the same images into another empty one (ratio, target <= 1.2), and
a rerun with nothing to copy against the first run (ratio, target <= 0.1; best of three,
and how much of it is the CLI starting: `aipcc-build --version`).

Each image is busybox plus a layer of PAYLOAD_MB incompressible bytes of its own: a release's
images weigh hundreds of MB, and on images of a few KB the first run is so short that the
interpreter starting would be most of any rerun (`--payload-mb 0` shows that case).

Usage: python bench/mirror_speed.py [--payload-mb N]   (needs buildah, skopeo, docker-registry)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO, as_installed, payload_image  # noqa: E402
from tests.support.registry import Registry  # noqa: E402

COUNT = 12
PAYLOAD_MB = 16
BASE = "localhost/aipcc-demo/busybox:latest"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payload-mb", type=int, default=PAYLOAD_MB,
                        help="incompressible MB in each image's own layer")
    payload_mb = parser.parse_args().payload_mb
    subprocess.run([str(REPO / "scripts" / "base-image"), BASE], check=True,
                   capture_output=True)
    env = as_installed()
    tag = uuid.uuid4().hex[:8]
    names: list[str] = []
    registries: list[Registry] = []
    with tempfile.TemporaryDirectory(prefix="aipcc-bench-mirror-") as tmp:
        root = Path(tmp)
        try:
            for name in ("src", "mirror", "sync"):
                (root / name).mkdir()
                registries.append(Registry(root / name))
                registries[-1].start()
            src, dst_mirror, dst_sync = (registry.host for registry in registries)
            entries, repos = [], {}
            for index in range(COUNT):
                local = f"localhost/aipcc-test-release/bench{index}-{tag}"
                payload_image(local, BASE, f"{tag}-{index}", payload_mb)
                names.append(local)
                reference = f"{src}/aipcc/base-images/img{index}:3.0-1"
                digest = subprocess.run(
                    ["buildah", "push", "--tls-verify=false", "--quiet", "--digestfile",
                     "/dev/stdout", local, f"docker://{reference}"],
                    check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
                entries.append({"key": f"base/img{index}", "reference": reference,
                                "status": "ok", "digest": digest})
                repos[f"aipcc/base-images/img{index}"] = ["3.0-1"]
            report = root / "report.json"
            report.write_text(json.dumps({"schema": 1, "build_id": "1", "images": entries}))
            (root / "sync.yaml").write_text(json.dumps(
                {src: {"tls-verify": False, "images": repos}}))
            mirror = [sys.executable, "-m", "aipcc_build", "mirror", "--no-tls-verify",
                      "--registry", f"{src}/aipcc", "--report", str(report), "--out",
                      str(root / "conf"), "--to", f"docker://{dst_mirror}/rel"]
            sync = ["skopeo", "sync", "--all", "--preserve-digests", "--src", "yaml",
                    "--dest", "docker", "--dest-tls-verify=false", str(root / "sync.yaml"),
                    f"{dst_sync}/rel"]
            first = timed(mirror, env)
            synced = timed(sync, env)
            rerun = min(timed(mirror, env) for _ in range(3))
            startup = min(timed([sys.executable, "-m", "aipcc_build", "--version"], env)
                          for _ in range(3))
        finally:
            for registry in registries:
                registry.stop()
            if names:
                subprocess.run(["buildah", "rmi", "-f", *names], capture_output=True)
    print(f"mirror of {COUNT} images (busybox + {payload_mb} MB each) into an empty registry: "
          f"{first:.2f} s; "
          f"skopeo sync: {synced:.2f} s; ratio {first / synced:.2f} (target <= 1.2)")
    print(f"no-change rerun: {rerun:.2f} s; ratio to the first run {rerun / first:.2f} "
          "(target <= 0.1)")
    # On small images most of a rerun is the interpreter and the CLI starting.
    print(f"of which aipcc-build --version: {startup:.2f} s; the rest, {rerun - startup:.2f} s, "
          f"is {(rerun - startup) / first:.2f} of the first run")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")
    raise SystemExit(main())
