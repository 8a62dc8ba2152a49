"""What the repository tracks: every CI job and every `git clone` of it copies it all."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The largest tracked file is a docs picture of about 120 kB; wheels and base-OS tarballs
# are fetched and cached by scripts/, never committed.
LIMIT = 512 * 1024


def test_no_large_file_is_tracked() -> None:
    # "<mode> blob <object> <size>\t<path>" for every file of the commit a clone checks out
    listed = subprocess.run(["git", "ls-tree", "-r", "-l", "-z", "HEAD"], cwd=REPO,
                            check=True, capture_output=True, timeout=60).stdout.decode()
    large = [entry.split("\t", 1)[1] for entry in listed.split("\0")
             if entry and entry.split()[3].isdigit() and int(entry.split()[3]) > LIMIT]
    assert large == []
