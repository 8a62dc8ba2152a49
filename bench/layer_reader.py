"""Issue 29 speed targets for the engine-exact layer reader (`aipcc_build.imagefs`):

- reading every layer with the validator's scan / isal inflate of the same layers (the
  decompression floor), one process each, layer after layer: close to 1;
- the scan against the reader before issue 29 (the commit given by --before, exported with
  `git archive`): at most 1.10 for the engine-exact reader alone; the diffID check (a
  sha256 of every uncompressed byte, issue 29.2) is shown apart;
- cold `aipcc-build validate` of the whole image / inflating its layers with isal in one
  thread each, in parallel as the validator does: close to 1; and (issue 37) cold
  validation within 1.1x of the verification floor below, in wall time (in parallel) and
  in CPU time.

A reader that refuses what the engine refuses also hashes every byte twice: the blob, whose
sha256 is its name (containers/image refuses a blob that does not match it), and the tar,
whose sha256 is the diffID the config must list (containers/storage refuses a layer that
does not match it). On a machine whose cores all inflate, those two hashes cost CPU that
inflating alone does not. So the floor is shown twice: isal inflate alone, and the
verification floor, isal inflate plus hashlib's sha256 of the blob (in a thread of its
own) and of the tar, the least any reader that checks both digests spends (the
validator's scan and validate are compared with both).

Each figure is CPU seconds (user + system of the process), the shortest of --repeat runs:
the machine is shared, and CPU time is what a read costs whatever runs beside it. Wall
seconds are shown too. The image is validate_speed.py's (>= 1 GiB of this machine's files
in gzip layers, kept under ~/.cache/aipcc-build/bench).

Run: python bench/layer_reader.py [--layout DIR] [--before COMMIT] [--repeat N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from common import as_installed, shortest
from validate_speed import build_layout, layers_of

REPO = Path(__file__).resolve().parent.parent
BEFORE = "bf48a05"  # the last commit with the reader issue 29 replaced

INFLATE = """
import sys
from isal import igzip_threaded
for path in sys.argv[1:]:
    with igzip_threaded.open(path, "rb", threads=1) as stream:
        while stream.read(1 << 20):
            pass
"""

VERIFY = """
import hashlib, sys, threading
from isal import igzip_threaded


def blob_digest(path, out):
    with open(path, "rb") as blob:
        out.append(hashlib.file_digest(blob, "sha256").hexdigest())


for path in sys.argv[1:]:
    found = []
    hashing = threading.Thread(target=blob_digest, args=(path, found))
    hashing.start()
    tar = hashlib.sha256()
    with igzip_threaded.open(path, "rb", threads=1) as stream:
        while data := stream.read(1 << 20):
            tar.update(data)
    hashing.join()
    assert found == [path.rsplit("/", 1)[1]]
"""

SCAN = """
import hashlib, sys
sys.path.insert(0, sys.argv[1])
try:
    from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
except ImportError:  # the reader before issue 29
    from aipcc_build.validate.blobs import BlobLocation, LayerJob
from aipcc_build.validate.layers import scan_layer
if sys.argv[2] == "--no-diff-id":  # the reader alone, without hashing the tar
    from aipcc_build.imagefs import stream

    class Unhashed(stream._HashedTar):
        def read(self, size):
            return self._stream.read(size)

    stream._HashedTar = Unhashed
    del sys.argv[2]
for path in sys.argv[2:]:
    digest = "sha256:" + path.rsplit("/", 1)[1]
    scan = scan_layer(LayerJob(digest, "", BlobLocation(path)))
    assert scan.error is None, scan.error
"""


def in_parallel(program: str, layers: list[str]) -> list[str]:
    """A command running PROGRAM once per layer, all at once, as the validator's pool does."""
    return [sys.executable, "-c",
            "import subprocess, sys; ps = [subprocess.Popen([sys.executable, '-c', "
            f"{program!r}, p]) for p in sys.argv[1:]]; [p.wait() for p in ps]", *layers]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", type=Path,
                        default=Path.home() / ".cache" / "aipcc-build" / "bench" / "validate-oci")
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not (args.layout / "index.json").exists():
        print(f"building {args.layout} ...", file=sys.stderr)
        build_layout(args.layout)
    layers = [str(path) for path, _ in layers_of(args.layout)]
    env = as_installed()
    with tempfile.TemporaryDirectory(prefix="aipcc-bench-before-") as before:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.before,
                                  "aipcc_build"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", before], input=archive, check=True)
        floor = shortest([sys.executable, "-c", INFLATE, *layers], env, repeat=args.repeat)
        verify = shortest([sys.executable, "-c", VERIFY, *layers], env, repeat=args.repeat)
        now = shortest([sys.executable, "-c", SCAN, str(REPO), *layers], env, repeat=args.repeat)
        reader = shortest([sys.executable, "-c", SCAN, str(REPO), "--no-diff-id", *layers],
                          env, repeat=args.repeat)
        old = shortest([sys.executable, "-c", SCAN, before, *layers], env, repeat=args.repeat)
    cold_wall, cold_cpu = _cold_validate(args.layout, env, args.repeat)
    parallel_wall, _ = shortest(in_parallel(INFLATE, layers), env, repeat=args.repeat)
    verify_wall, _ = shortest(in_parallel(VERIFY, layers), env, repeat=args.repeat)
    print(f"isal inflate, layer after layer:  {floor[0]:6.2f} s wall {floor[1]:6.2f} s CPU")
    print(f"  plus sha256 of blob and tar:     {verify[0]:6.2f} s wall {verify[1]:6.2f} s CPU")
    print(f"scan (imagefs), layer after layer: {now[0]:6.2f} s wall {now[1]:6.2f} s CPU")
    print(f"  without the diffID hash:         {reader[0]:6.2f} s wall {reader[1]:6.2f} s CPU")
    print(f"scan before issue 29 ({args.before}):    {old[0]:6.2f} s wall {old[1]:6.2f} s CPU")
    print(f"scan / isal inflate (CPU):         {now[1] / floor[1]:6.2f}")
    print(f"reader now / before (CPU, <= 1.10): {reader[1] / old[1]:6.2f}")
    print(f"scan with the diffID / before (CPU): {now[1] / old[1]:6.2f}")
    print(f"scan / verification floor (CPU):    {now[1] / verify[1]:6.2f}")
    print(f"cold validate / isal inflate of the layers in parallel (wall): "
          f"{cold_wall:.2f} / {parallel_wall:.2f} = {cold_wall / parallel_wall:.2f}")
    print(f"cold validate / verification floor in parallel (wall): "
          f"{cold_wall:.2f} / {verify_wall:.2f} = {cold_wall / verify_wall:.2f}")
    print(f"cold validate / verification floor (CPU): "
          f"{cold_cpu:.2f} / {verify[1]:.2f} = {cold_cpu / verify[1]:.2f}")
    return 0 if reader[1] <= 1.10 * old[1] else 1


def _cold_validate(layout: Path, env: dict[str, str], repeat: int) -> tuple[float, float]:
    """(wall, CPU) of `aipcc-build validate` of LAYOUT with an empty scan cache, the
    shortest of REPEAT runs each, as every other figure here is taken."""
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="aipcc-bench-cache-") as cache:
            # `shortest` counts the validator's scan processes' CPU time too.
            runs.append(shortest([sys.executable, "-m", "aipcc_build", "validate",
                                  f"oci:{layout}", "--expect", "cpu", "--cache-dir", cache],
                                 env, repeat=1))
    return min(wall for wall, _ in runs), min(cpu for _, cpu in runs)


if __name__ == "__main__":
    sys.exit(main())
