"""Issue 41 target: reading the GPU code of every shared object adds at most 10% to a cold
validation and nothing measurable to a warm one.

The image: an OCI layout (gzip layers, as `buildah push` writes them) of the CUDA 12.8
component wheels of the wheelhouse (cuRAND, CUPTI, the runtime, NVTX: about 150 MB of
shared objects, most of it cuRAND's and CUPTI's device code), one layer per wheel, so the
share of bytes in shared objects is higher than in any real image's: a worst case. Each
validation is timed with this checkout and with BASE (default: the merge base of HEAD and
main, which reads no device code), cold (empty cache) and warm, as the shortest CPU time
(user + system, the process and its children) of REPEAT runs: the machine is shared.

The image is measured twice: from the OCI layout, and copied into containers-storage, where
it is read in place.

Run: python bench/device_code.py [--base REV] [--repeat N]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from common import REPO, as_installed, script, shortest
from validate_corpus import checkout

WHEELS = ("nvidia_curand_cu12-10.3.9.90-", "nvidia_cuda_cupti_cu12-12.8.90-",
          "nvidia_cuda_runtime_cu12-12.8.90-", "nvidia_nvtx_cu12-12.8.90-")
SITE = "usr/lib/python3.11/site-packages/"
STORED = "localhost/aipcc-bench/device-code:latest"


def layer(wheel: Path) -> bytes:
    """The wheel's files under site-packages, as a gzip-compressed tar."""
    out = io.BytesIO()
    with zipfile.ZipFile(wheel) as archive, tarfile.open(fileobj=out, mode="w") as tar:
        for item in archive.infolist():
            if item.is_dir():
                continue
            info = tarfile.TarInfo(SITE + item.filename)
            info.size, info.mode = item.file_size, 0o644
            tar.addfile(info, io.BytesIO(archive.read(item)))
    return out.getvalue()


def layout(root: Path, wheels: list[Path]) -> str:
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return f"sha256:{digest}"

    tars = [layer(w) for w in wheels]
    zipped = [gzip.compress(t, compresslevel=6) for t in tars]
    config = json.dumps({"os": "linux", "architecture": "amd64",
                         "config": {"Labels": {"ai.aipcc.accelerator": "cuda",
                                               "ai.aipcc.accelerator.version": "12.8.1"}},
                         "rootfs": {"type": "layers", "diff_ids": [
                             "sha256:" + hashlib.sha256(t).hexdigest() for t in tars]}})
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": put(config.encode()), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": put(z), "size": len(z)} for z in zipped]}).encode()
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": put(manifest),
        "size": len(manifest)}]}))
    print(f"image: {len(wheels)} layers, {sum(map(len, tars)) / 1e6:.0f} MB of files, "
          f"{sum(map(len, zipped)) / 1e6:.0f} MB compressed")
    return f"oci:{root}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the revision to compare with (default: the merge "
                                       "base of HEAD and main)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    base_rev = args.base or subprocess.run(
        ["git", "-C", str(REPO), "merge-base", "HEAD", "main"], check=True,
        capture_output=True, text=True).stdout.strip()
    wheelhouse = Path(script("fetch-wheels"))
    wheels = [next(wheelhouse.glob(prefix + "*.whl")) for prefix in WHEELS]
    env = as_installed()
    with tempfile.TemporaryDirectory() as work:
        ref = layout(Path(work) / "oci", wheels)
        old_env = dict(env, PYTHONPATH=str(checkout(base_rev, Path(work))))
        # The same image in containers-storage, read in place: there the reader of what a
        # shared object links passes over the rest of a file by seeking, the device-code
        # reader reads it all.
        subprocess.run(["skopeo", "copy", "-q", ref, f"containers-storage:{STORED}"],
                       check=True, timeout=600)
        try:
            for where, image in (("OCI layout (gzip)", ref),
                                 ("containers-storage, in place", f"containers-storage:{STORED}")):
                compare(where, image, Path(work), [("this checkout", env),
                                                   (f"base {base_rev[:12]}", old_env)],
                        args.repeat)
        finally:
            subprocess.run(["buildah", "rmi", "-f", STORED], capture_output=True, timeout=300)
    return 0


def compare(where: str, ref: str, work: Path, envs: list[tuple[str, dict[str, str]]],
            repeat: int) -> None:
    results = {}
    for name, environment in envs:
        cache = work / f"cache-{len(results)}"
        validate = [sys.executable, "-m", "aipcc_build", "validate", ref,
                    "--cache-dir", str(cache)]
        colds = []
        for _ in range(repeat):
            subprocess.run(["rm", "-rf", str(cache)], check=True)
            colds.append(shortest(validate, environment, repeat=1)[1])
        warm = shortest(validate, environment, repeat=repeat)[1]
        results[name] = (min(colds), warm)
        print(f"{where}: {name}: cold {min(colds):.2f} s CPU, warm {warm:.2f} s CPU")
    (cold, warm), (old_cold, old_warm) = results.values()
    print(f"{where}: cold / base cold: {cold / old_cold:.2f} (target <= 1.10); "
          f"warm / base warm: {warm / old_warm:.2f} (target: nothing measurable)")


if __name__ == "__main__":
    sys.exit(main())
