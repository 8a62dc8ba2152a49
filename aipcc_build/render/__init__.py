"""The render stage: Containerfiles from the matrix's Jinja templates (one environment,
shared with change detection), written atomically, and the drift check."""

from ..generated_files import FileChange, RenderResult
from .containerfiles import (
    BUILD_ID_ARG,
    HEADER_PREFIX,
    PARENT_ARG,
    RenderedFile,
    apply,
    ensure_current,
    environment,
    render_all,
    tag_expression,
    template_inputs,
)

__all__ = [
    "BUILD_ID_ARG", "HEADER_PREFIX", "PARENT_ARG", "FileChange", "RenderResult", "RenderedFile",
    "apply", "ensure_current", "environment", "render_all", "tag_expression", "template_inputs",
]
