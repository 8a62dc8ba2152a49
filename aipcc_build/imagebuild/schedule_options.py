"""How a build run goes: limits, retries, timeouts, what is pushed and how it is labelled.
One frozen object with every default (from `defaults`): `MatrixBuild` carries one, the
scheduler and its workers read it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from .. import defaults

if TYPE_CHECKING:
    from ..tools.retry import Retry


@dataclass(frozen=True)
class ScheduleOptions:
    log_dir: str = defaults.LOG_DIR
    jobs: int = field(default_factory=defaults.jobs)
    capacity: Mapping[str, float] = field(default_factory=dict)  # slot -> amount
    retries: int = defaults.RETRIES
    retry_delay: float = defaults.RETRY_DELAY
    max_retry_delay: float = defaults.MAX_RETRY_DELAY
    build_timeout: Optional[float] = defaults.BUILD_TIMEOUT  # None: no limit
    push_timeout: Optional[float] = defaults.PUSH_TIMEOUT  # None: no limit
    push_stall: Optional[float] = defaults.PUSH_STALL  # None: no limit
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
        from ..tools.retry import Retry  # here: most commands never retry

        return Retry(attempts=self.retries + 1, first=self.retry_delay,
                     cap=self.max_retry_delay)
