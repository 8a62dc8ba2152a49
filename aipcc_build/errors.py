"""The error family. The CLI maps each type to an exit code and prints one line."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Optional


class AipccError(Exception):
    """Base of every error the CLI reports without a traceback."""

    exit_code = 2
    # The field of the request or the matrix the error is about ("capacity",
    # "images.devel.context"): the CLI names the option that sets it.
    field: Optional[str] = None


class InputError(AipccError):
    """Bad input: a malformed matrix, an unknown name, a wrong argument (exit 2)."""

    def __init__(
        self,
        message: str,
        *,
        file: Optional[str] = None,
        line: Optional[int] = None,
        column: Optional[int] = None,
        field: Optional[str] = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}"


class CheckFailed(AipccError):
    """A check found problems (drift, violations, EOL): exit 1."""

    exit_code = 1

    def __init__(self, message: str, *, field: Optional[str] = None) -> None:
        self.field = field
        super().__init__(message)


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP ended the run. A BaseException, like KeyboardInterrupt: no
    `except Exception` swallows it, so every finally block and context manager on the way
    out cleans up (children stopped, temporary files removed); exit 128 + the signal."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(signum)


STDERR_TAIL_LINES = 20
# user:password@ in a URL or reference (`docker://me:s3cret@host/ns`, `me:s3cret@host`).
_USERINFO = re.compile(r"(^|[\s'\"=]|://)[^\s/@:'\"]+:[^\s/@'\"]+@")


def without_credentials(text: str) -> str:
    """TEXT with every user:password@ of a URL masked: what an error or a log may show."""
    return _USERINFO.sub(r"\1***@", text)


class ToolError(AipccError):
    """An outside program (buildah, skopeo, git) failed or timed out; carries its command
    and the tail of its stderr."""

    def __init__(self, command: Sequence[str], returncode: int, stderr: str,
                 timed_out: bool = False) -> None:
        # A password given in a reference is echoed by the tool: never kept, never shown.
        self.command = [without_credentials(arg) for arg in command]
        self.returncode = returncode
        stderr = without_credentials(stderr)
        self.stderr = "\n".join(stderr.strip().splitlines()[-STDERR_TAIL_LINES:])
        self.timed_out = timed_out
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        super().__init__(f"{command[0]} exited {returncode}: {tail}" if tail else
                         f"{command[0]} exited {returncode}")


class ToolMissing(InputError):
    """An outside program is not installed: one clear error, before any work starts."""

    def __init__(self, program: str) -> None:
        self.program = program
        super().__init__(f"{program} is not installed (install the {program} package; "
                         "the README's first command sets everything up)")
