"""The report stage: how every result looks (console, live progress, JSON, JUnit, the
build report). Core code returns typed results; only this package writes them out."""

from .console import deliver, emit_json, error, interactive, shown_path, table, warning, wrote

__all__ = [
    "deliver", "emit_json", "error", "interactive", "shown_path", "table", "warning", "wrote",
]
