"""Benchmark `aipcc-build mirror`: 12 small images from one registry into an empty one,
against `skopeo sync` of the same images into another empty one (ratio, target <= 1.2), and
a rerun with nothing to copy against the first run (ratio, target <= 0.1; best of three,
and how much of it is the CLI starting: `aipcc-build --version`).

Usage: python bench/mirror_speed.py   (needs buildah, skopeo, docker-registry)
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from common import REPO, as_installed

COUNT = 12
BASE = "localhost/aipcc-demo/busybox:latest"


def start_registry(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{sock.getsockname()[1]}"
    root.mkdir(parents=True)
    (root / "config.yml").write_text(
        f"version: 0.1\nlog: {{level: error}}\nstorage: {{filesystem: {{rootdirectory: "
        f"{root / 'data'}}}}}\nhttp: {{addr: '{host}'}}\n")
    proc = subprocess.Popen([shutil.which("docker-registry") or "registry", "serve",
                             str(root / "config.yml")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://{host}/v2/", timeout=1).close()
            return proc, host
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("docker-registry did not start")


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    subprocess.run([str(REPO / "scripts" / "base-image"), BASE], check=True,
                   capture_output=True)
    env = as_installed()
    tag = uuid.uuid4().hex[:8]
    names: list[str] = []
    procs = []
    with tempfile.TemporaryDirectory(prefix="aipcc-bench-mirror-") as tmp:
        root = Path(tmp)
        try:
            hosts = []
            for name in ("src", "mirror", "sync"):
                proc, host = start_registry(root / name)
                procs.append(proc)
                hosts.append(host)
            src, dst_mirror, dst_sync = hosts
            entries, repos = [], {}
            for index in range(COUNT):
                local = f"localhost/aipcc-test-release/bench{index}-{tag}"
                subprocess.run(["buildah", "build", "-q", "-t", local, "-f", "-", "."],
                               input=f"FROM {BASE}\nRUN echo {tag}-{index} > /stamp\n",
                               text=True, check=True, capture_output=True)
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
            for proc in procs:
                proc.terminate()
                proc.wait()
            if names:
                subprocess.run(["buildah", "rmi", "-f", *names], capture_output=True)
    print(f"mirror of {COUNT} images into an empty registry: {first:.2f} s; "
          f"skopeo sync: {synced:.2f} s; ratio {first / synced:.2f} (target <= 1.2)")
    print(f"no-change rerun: {rerun:.2f} s; ratio to the first run {rerun / first:.2f} "
          "(target <= 0.1)")
    # On images this small most of a rerun is the interpreter and the CLI starting.
    print(f"of which aipcc-build --version: {startup:.2f} s; the rest, {rerun - startup:.2f} s, "
          f"is {(rerun - startup) / first:.2f} of the first run")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")
    raise SystemExit(main())
