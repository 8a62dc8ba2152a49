"""One image's way through a run: build -> validate -> push for one platform build, and
the manifest list worker that joins the platforms of an image and pushes the list.

Each runs in its own thread (the scheduler starts them) and reports to the scheduler's main
loop only through SEND: events to pass on, its build slot released, its image built (its
dependents may start), its result. A unit test drives a `Worker` alone with a fake builder
and a list as SEND.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Optional, TypeVar

from ..matrix import ImageSpec
from .build_log import BuildLog
from .builder import Builder, BuildJob, BuildOutcome, ListJob, ListOutcome, PushOutcome
from .outcomes import (
    Event,
    ImageResult,
    LogLine,
    Retrying,
    Status,
    StatusChanged,
    ValidationOutcome,
)
from .schedule_options import ScheduleOptions

if TYPE_CHECKING:
    from ..validate.results import DeviceCode, ImageVerdict

LOG_TAIL_LINES = 30

# The validation step: (image, local image ID) -> outcome.
Validate = Callable[[ImageSpec, str], ValidationOutcome]
_Outcome = TypeVar("_Outcome", BuildOutcome, PushOutcome, ListOutcome)


@dataclass(frozen=True)
class Message:
    """Worker -> main loop."""

    key: str
    event: Optional[Event] = None  # to pass on
    released: bool = False  # built: the build's job and resource slots are free
    built_id: Optional[str] = None  # built and validated: dependents may start
    result: Optional[ImageResult] = None  # the worker is done
    joined: Optional[Mapping[str, ImageResult]] = None  # a list worker is done: by key


class Worker:
    """What every worker thread of one run shares: the builder, the options, the way to the
    main loop, the cancel flag (start nothing new) and the slots that bound validations and
    pushes (they hold no build slot, so the next build starts meanwhile, but at most --jobs
    of each run at once)."""

    def __init__(self, builder: Builder, options: ScheduleOptions,
                 send: Callable[[Message], None], validate: Optional[Validate] = None,
                 cancelled: Optional[threading.Event] = None) -> None:
        self.builder = builder
        self.options = options
        self.send = send
        self.validate = validate
        self.cancelled = cancelled or threading.Event()
        self.check_slots = threading.Semaphore(max(1, options.jobs))
        self.push_slots = threading.Semaphore(max(1, options.jobs))

    def build(self, key: str, job: BuildJob, result: ImageResult) -> None:
        """Any exception (an unwritable log, a full disk, a runner bug) fails this image
        with the error as its message: a worker that ends without a result would leave the
        main loop waiting for it forever."""
        sent: list[bool] = []
        try:
            self._work_on(key, job, result, sent)
        except Exception as exc:
            if sent:  # the result went out; closing the log failed after it
                return
            message = f"{type(exc).__name__}: {exc}"
            self.send(Message(key, result=replace(
                result, status=Status.FAILED, message=message, end=time.time(),
                log_tail=(message,))))

    def _work_on(self, key: str, job: BuildJob, result: ImageResult,
                 sent: list[bool]) -> None:
        tail: list[str] = []
        with BuildLog(result.log) as log:

            def line(text: str) -> None:
                log.write(text)
                tail.append(text)
                del tail[:-LOG_TAIL_LINES]
                self.send(Message(key, event=LogLine(key, text)))

            def status(new: Status) -> None:
                self.send(Message(key, event=StatusChanged(key, new)))

            built_at: list[float] = []
            warned: list[str] = []
            measured: list[tuple[DeviceCode, ...]] = []  # the validator's reading
            judged: list[tuple[ImageVerdict, ...]] = []  # and its verdicts

            def done(status: Status, message: str = "", *, retries: int, image_id: str = "",
                     digest: str = "",
                     toolkits: Optional[Mapping[str, Sequence[str]]] = None) -> None:
                failed = status in (Status.FAILED, Status.PUSH_FAILED)
                final = replace(result, status=status, message=message, end=time.time(),
                                built=built_at[0] if built_at else None,
                                log_tail=tuple(tail) if failed else (), retries=retries,
                                image_id=image_id, digest=digest, toolkits=toolkits,
                                warnings=tuple(warned),
                                gpu_code=measured[0] if measured else (),
                                verdicts=judged[0] if judged else ())
                sent.append(True)
                self.send(Message(key, result=final))

            built, retries = self._attempt("build", key, line,
                                           lambda: self.builder.build(job, line))
            if built.stopped or (not built.ok and self.cancelled.is_set()):
                return done(Status.CANCELLED, "stopped", retries=retries)
            if not built.ok:
                return done(Status.FAILED, built.error, retries=retries)
            toolkits: Optional[Mapping[str, Sequence[str]]] = None
            if self.validate is not None:
                self.send(Message(key, released=True))
                status(Status.VALIDATING)
                try:
                    with self.check_slots:
                        checked = self.validate(job.image, built.image_id)
                except Exception as exc:  # a validator bug must not take the run down
                    checked = ValidationOutcome(ok=False, message=f"validator error: {exc}")
                toolkits = checked.toolkits
                measured.append(checked.gpu_code)
                judged.append(checked.verdicts)
                for warning in checked.warnings:
                    line(f"validation warning: {warning}")
                warned.extend(checked.warnings)
                if not checked.ok:
                    # Which platform, when a list would join several: only it is at fault.
                    where = f" on {job.platform}" if job.image.multi_platform else ""
                    line(f"validation failed{where}: {checked.message}")
                    return done(Status.FAILED, f"validation failed{where}: {checked.message}",
                                image_id=built.image_id, retries=retries, toolkits=toolkits)
            built_at.append(time.time())
            self.send(Message(key, built_id=built.image_id))
            if job.image.multi_platform:  # the list worker joins and pushes it
                return done(Status.BUILT, image_id=built.image_id, retries=retries,
                            toolkits=toolkits)
            if not self.options.push:
                return done(Status.OK, image_id=built.image_id, retries=retries,
                            toolkits=toolkits)
            if self.cancelled.is_set():
                return done(Status.CANCELLED, "built, not pushed (stopped)",
                            image_id=built.image_id, retries=retries, toolkits=toolkits)
            status(Status.PUSHING)
            with self.push_slots:
                pushed, push_retries = self._attempt(
                    "push", key, line,
                    lambda: self.builder.push(job, built.image_id, self.options.tls_verify,
                                             line))
            retries += push_retries
            if pushed.ok:
                return done(Status.OK, image_id=built.image_id, digest=pushed.digest,
                            retries=retries, toolkits=toolkits)
            if pushed.stopped or self.cancelled.is_set():
                return done(Status.CANCELLED, "built, push stopped", image_id=built.image_id,
                            retries=retries, toolkits=toolkits)
            return done(Status.PUSH_FAILED,
                        f"push to {job.image.reference} failed after {push_retries + 1} "
                        f"attempt(s): {pushed.error}",
                        image_id=built.image_id, retries=retries, toolkits=toolkits)

    def join(self, image_key: str, results: Mapping[str, ImageResult]) -> None:
        """The list worker: join the BUILT platforms of one image (RESULTS, by key), push
        the list."""
        keys = list(results)
        image = results[keys[0]].image
        job = ListJob(image=image,
                      instances={r.platform: r.image_id for r in results.values()},
                      push_timeout=self.options.push_timeout,
                      push_stall=self.options.push_stall)
        first = keys[0]

        def line(text: str) -> None:
            self.send(Message(first, event=LogLine(first, text)))

        def finish(status: Status, message: str = "", outcome: Optional[ListOutcome] = None,
                   retries: int = 0) -> None:
            now = time.time()
            digests = outcome.instance_digests if outcome else {}
            self.send(Message(image_key, joined={
                key: replace(result, status=status, message=message, end=now,
                             retries=result.retries + retries,
                             digest=digests.get(result.platform, ""),
                             list_digest=outcome.digest if outcome else "")
                for key, result in results.items()}))

        try:
            made = self.builder.make_list(job, line)
            if not made.ok:
                return finish(Status.FAILED, f"manifest list {image.reference}: {made.error}")
            if not self.options.push:
                return finish(Status.OK)
            if self.cancelled.is_set():
                return finish(Status.CANCELLED, "built, not pushed (stopped)")
            for key in keys:
                self.send(Message(key, event=StatusChanged(key, Status.PUSHING)))
            with self.push_slots:
                pushed, retries = self._attempt(
                    "push", first, line,
                    lambda: self.builder.push_list(job, self.options.tls_verify, line))
            if pushed.ok:
                return finish(Status.OK, outcome=pushed, retries=retries)
            if pushed.stopped or self.cancelled.is_set():
                return finish(Status.CANCELLED, "built, push stopped", retries=retries)
            return finish(Status.PUSH_FAILED,
                          f"push of the manifest list {image.reference} failed after "
                          f"{retries + 1} attempt(s): {pushed.error}", retries=retries)
        except Exception as exc:  # as in _work: the main loop must hear back
            finish(Status.FAILED, f"{type(exc).__name__}: {exc}")

    def _attempt(self, action: str, key: str, line: Callable[[str], None],
                 call: Callable[[], _Outcome]) -> tuple[_Outcome, int]:
        """Call, retrying with the options' backoff what tools.retry's table calls
        transient (the outcome says so)."""
        retry = self.options.retry
        retries = 0
        while True:
            outcome = call()
            if outcome.ok or outcome.stopped or not outcome.transient \
                    or retries + 1 >= retry.attempts or self.cancelled.is_set():
                return outcome, retries
            retries += 1
            delay = retry.delay(retries)
            line(f"{action} failed ({outcome.error}); attempt {retries + 1} in {delay:g} s")
            self.send(Message(key, event=Retrying(key, action, retries + 1, delay,
                                                  outcome.error)))
            if self.cancelled.wait(delay):
                return outcome, retries
