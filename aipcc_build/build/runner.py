"""The scheduler's runner on the real buildah: a scheduled job becomes `buildah build` /
`buildah push` (streamed, each child in its own process group), and after an interruption
the working containers our killed builds left behind are removed: only this run's, known by
the name buildah gives them (see `runs`)."""

from __future__ import annotations

import itertools
import signal
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Optional

from ..errors import STDERR_TAIL_LINES, ToolError
from ..plan import build_context
from ..tools import buildah
from ..tools.runner import LineSink, Process, ProcessRunner
from . import runs
from .schedule import BuildJob, BuildOutcome, PushOutcome


class BuildahRunner:
    """The scheduler's runner on the real buildah (see schedule.Runner)."""

    def __init__(self, processes: ProcessRunner, run_id: Optional[str] = None) -> None:
        self.processes = processes
        self.environ = processes.environ
        self.run_id = run_id or "r" + uuid.uuid4().hex[:12]
        self._lock = threading.Lock()
        self._children: set[Process] = set()
        self._stopping = False
        self._bases = itertools.count(1)

    def build(self, job: BuildJob, on_line: LineSink) -> BuildOutcome:
        name = runs.base_tag(self.run_id, next(self._bases))
        try:
            tagged = self._tag_base(job, name, on_line)
        except ToolError as exc:
            return BuildOutcome(ok=False, error=f"pulling the base image: {exc.stderr or exc}",
                                transient=bool(buildah.TRANSIENT.search(str(exc))))
        try:
            return self._build(job, name if tagged else job.from_image,
                               "missing" if tagged and job.pull == "always" else job.pull,
                               on_line)
        finally:
            if tagged:
                buildah.untag(self.processes, [name])

    def _tag_base(self, job: BuildJob, name: str, on_line: LineSink) -> bool:
        """Give the build's base image NAME, a tag of this run's (pulling it first as the
        pull policy says): its working container is then named after it. False when the
        base is not a plain reference (scratch, a build argument)."""
        base = job.from_image or buildah.first_from(job.image.containerfile)
        if base is None or base == "scratch" or self._stopping:
            return False
        if job.pull != "always" and buildah.tag(self.processes, base, name):
            on_line(f"--from {base} as {name}: its working container carries this run's id")
            return True
        if job.pull == "never":
            return False  # buildah build says what is missing
        on_line(f"$ buildah pull {base}")
        buildah.pull(self.processes, base, job.pull or "missing", job.platform,
                     timeout=job.build_timeout or 4 * 3600.0)
        if not buildah.tag(self.processes, base, name):
            return False
        on_line(f"--from {base} as {name}: its working container carries this run's id")
        return True

    def _build(self, job: BuildJob, from_image: Optional[str], pull: Optional[str],
               on_line: LineSink) -> BuildOutcome:
        with tempfile.TemporaryDirectory(prefix="aipcc-build-") as scratch:
            iidfile = str(Path(scratch) / "iid")
            request = buildah.BuildRequest(
                containerfile=job.image.containerfile, context=build_context(job.image),
                tag=job.image.reference, iidfile=iidfile, build_args=job.build_args,
                labels=job.labels, from_image=from_image, layers=job.layers,
                pull=pull, platform=job.platform,
            )
            tail: list[str] = []

            def line(text: str) -> None:
                tail.append(text)
                del tail[:-STDERR_TAIL_LINES]
                on_line(text)

            code, stopped, timed_out = self._run(buildah.build_command(request, self.environ),
                                                 line, job.build_timeout)
            if timed_out:
                return BuildOutcome(ok=False, error=f"buildah build did not end within "
                                                    f"{job.build_timeout:g} s (build_timeout)")
            if code == 0:
                return BuildOutcome(ok=True, image_id=Path(iidfile).read_text().strip())
            text = "\n".join(tail)
            error = buildah.error_line(tail) or f"buildah build exited {code}"
            if buildah.OCI_ISOLATION_UNSUPPORTED in text:
                error = f"{error} ({buildah.ISOLATION_HINT})"
            return BuildOutcome(
                ok=False, stopped=stopped, error=error,
                transient=bool(buildah.TRANSIENT.search(text))
                and not buildah.RUN_STEP_FAILED.search(text),
            )

    def push(self, job: BuildJob, image_id: str, tls_verify: bool,
             on_line: LineSink) -> PushOutcome:
        with tempfile.TemporaryDirectory(prefix="aipcc-push-") as scratch:
            digestfile = str(Path(scratch) / "digest")
            tail: list[str] = []

            def line(text: str) -> None:
                tail.append(text)
                del tail[:-STDERR_TAIL_LINES]
                on_line(text)

            command = buildah.push_command(image_id, job.image.reference, digestfile,
                                           tls_verify, self.environ)
            code, stopped, timed_out = self._run(command, line, job.push_timeout)
            if timed_out:
                return PushOutcome(ok=False, error=f"buildah push did not end within "
                                                   f"{job.push_timeout:g} s (push_timeout)")
            if code == 0:
                return PushOutcome(ok=True, digest=Path(digestfile).read_text().strip())
            return PushOutcome(ok=False, stopped=stopped,
                               error=buildah.error_line(tail) or f"buildah push exited {code}")

    def stop(self) -> None:
        """SIGTERM every child's process group, SIGKILL what is left after the grace time."""
        with self._lock:
            self._stopping = True
            children = list(self._children)
        for child in children:
            child.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + buildah.STOP_GRACE_SECONDS
        while any(child.running() for child in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        for child in children:
            # Also reaches grandchildren (RUN steps) whose buildah parent already exited.
            child.signal_group(signal.SIGKILL)

    def remove_leftovers(self) -> list[str]:
        """Remove the working containers this run's stopped builds left; return their IDs.
        Another run's containers have another run id in their names and stay."""
        ours = runs.ours(buildah.container_names(self.processes), self.run_id)
        buildah.remove_containers(self.processes, ours)
        return ours

    def _run(self, command: list[str], on_line: LineSink,
             timeout: Optional[float] = None) -> tuple[int, bool, bool]:
        """Run to completion; (exit code, whether `stop` ended it, whether TIMEOUT seconds
        ran out first and the child's group was killed)."""
        on_line("$ " + buildah.shown(command))
        with self._lock:
            if self._stopping:
                return -signal.SIGTERM, True, False
            child = self.processes.start(command)
            self._children.add(child)
        try:
            code, timed_out = child.stream(on_line, timeout)
        except BaseException:
            # ON_LINE failed (a full disk under the log): the child must not outlive us.
            child.signal_group(signal.SIGKILL)
            raise
        finally:
            with self._lock:
                self._children.discard(child)
                stopped = self._stopping
        # buildah catches SIGTERM and exits 1 after cleaning up, so the code cannot tell.
        return code, stopped, timed_out and not stopped
