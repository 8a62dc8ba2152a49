"""The per-image build log (`--log-dir`): one file per image and platform, capped. A build
that prints gigabytes would fill the log directory and, held in memory, the host: the first
HEAD bytes are written as they come, then only the last TAIL bytes are kept (in memory) and
written when the log closes, after a line saying how much was left out. A log killed before
it closes (SIGKILL) keeps its head."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from types import TracebackType
from typing import Optional

from ..errors import without_credentials

# What a huge log keeps: its first and its last this many bytes.
HEAD_BYTES = 8 * 1024 * 1024
TAIL_BYTES = 8 * 1024 * 1024


class BuildLog:
    """Lines into PATH (its directory made), at most HEAD + TAIL bytes of them."""

    def __init__(self, path: str, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        self._file = target.open("w", encoding="utf-8", errors="replace")
        self._head_left = head
        self._tail_max = tail
        self._tail: deque[tuple[str, int]] = deque()  # (line, its size in bytes)
        self._tail_size = 0
        self._dropped_lines = 0
        self._dropped_bytes = 0

    def write(self, text: str) -> None:
        line = without_credentials(text) + "\n"
        size = len(line.encode("utf-8", "replace"))
        if size <= self._head_left and not self._tail:
            self._head_left -= size
            self._file.write(line)
            self._file.flush()
            return
        self._head_left = 0
        self._tail.append((line, size))
        self._tail_size += size
        while self._tail_size > self._tail_max and len(self._tail) > 1:
            _, gone = self._tail.popleft()
            self._tail_size -= gone
            self._dropped_lines += 1
            self._dropped_bytes += gone

    def close(self) -> None:
        try:
            if self._dropped_lines:
                self._file.write(f"[aipcc-build: {self._dropped_lines} lines "
                                 f"({self._dropped_bytes} bytes) left out of this log]\n")
            self._file.writelines(line for line, _ in self._tail)
            self._tail.clear()
        finally:
            self._file.close()

    def __enter__(self) -> BuildLog:
        return self

    def __exit__(self, kind: Optional[type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()
