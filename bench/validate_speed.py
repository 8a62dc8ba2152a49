"""Issue 4 targets for `aipcc-build validate` on a large image of real files:

- cold validate wall time / `gzip -dc LAYER | tar -t > /dev/null` of each layer, one after
  another: at most 0.3;
- warm-cache validate / cold validate: at most 0.05;
- peak memory (RSS of the validator and its workers together): under 300 MB.

The image (an OCI layout with >= 1 GiB of this machine's libraries, binaries and data in
gzip layers) is built once and kept under ~/.cache/aipcc-build/bench.

Run: python bench/validate_speed.py [--layout DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import as_installed

REPO = Path(__file__).resolve().parent.parent
# Real files: shared libraries, executables, data and a Python installation.
LAYER_SOURCES = (
    ("usr/lib/x86_64-linux-gnu",),
    ("usr/share",),
    ("usr/bin", "usr/sbin", "usr/libexec", "usr/lib/python3", "usr/lib/python3.11",
     "usr/lib/gcc", "usr/include"),
)
MIN_UNCOMPRESSED = 1 << 30


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def make_layer(sources: tuple[str, ...], work: Path, number: int) -> tuple[str, str, int, Path]:
    """(digest, diffID, uncompressed size, gzip blob) of a tar of SOURCES under /."""
    present = [s for s in sources if (Path("/") / s).exists()]
    plain = work / f"layer{number}.tar"
    subprocess.run(["tar", "-C", "/", "--warning=no-file-changed", "--ignore-failed-read",
                    "-cf", str(plain), *present], check=False)
    blob = work / f"layer{number}.tar.gz"
    with open(blob, "wb") as out:
        subprocess.run(["gzip", "-6", "-c", str(plain)], stdout=out, check=True)
    diff_id, size = sha256_file(plain), plain.stat().st_size
    plain.unlink()
    return sha256_file(blob), diff_id, size, blob


def build_layout(layout: Path, sources: tuple[tuple[str, ...], ...] = LAYER_SOURCES) -> None:
    """An OCI layout of one image, tagged `bench`: one gzip layer per entry of SOURCES."""
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=layout) as tmp, ThreadPoolExecutor(2) as pool:
        layers = list(pool.map(lambda item: make_layer(item[1], Path(tmp), item[0]),
                               enumerate(sources)))
        for digest, _, _, blob in layers:
            os.replace(blob, blobs / digest.split(":")[1])

    def put(payload: dict) -> tuple[str, int]:
        data = json.dumps(payload).encode()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        (blobs / digest.split(":")[1]).write_bytes(data)
        return digest, len(data)

    config = {"architecture": "amd64", "os": "linux",
              "config": {"Env": ["PATH=/usr/bin"],
                         "Labels": {"ai.aipcc.accelerator": "cpu"}},
              "rootfs": {"type": "layers", "diff_ids": [d for _, d, _, _ in layers]}}
    config_digest, config_size = put(config)
    manifest = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": digest, "size": (blobs / digest.split(":")[1]).stat().st_size,
                    "annotations": {"uncompressed-size": str(size)}}
                   for digest, _, size, _ in layers],
    }
    manifest_digest, manifest_size = put(manifest)
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
         "size": manifest_size, "annotations": {"org.opencontainers.image.ref.name": "bench"}}]}))


def layer_blobs(layout: Path) -> list[tuple[Path, dict]]:
    """The layer blobs of the first image of the OCI layout LAYOUT, with their descriptors."""
    index = json.loads((layout / "index.json").read_text())
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / index["manifests"][0]["digest"].split(":")[1]).read_text())
    return [(blobs / layer["digest"].split(":")[1], layer) for layer in manifest["layers"]]


def layers_of(layout: Path) -> list[tuple[Path, int]]:
    """The layer blobs of a layout build_layout made, with their uncompressed sizes."""
    return [(path, int(layer["annotations"]["uncompressed-size"]))
            for path, layer in layer_blobs(layout)]


def tree_rss(pid: int) -> int:
    """Resident bytes of PID and all its descendants."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/statm") as statm:
                total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{current}/task/{current}/children") as children:
                pending.extend(int(c) for c in children.read().split())
        except (OSError, ValueError):
            continue
    return total


def wall(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def timed(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS of the whole process tree (sampled every 5 ms)."""
    peak = 0
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    # ru_maxrss (KiB) covers the biggest single process, in case sampling missed a peak.
    return elapsed, max(peak, usage.ru_maxrss * 1024)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", type=Path,
                        default=Path.home() / ".cache" / "aipcc-build" / "bench" / "validate-oci")
    args = parser.parse_args()
    if not (args.layout / "index.json").exists():
        print(f"building the benchmark image in {args.layout} (once)...", file=sys.stderr)
        build_layout(args.layout)
    layers = layers_of(args.layout)
    uncompressed = sum(size for _, size in layers)
    compressed = sum(path.stat().st_size for path, _ in layers)
    files = 0
    print(f"image: {len(layers)} gzip layers, {uncompressed / 2**30:.2f} GiB uncompressed, "
          f"{compressed / 2**20:.0f} MiB compressed (ratio {uncompressed / compressed:.1f}x)")

    for path, _ in layers:  # warm the page cache so both sides read from memory
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
    start = time.perf_counter()
    for path, _ in layers:
        listing = subprocess.run(f"gzip -dc '{path}' | tar -t", shell=True, check=True,
                                 capture_output=True)
        files += listing.stdout.count(b"\n")
    baseline = time.perf_counter() - start
    print(f"{files} tar entries; gzip -dc | tar -t, layer after layer: {baseline:.2f} s")

    env = as_installed()
    with tempfile.TemporaryDirectory() as cache:
        command = [sys.executable, "-c", "import sys; from aipcc_build.cli import main; "
                   "main(sys.argv[1:])", "validate", f"oci:{args.layout}:bench",
                   "--cache-dir", cache, "--json"]
        cold, cold_rss = timed(command, env)
        # Warm runs are short: timed without the RSS sampler (it polls /proc every 5 ms,
        # which on two cores slows the run it measures), median of three.
        warm = statistics.median(wall(command, env) for _ in range(3))
    cold_ratio, warm_ratio = cold / baseline, warm / cold
    peak_mb = cold_rss / 2**20
    print(f"aipcc-build validate, cold cache: {cold:.2f} s -> ratio {cold_ratio:.3f} "
          "(target <= 0.3)")
    print(f"aipcc-build validate, warm cache: {warm * 1000:.0f} ms -> ratio {warm_ratio:.3f} "
          "of cold (target <= 0.05)")
    print(f"peak RSS, validator and workers together (cold run): {peak_mb:.0f} MB "
          "(target < 300)")
    ok = cold_ratio <= 0.3 and warm_ratio <= 0.05 and peak_mb < 300
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
