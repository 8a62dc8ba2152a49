"""Fakes for unit tests: a process runner that records argument lists and answers from a
function, instead of starting programs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable, Optional

from aipcc_build.errors import ToolError
from aipcc_build.tools.runner import MAX_STDOUT, Completed

Answer = Callable[[list[str]], tuple[int, bytes, bytes]]


class RecordingRunner:
    """Records each argv in `calls`; ANSWER gives (exit code, stdout, stderr)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 120.0, check: bool = True,
            stdin: Optional[bytes] = None, max_stdout: int = MAX_STDOUT) -> Completed:
        self.calls.append(list(argv))
        code, out, err = self.answer(list(argv))
        done = Completed(tuple(argv), code, out, err)
        if check and code != 0:
            raise ToolError(argv, code, done.error_text)
        return done

    def start(self, argv: Sequence[str]):  # type: ignore[no-untyped-def]
        raise AssertionError(f"a unit test started a long-running program: {argv}")
