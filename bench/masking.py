"""Issue 38.7: `errors.without_credentials`, which every line a command prints or logs
goes through, on one line without a newline, 16 KB to 10 MB of the pieces that cost it
most (a run of letters, `=` before every user, `user:pw@` repeated).

Run: python bench/masking.py

Prints seconds per MB at each size and the ratio of the 10 MB figure to the 16 KB one: 1
when linear (it was quadratic: 16 KB of letters took 2.4 s, a 64 KB piece of a build's
line about 40 s).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aipcc_build.errors import without_credentials  # noqa: E402

SIZES = (16 * 1024, 1024 * 1024, 10 * 1024 * 1024)
PIECES = {"letters": ("a", "@h"), "users after =": ("=a", "a:b@h"), "user:pw@": ("a:b@", "")}


def per_mb(piece: str, end: str, size: int) -> float:
    line = piece * (size // len(piece)) + end
    best = float("inf")
    for _ in range(3 if size < 1024 * 1024 else 1):
        start = time.perf_counter()
        without_credentials(line)
        best = min(best, time.perf_counter() - start)
    return best / (size / 1024 / 1024)


def main() -> None:
    for name, (piece, end) in PIECES.items():
        figures = [per_mb(piece, end, size) for size in SIZES]
        shown = ", ".join(f"{size // 1024} KB {figure:.3f} s/MB"
                          for size, figure in zip(SIZES, figures))
        print(f"{name}: {shown}; 10 MB / 16 KB per MB: {figures[-1] / figures[0]:.2f}")


if __name__ == "__main__":
    main()
