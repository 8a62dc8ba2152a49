"""Names Kubernetes accepts for the objects the plan and mirror write (PipelineRun tasks,
Konflux components and applications, an ImageDigestMirrorSet): RFC 1123 labels."""

from __future__ import annotations

import re

# An RFC 1123 label: lower-case letters, digits and '-', at most 63 characters.
DNS_LABEL_LIMIT = 63


def dns_label(text: str, fallback: str = "x") -> str:
    """TEXT with every run of other characters turned into one '-', trimmed: FALLBACK when
    nothing is left. The caller shortens it where a suffix must still fit."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or fallback
