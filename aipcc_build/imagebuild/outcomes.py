"""What a build run reports and returns: the status of each image, the events of a run
(rendered live by `report/progress`) and its results (written by the build report and
JUnit). The scheduler and its workers make them; `report/` and `cli/` read them."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Union

if TYPE_CHECKING:
    from ..matrix import ImageSpec
    from ..matrix.model import Product
    from ..plan import BuildPlan
    from ..validate.results import DeviceCode, ImageVerdict


class Status(str, enum.Enum):
    QUEUED = "queued"
    BUILDING = "building"
    VALIDATING = "validating"
    BUILT = "built"  # one platform of several, validated: waits for the manifest list
    PUSHING = "pushing"
    OK = "ok"
    FAILED = "failed"  # build or validation failed
    SKIPPED = "skipped"  # an image it is built FROM failed
    PUSH_FAILED = "push-failed"  # built (and validated) but not pushed
    CANCELLED = "cancelled"  # stopped or never started: --fail-fast or an interruption

    @property
    def final(self) -> bool:
        return self in FINAL


FINAL = {Status.OK, Status.FAILED, Status.SKIPPED, Status.PUSH_FAILED, Status.CANCELLED}


@dataclass(frozen=True)
class ValidationOutcome:
    ok: bool
    message: str = ""
    toolkits: Mapping[str, Sequence[str]] = field(default_factory=dict)  # "cuda": ["12.8.90"]
    warnings: tuple[str, ...] = ()  # findings that do not fail the image, one line each
    gpu_code: tuple[DeviceCode, ...] = ()  # the device code of its files (validate)
    verdicts: tuple[ImageVerdict, ...] = ()  # the validator's, for the build report


@dataclass(frozen=True)
class StatusChanged:
    key: str
    status: Status
    message: str = ""
    log_tail: tuple[str, ...] = ()  # set on failures
    log: str = ""  # the image's build log, on a final status


@dataclass(frozen=True)
class LogLine:
    key: str
    line: str


@dataclass(frozen=True)
class Retrying:
    key: str
    action: str  # "build" or "push"
    attempt: int  # the attempt about to start, from 2
    delay: float
    error: str


@dataclass(frozen=True)
class Planned:
    """First event of a run: what will be built, in plan order."""

    plan: BuildPlan


@dataclass(frozen=True)
class Warned:
    """Something the user should know before the builds start."""

    message: str


Event = Union[StatusChanged, LogLine, Retrying, Planned, Warned]


@dataclass(frozen=True)
class ImageResult:
    image: ImageSpec
    status: Status
    log: str
    image_id: str = ""
    digest: str = ""
    start: Optional[float] = None  # epoch seconds
    built: Optional[float] = None  # built and validated: dependents could start
    end: Optional[float] = None  # after the push, if any
    retries: int = 0
    message: str = ""
    toolkits: Optional[Mapping[str, Sequence[str]]] = None  # None: not validated
    log_tail: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # the validator's
    platform: str = ""  # the platform built; "" for a hand-made plan
    list_digest: str = ""  # the manifest list holding this platform's instance, pushed
    gpu_code: tuple[DeviceCode, ...] = ()  # the device code the validator read
    verdicts: tuple[ImageVerdict, ...] = ()  # the validator's (promote attests them)

    @property
    def key(self) -> str:
        from ..plan.dag import node_key

        return node_key(self.image, self.platform)

    @property
    def duration(self) -> Optional[float]:
        if self.start is None or self.end is None:
            return None
        return self.end - self.start

    @property
    def build_duration(self) -> Optional[float]:
        if self.start is None or self.built is None:
            return None
        return self.built - self.start


@dataclass(frozen=True)
class RunResult:
    images: tuple[ImageResult, ...]  # plan order
    start: float
    end: float
    stopped_by: Optional[str] = None  # "interrupt" or "fail-fast"
    registry: str = ""  # what {registry} was in every reference: where the run pushes
    product: Optional[Product] = None  # the matrix's product: the version in every tag
    # The build report `build_matrix` wrote (None: none asked for, or not written), and why
    # it could not be written: the builds are done either way, the caller says it
    report_path: Optional[str] = None
    report_error: Optional[OSError] = None

    @property
    def ok(self) -> bool:
        return all(result.status is Status.OK for result in self.images)
