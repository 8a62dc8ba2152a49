"""Issue 16 figures: how long `aipcc-build matrix --push` takes to end against a registry
that accepts connections and never answers (it used to hang forever).

Run: python bench/hostile.py [PUSH_TIMEOUT] [RETRIES]   (defaults 5 and 1)
Expected: about PUSH_TIMEOUT * (RETRIES + 1) + the build, and exit 1 (push-failed).
The validator figures of item 12 (symlink-chain layers) are not here: item 12 is not done.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import as_installed, remove_images, write_matrix

BASE = "localhost/aipcc-demo/busybox:latest"


def silent_registry() -> tuple[socket.socket, list[socket.socket]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return server, held


def main() -> None:
    timeout = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    retries = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    server, held = silent_registry()
    port = server.getsockname()[1]
    namespace = f"127.0.0.1:{port}/hostile"
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        write_matrix(root, (
            "schema: 1\nproduct: {name: h, version: '1'}\nregistry: " + namespace + "\n"
            f"os:\n  bb: {{from: {BASE}}}\n"
            "accelerators:\n  cuda:\n    versions:\n      - {version: 12.8.1}\n"
            "images:\n  base: {template: base.j2, os: [bb]}\n"),
            {"base.j2": "FROM {{ os_from }}\nLABEL hostile=1\n"})
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "aipcc_build", "--matrix", "matrix/bench.yaml", "matrix",
             "--push", "--tls-verify", "false", "--push-timeout", str(timeout),
             "--retries", str(retries)],
            cwd=root, env={**as_installed(), "CI": "1"}, capture_output=True, text=True,
            timeout=timeout * (retries + 1) + 600)
        elapsed = time.monotonic() - start
        report = json.loads((root / "build-report.json").read_text())
    server.close()
    for connection in held:
        connection.close()
    remove_images(namespace)
    (image,) = report["images"]
    print(f"matrix --push to a silent registry: ended after {elapsed:.1f} s "
          f"(push_timeout {timeout:g} s x {retries + 1} attempts), exit {done.returncode}, "
          f"status {image['status']}")


if __name__ == "__main__":
    main()
