"""The report stage: how every result looks (console, live progress, JSON, JUnit). Core
code returns typed results; only this package shows them. (The build report, a file the
later stages read, is the build stage's: `imagebuild.build_report`.)"""

from .console import (
    deliver,
    emit_json,
    error,
    interactive,
    note,
    shown_path,
    table,
    warning,
    wrote,
)

__all__ = [
    "deliver", "emit_json", "error", "interactive", "note", "shown_path", "table", "warning",
    "wrote",
]
