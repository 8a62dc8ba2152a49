"""The scheduler's runner on the real buildah: a scheduled job becomes `buildah build` /
`buildah push` (streamed, each child in its own process group), and after an interruption
the working containers our killed builds left behind are removed."""

from __future__ import annotations

import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..errors import STDERR_TAIL_LINES, AipccError, ToolError
from ..plan import build_context
from ..tools import buildah
from ..tools.runner import LineSink, Process, ProcessRunner
from ..tools.skopeo import Skopeo
from .schedule import BuildJob, BuildOutcome, ListJob, ListOutcome, PushOutcome


@dataclass
class _Origins:
    """What our builds started working containers from, learnt from their output."""

    references: set[str]  # FROM lines, as written ("scratch" included)
    image_ids: set[str]  # intermediate and parent image IDs (12 or 64 hex digits)

    def matches(self, reference: str, image_id: str) -> bool:
        if image_id and any(image_id.startswith(known) for known in self.image_ids):
            return True
        # A FROM scratch container has neither; "scratch" among our FROM lines covers it.
        return (reference or "scratch") in self.references


class BuildahRunner:
    """The scheduler's runner on the real buildah (see schedule.Runner)."""

    def __init__(self, processes: ProcessRunner) -> None:
        self.processes = processes
        self.environ = processes.environ
        self._lock = threading.Lock()
        self._children: set[Process] = set()
        self._stopping = False
        self._origins = _Origins(set(), set())
        # Containers that existed before we started are never ours to remove.
        self._preexisting = buildah.containers(processes)

    def build(self, job: BuildJob, on_line: LineSink) -> BuildOutcome:
        with tempfile.TemporaryDirectory(prefix="aipcc-build-") as scratch:
            iidfile = str(Path(scratch) / "iid")
            request = buildah.BuildRequest(
                containerfile=job.containerfile or job.image.containerfile,
                context=build_context(job.image), tag=job.tag or job.image.reference,
                iidfile=iidfile, build_args=job.build_args,
                labels=job.labels, from_image=job.from_image, layers=job.layers,
                pull=job.pull, platform=job.platform,
            )
            if job.from_image and job.from_image.startswith("sha256:"):
                self._remember(image_id=job.from_image.replace("sha256:", ""))
            elif job.from_image:
                self._remember(reference=job.from_image)
            tail: list[str] = []

            def line(text: str) -> None:
                self._learn(text)
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
        return self._push(
            lambda digestfile: buildah.push_command(image_id, job.image.reference, digestfile,
                                                    tls_verify, self.environ),
            "buildah push", job.push_timeout, on_line)

    def make_list(self, job: ListJob, on_line: LineSink) -> ListOutcome:
        name = job.image.reference
        on_line(f"$ buildah manifest create {name} "
                + " ".join(f"{p}={i}" for p, i in job.instances.items()))
        try:
            buildah.replace_list(self.processes, name, list(job.instances.values()))
        except ToolError as exc:
            return ListOutcome(ok=False, error=str(exc))
        return ListOutcome(ok=True)

    def push_list(self, job: ListJob, tls_verify: bool, on_line: LineSink) -> ListOutcome:
        reference = job.image.reference
        pushed = self._push(
            lambda digestfile: buildah.push_list_command(reference, reference, digestfile,
                                                         tls_verify, self.environ),
            "buildah manifest push", job.push_timeout, on_line)
        if not pushed.ok:
            return ListOutcome(ok=False, stopped=pushed.stopped, error=pushed.error)
        digest = pushed.digest
        # The registry has the instances as pushed (recompressed): their digests are read
        # back from the list there, not from the local one.
        try:
            index = Skopeo(self.processes, tls_verify=tls_verify).inspect_raw(
                f"docker://{job.image.repository}@{digest}")
        except AipccError as exc:
            return ListOutcome(ok=False, error=f"pushed, but the list cannot be read back: "
                                               f"{exc}")
        instances = {}
        for entry in index.get("manifests") or []:
            platform = entry.get("platform") or {}
            name = f"{platform.get('os')}/{platform.get('architecture')}"
            instances[name] = str(entry.get("digest", ""))
        return ListOutcome(ok=True, digest=digest, instance_digests=instances)

    def _push(self, command_for: Callable[[str], list[str]], what: str,
              timeout: Optional[float], on_line: LineSink) -> PushOutcome:
        """Run the push command COMMAND_FOR(digest file) makes; the digest it wrote."""
        with tempfile.TemporaryDirectory(prefix="aipcc-push-") as scratch:
            digestfile = str(Path(scratch) / "digest")
            tail: list[str] = []

            def line(text: str) -> None:
                tail.append(text)
                del tail[:-STDERR_TAIL_LINES]
                on_line(text)

            code, stopped, timed_out = self._run(command_for(digestfile), line, timeout)
            if timed_out:
                return PushOutcome(ok=False, error=f"{what} did not end within {timeout:g} s "
                                                   "(push_timeout)")
            if code == 0:
                return PushOutcome(ok=True, digest=Path(digestfile).read_text().strip())
            return PushOutcome(ok=False, stopped=stopped,
                               error=buildah.error_line(tail) or f"{what} exited {code}")

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
        """Remove working containers our stopped builds left; return their IDs.

        A container is ours when it was created during this run from an image our builds
        started from (FROM lines, intermediate and parent image IDs in their output).
        """
        ours = []
        for container_id in sorted(buildah.containers(self.processes) - self._preexisting):
            try:
                reference, image_id = buildah.container_origin(self.processes, container_id)
            except ToolError:
                continue  # removed meanwhile by its owner
            with self._lock:
                if self._origins.matches(reference, image_id):
                    ours.append(container_id)
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

    def _learn(self, line: str) -> None:
        step = buildah.STEP_FROM.match(line)
        if step:
            self._remember(reference=step.group(1))
        image = buildah.STEP_IMAGE.match(line)
        if image:
            self._remember(image_id=image.group(1))

    def _remember(self, reference: str = "", image_id: str = "") -> None:
        with self._lock:
            if reference:
                self._origins.references.add(reference)
            if image_id:
                self._origins.image_ids.add(image_id)
