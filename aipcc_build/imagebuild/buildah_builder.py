"""The scheduler's builder on the real buildah: a scheduled job becomes `buildah build` /
`buildah push` (streamed, each child in its own process group), and after an interruption
the working containers our killed builds left behind are removed: only this run's, known
by the run id each of its builds passes to buildah (see `runs`)."""

from __future__ import annotations

import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from ..errors import STDERR_TAIL_LINES, AipccError, ToolError
from ..plan import build_context
from ..tools import buildah, retry
from ..tools.runner import LineSink, Process, ProcessRunner
from ..tools.skopeo import INSPECT_TIMEOUT, Skopeo
from . import runs, uploads
from .builder import BuildJob, BuildOutcome, ListJob, ListOutcome, PushOutcome


class BuildahBuilder:
    """The scheduler's builder on the real buildah (see `builder.Builder`), for the run
    RUN_ID (whose lock the caller holds, see `runs.hold`), in buildah's STORE."""

    def __init__(self, processes: ProcessRunner, run_id: str, store: buildah.Storage) -> None:
        self.processes = processes
        self.environ = processes.environ
        self.run_id = run_id
        self._lock = threading.Lock()
        self._children: set[Process] = set()
        self._stopping = False
        # Containers that existed before we started are never ours to remove.
        self._preexisting = buildah.containers(processes)
        self.store = store

    def build(self, job: BuildJob, on_line: LineSink) -> BuildOutcome:
        with tempfile.TemporaryDirectory(prefix="aipcc-build-") as scratch:
            iidfile = str(Path(scratch) / "iid")
            request = buildah.BuildRequest(
                containerfile=job.containerfile or job.image.containerfile,
                context=build_context(job.image), tag=job.tag or job.image.reference,
                iidfile=iidfile, build_args={**job.build_args, runs.RUN_ARG: self.run_id},
                labels=job.labels, from_image=job.from_image, layers=job.layers,
                pull=job.pull, platform=job.platform,
            )
            tail: list[str] = []

            def line(text: str) -> None:
                shown = buildah.without_unconsumed(text, [runs.RUN_ARG])
                if shown is None:
                    return
                tail.append(shown)
                del tail[:-STDERR_TAIL_LINES]
                on_line(shown)

            code, stopped, limit = self._run(buildah.build_command(request, self.environ),
                                             line, job.build_timeout)
            if limit:
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
                transient=retry.transient_text(text)
                and (not buildah.RUN_STEP_FAILED.search(text)
                     or retry.runtime_start_failed(text)),
            )

    def push(self, job: BuildJob, image_id: str, tls_verify: bool,
             on_line: LineSink) -> PushOutcome:
        return self._push(
            lambda digestfile: buildah.push_command(image_id, job.image.reference, digestfile,
                                                    tls_verify, self.environ),
            "buildah push", job.push_timeout, on_line, job.image.reference, [image_id],
            tls_verify, job.push_stall)

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
            "buildah manifest push", job.push_timeout, on_line, reference,
            list(job.instances.values()), tls_verify, job.push_stall)
        if not pushed.ok:
            return ListOutcome(ok=False, stopped=pushed.stopped, error=pushed.error,
                               refused=pushed.refused, transient=pushed.transient)
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
              timeout: Optional[float], on_line: LineSink, reference: str,
              images: list[str], tls_verify: bool, stall: Optional[float]) -> PushOutcome:
        """Run the push command COMMAND_FOR(digest file) makes; the digest it wrote.
        The layers of IMAGES that no other push of this host has sent to REFERENCE's
        registry are sent by this one alone (see `uploads`).

        A build id is pushed once: REFERENCE is claimed for this run first (another live
        run of this host that claimed it refuses this push), and a tag the registry already
        holds for other images (another run, maybe on another host, pushed it) is never
        overwritten. The same images again (a rerun) are pushed again."""
        holder = runs.claim(self.store, self.run_id, reference)
        if holder is not None:
            return PushOutcome(ok=False, refused=True, error=f"{reference} is being pushed by "
                                                             f"another run ({holder})")
        # The look at the tag is part of the push: a registry that does not answer it is
        # given no longer than the push itself would be.
        limit_s = min(timeout, INSPECT_TIMEOUT) if timeout is not None else INSPECT_TIMEOUT
        bounded = limit_s < INSPECT_TIMEOUT
        look = Skopeo(self.processes, tls_verify=tls_verify, inspect_timeout=limit_s)
        try:
            held = held_images(look, reference, tls_verify)
        except AipccError as exc:
            limit = " (push_timeout)" if bounded and getattr(exc, "timed_out", False) else ""
            return PushOutcome(ok=False, error=f"{reference} cannot be looked at: {exc}{limit}",
                               transient=isinstance(exc, ToolError) and retry.transient(exc))
        ours = {image if image.startswith("sha256:") else f"sha256:{image}"
                for image in images}
        if held is not None and held != ours:
            return PushOutcome(ok=False, refused=True, error=(
                f"{reference} already holds other images (pushed by another run of this "
                "build id): a build id's tags are pushed once"))
        try:
            layers = [layer for image in images
                      for layer in buildah.diff_ids(self.processes, image)]
        except ToolError as exc:
            return PushOutcome(ok=False, error=f"{what}: the image's layers cannot be read: "
                                               f"{exc}")
        waited_from = time.monotonic()

        def give_up() -> bool:
            # Waiting is only an optimisation: a stopped run or the push's own time limit
            # ends it, and the push then goes ahead like any other.
            return self._stopping or (timeout is not None
                                      and time.monotonic() - waited_from > timeout)

        directory = uploads.uploads_dir(self.store, reference.split("/", 1)[0])
        with uploads.first_upload(directory, layers, give_up) as mark:
            pushed = self._push_now(command_for, what, timeout, on_line, stall)
            if pushed.ok:
                mark()
        return pushed

    def _push_now(self, command_for: Callable[[str], list[str]], what: str,
                  timeout: Optional[float], on_line: LineSink,
                  stall: Optional[float]) -> PushOutcome:
        with tempfile.TemporaryDirectory(prefix="aipcc-push-") as scratch:
            digestfile = str(Path(scratch) / "digest")
            tail: list[str] = []

            def line(text: str) -> None:
                tail.append(text)
                del tail[:-STDERR_TAIL_LINES]
                on_line(text)

            code, stopped, limit = self._run(command_for(digestfile), line, timeout, stall)
            if limit == "stall":
                return PushOutcome(ok=False, transient=True,
                                   error=f"{what} made no progress for {stall:g} s (push_stall)")
            if limit:
                return PushOutcome(ok=False, transient=True,
                                   error=f"{what} did not end within {timeout:g} s "
                                         "(push_timeout)")
            if code == 0:
                return PushOutcome(ok=True, digest=Path(digestfile).read_text().strip())
            return PushOutcome(ok=False, stopped=stopped,
                               transient=retry.transient_text("\n".join(tail)),
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
        """Remove the working containers this run's stopped builds left; return their IDs.
        Another run's, live or not, carry another run id and stay."""
        made = runs.owners(self.store, buildah.containers(self.processes) - self._preexisting)
        return buildah.remove_containers(
            self.processes, [cid for cid, run_id in made.items() if run_id == self.run_id])

    def _run(self, command: list[str], on_line: LineSink, timeout: Optional[float] = None,
             stall: Optional[float] = None) -> tuple[int, bool, Optional[str]]:
        """Run to completion; (exit code, whether `stop` ended it, the limit that killed the
        child's group first: "timeout" (TIMEOUT seconds), "stall" (no progress for STALL
        seconds), see `Process.stream`)."""
        on_line("$ " + buildah.shown(command))
        with self._lock:
            if self._stopping:
                return -signal.SIGTERM, True, None
            child = self.processes.start(command)
            self._children.add(child)
        try:
            code, limit = child.stream(on_line, timeout, stall)
        except BaseException:
            # ON_LINE failed (a full disk under the log): the child must not outlive us.
            child.signal_group(signal.SIGKILL)
            raise
        finally:
            with self._lock:
                self._children.discard(child)
                stopped = self._stopping
        # buildah catches SIGTERM and exits 1 after cleaning up, so the code cannot tell.
        return code, stopped, None if stopped else limit


def held_images(skopeo: Skopeo, reference: str, tls_verify: bool) -> Optional[set[str]]:
    """The images (config digests: local image IDs) the registry's REFERENCE holds, every
    platform's for a list; None when the tag does not exist. skopeo reads the auth file
    the run's environment names (REGISTRY_AUTH_FILE), like buildah."""
    ref = f"docker://{reference}"
    digest = skopeo.manifest_digest(ref, tls_verify=tls_verify)
    if digest is None:
        return None
    manifest = skopeo.inspect_raw(ref)
    if "manifests" not in manifest:
        return {str((manifest.get("config") or {}).get("digest", ""))}
    repository = reference.rsplit(":", 1)[0]
    return {str((skopeo.inspect_raw(f"docker://{repository}@{entry.get('digest')}")
                 .get("config") or {}).get("digest", ""))
            for entry in manifest.get("manifests") or []}
