"""Issue 37 target (issue 23's was 1.5): re-validating an image whose layers are all cached
costs about a start-up: warm `aipcc-build validate` / `aipcc-build --version` at most 1.2,
on a 1 GiB four-layer OCI layout and on the same image in containers-storage. It also
prints the size of each layer's cached scan (issue 37: the final-tree model may at most
double it).

The layout is built once under ~/.cache/aipcc-build/bench/warm-oci (this machine's files,
gzip layers); the containers-storage copy is `localhost/aipcc-bench/warm:1` (removed with
`buildah rmi localhost/aipcc-bench/warm:1`).

Run: python bench/warm_validate.py [--repeat N] [--instructions]   (--instructions also
prints the ratios of instructions executed, valgrind's count, which a loaded machine does
not move; and those of the same line read by the click command, as `--debug` or an option
the fast reading declines makes it: cli/validate_args)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from common import as_installed, installed_script, instructions, shortest
from validate_speed import build_layout, layers_of

# Four layers of real files, about 1.07 GiB uncompressed on a Debian host.
SOURCES = (
    ("usr/lib/x86_64-linux-gnu",),
    ("usr/include",),
    ("usr/lib/gcc", "usr/lib/python3", "usr/lib/python3.11"),
    ("usr/libexec", "usr/sbin"),
)
STORAGE_IMAGE = "localhost/aipcc-bench/warm:1"
TARGET = 1.2


def wall(command: list[str], env: dict[str, str], repeat: int) -> tuple[float, float]:
    """(wall, CPU) seconds, the shortest of REPEAT runs each, after one unmeasured run (for
    validate: the cold one, which fills the cache)."""
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
    return shortest(command, env, repeat)


def in_storage(layout: Path) -> None:
    """The layout's image in containers-storage, copied once."""
    known = subprocess.run(["buildah", "images", "--quiet", STORAGE_IMAGE],
                           capture_output=True, text=True)
    if known.returncode == 0 and known.stdout.strip():
        return
    print(f"copying the image into containers-storage as {STORAGE_IMAGE} (once)...",
          file=sys.stderr)
    subprocess.run(["skopeo", "copy", "--quiet", f"oci:{layout}:bench",
                    f"containers-storage:{STORAGE_IMAGE}"], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", type=Path,
                        default=Path.home() / ".cache" / "aipcc-build" / "bench" / "warm-oci")
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions executed (valgrind)")
    args = parser.parse_args()
    if not (args.layout / "index.json").exists():
        print(f"building the benchmark image in {args.layout} (once)...", file=sys.stderr)
        build_layout(args.layout, SOURCES)
    layers = layers_of(args.layout)
    print(f"image: {len(layers)} gzip layers, "
          f"{sum(size for _, size in layers) / 2**30:.2f} GiB uncompressed")
    in_storage(args.layout)

    script = installed_script()
    env = as_installed()
    version, version_cpu = wall([script, "--version"], env, args.repeat)
    print(f"aipcc-build --version: {version * 1000:.1f} ms ({version_cpu * 1000:.1f} ms CPU)")
    version_count = instructions([script, "--version"], env) if args.instructions else 0
    ok = True
    with tempfile.TemporaryDirectory() as cache:
        for name, ref in (("OCI layout", f"oci:{args.layout}:bench"),
                          ("containers-storage", f"containers-storage:{STORAGE_IMAGE}")):
            command = [script, "validate", ref, "--cache-dir", cache, "--json"]
            warm, warm_cpu = wall(command, env, args.repeat)
            ratio = warm / version
            ok = ok and ratio <= TARGET
            print(f"warm validate, {name}: {warm * 1000:.1f} ms ({warm_cpu * 1000:.1f} ms CPU) "
                  f"-> ratio {ratio:.2f} (target <= {TARGET}); in CPU time: "
                  f"{warm_cpu / version_cpu:.2f}")
            if args.instructions:
                count = instructions(command, env)
                print(f"  instructions: {count / 1e6:.1f} M, --version "
                      f"{version_count / 1e6:.1f} M: ratio {count / version_count:.3f}")
                by_click = instructions([*command, "--debug"], env)
                print(f"  read by the click command (--debug): {by_click / 1e6:.1f} M: "
                      f"ratio {by_click / version_count:.3f}")
        entries = sorted(Path(cache).glob("validate/layers-v*/*/*.json"))
        print("cached layer scans: " + ", ".join(
            f"{entry.stem[:12]} {entry.stat().st_size} bytes" for entry in entries))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
