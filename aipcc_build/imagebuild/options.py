"""How a build run goes: limits, retries, timeouts, what is pushed and how it is labelled.
One frozen object carrying every default once: `aipcc-build matrix` shows these defaults,
`MatrixBuild` carries one, the scheduler and its workers read it. Imports nothing heavy, so
that the CLI can read the defaults while it starts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ..tools.retry import Retry


def default_jobs() -> int:
    """Builds at most at once: the host's CPUs, at most 4."""
    return min(os.cpu_count() or 1, 4)


@dataclass(frozen=True)
class ScheduleOptions:
    log_dir: str = "logs"  # one log per image: DIR/kind/name.log
    jobs: int = field(default_factory=default_jobs)
    capacity: Mapping[str, float] = field(default_factory=dict)  # slot -> amount
    retries: int = 1  # of a transient build failure or a push
    retry_delay: float = 2.0  # seconds before the first retry; doubles after each
    max_retry_delay: float = 60.0  # ... up to this
    build_timeout: Optional[float] = 4 * 3600.0  # seconds for one image's `buildah build`
    push_timeout: Optional[float] = 600.0  # seconds for one push attempt
    fail_fast: bool = False
    push: bool = False
    tls_verify: bool = True
    build_args: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    layers: Optional[bool] = None  # None: buildah's default (BUILDAH_LAYERS)
    pull: Optional[str] = None  # None: buildah's pull policy
    history: Mapping[str, float] = field(default_factory=dict)  # build key -> seconds
    # key -> reference of its from_image parent, for parents outside the plan
    parent_references: Mapping[str, str] = field(default_factory=dict)

    @property
    def retry(self) -> Retry:
        from ..tools.retry import Retry  # here: the CLI reads these defaults while it starts

        return Retry(attempts=self.retries + 1, first=self.retry_delay,
                     cap=self.max_retry_delay)
