"""Issue 37 target: the final-tree model grows each layer's cached scan at most 2x. Prints
the size of each layer's cache entry after a cold validation of each REF (the verdict does
not matter). Quote it before and after a change to the scan: run it once with the older
tree first on PYTHONPATH.

Run: python bench/scan_cache_size.py [REF ...]
     (default: the Debian base image the tests build, in containers-storage)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_REFS = ("containers-storage:localhost/aipcc/debian:bookworm",)


def main() -> int:
    refs = sys.argv[1:] or DEFAULT_REFS
    for ref in refs:
        with tempfile.TemporaryDirectory() as cache:
            subprocess.run([sys.executable, "-m", "aipcc_build", "validate", ref,
                            "--cache-dir", cache, "--json"], stdout=subprocess.DEVNULL,
                           check=False)
            entries = sorted(Path(cache).glob("validate/layers-v*/*/*.json"))
            if not entries:
                print(f"{ref}: no layer scans cached", file=sys.stderr)
                return 1
            sizes = [entry.stat().st_size for entry in entries]
            print(f"{ref}: {len(sizes)} layers, cached scans "
                  + ", ".join(f"{entry.stem[:12]} {size} bytes"
                              for entry, size in zip(entries, sizes))
                  + f"; total {sum(sizes)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
