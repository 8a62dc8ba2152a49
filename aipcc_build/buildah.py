"""Every buildah call aipcc-build makes: argument lists (never a shell), one error type,
and child processes that can be stopped as a whole process group.

`BuildahRunner` is the scheduler's real runner: it turns a scheduled job into
`buildah build` / `buildah push` and, after an interruption, removes the working
containers our killed builds left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .errors import ToolError
from .plan import build_context
from .schedule import BuildJob, BuildOutcome, PushOutcome

PROGRAM = "buildah"
# `build --from`, `--iidfile`, `push --digestfile` and `--retry` as used here: tested on 1.28.
MIN_VERSION = (1, 28)
STOP_GRACE_SECONDS = 10.0
STDERR_TAIL_LINES = 20

# Messages of containers/image and Go's net stack that mean "try again later".
TRANSIENT = re.compile(
    r"connection refused|connection reset by peer|i/o timeout|TLS handshake timeout|"
    r"no such host|temporary failure in name resolution|unexpected EOF|"
    r"50[234] (Bad Gateway|Service Unavailable|Gateway Timeout)|"
    r"429 Too Many Requests|toomanyrequests|request canceled",
    re.IGNORECASE,
)
# A failing RUN step is the template's fault: retrying it would only fail again.
RUN_STEP_FAILED = re.compile(r'building at STEP "RUN ')
# The OCI runtime cannot create containers on hosts with hybrid cgroups; chroot isolation can.
OCI_ISOLATION_UNSUPPORTED = "cgroups in hybrid mode not supported"
ISOLATION_HINT = ("RUN steps cannot use the OCI runtime on this host: set "
                  "BUILDAH_ISOLATION=chroot")
STEP_FROM = re.compile(r"^(?:\[\d+/\d+\] )?STEP \d+/\d+: FROM (\S+)")
STEP_IMAGE = re.compile(r"^--> (?:Using cache )?([0-9a-f]{12,64})$")

LineSink = Callable[[str], None]


def check_version(environ: Mapping[str, str]) -> str:
    """buildah's version; raise ToolError when it is missing or too old. Call once, before
    starting concurrent work, so a missing tool is one clear error rather than N failures."""
    command = [PROGRAM, "--version"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, env=dict(environ),
                                check=False)
    except FileNotFoundError:
        raise ToolError(command, 127, "buildah is not installed (install the buildah "
                                      "package)") from None
    if result.returncode != 0:
        raise ToolError(command, result.returncode, result.stderr)
    match = re.search(r"version (\d+)\.(\d+)\.(\d+)", result.stdout)
    if not match:
        raise ToolError(command, 0, f"unexpected output: {result.stdout.strip()}")
    version = tuple(int(part) for part in match.groups())
    if version[:2] < MIN_VERSION:
        wanted = ".".join(map(str, MIN_VERSION))
        raise ToolError(command, 0, f"buildah {match.group(0)[8:]} is too old: "
                                    f"aipcc-build needs {wanted} or newer")
    return ".".join(map(str, version))


@dataclass(frozen=True)
class BuildRequest:
    containerfile: str
    context: str
    tag: str
    iidfile: str
    build_args: Mapping[str, str]
    labels: Mapping[str, str]
    from_image: Optional[str] = None  # replaces the first FROM (the parent's local image ID)
    layers: Optional[bool] = None  # None: buildah's default (BUILDAH_LAYERS)
    pull: Optional[str] = None
    platform: Optional[str] = None


def build_command(request: BuildRequest, environ: Mapping[str, str]) -> list[str]:
    command = [PROGRAM, "build", "--retry", "0", "--iidfile", request.iidfile]
    if request.layers is not None:
        command.append(f"--layers={'true' if request.layers else 'false'}")
    layers = request.layers if request.layers is not None else \
        environ.get("BUILDAH_LAYERS", "").lower() in ("1", "true")
    if layers:
        # Intermediate containers of a failed layered build stay unless asked (buildah
        # accepts the flag only together with --layers).
        command.append("--force-rm")
    if request.pull is not None:
        command.append(f"--pull={request.pull}")
    if request.platform is not None:
        command += ["--platform", request.platform]
    if request.from_image is not None:
        command += ["--from", request.from_image]
    for name, value in request.build_args.items():
        command += ["--build-arg", f"{name}={value}"]
    for name, value in request.labels.items():
        command += ["--label", f"{name}={value}"]
    command += ["-f", request.containerfile, "-t", request.tag, request.context]
    return command


def push_command(image_id: str, reference: str, digestfile: str, tls_verify: bool,
                 environ: Mapping[str, str]) -> list[str]:
    # Retries are ours (counted and reported), so buildah's own are off. Credentials stay in
    # the auth files buildah reads itself; only the file's path may appear here.
    command = [PROGRAM, "push", "--retry", "0", "--digestfile", digestfile,
               f"--tls-verify={'true' if tls_verify else 'false'}"]
    if environ.get("REGISTRY_AUTH_FILE"):
        command += ["--authfile", environ["REGISTRY_AUTH_FILE"]]
    command += [image_id, f"docker://{reference}"]
    return command


class Child:
    """One buildah process in its own process group (so Ctrl-C on the terminal does not
    reach it and we can stop it together with everything it started)."""

    def __init__(self, command: Sequence[str], environ: Mapping[str, str]) -> None:
        self.command = list(command)
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env=dict(environ), start_new_session=True,
            text=True, errors="replace", bufsize=1,
        )

    def stream(self, on_line: LineSink) -> int:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            on_line(line.rstrip("\n"))
        return self.process.wait()

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def running(self) -> bool:
        return self.process.poll() is None


def run(command: Sequence[str], environ: Mapping[str, str]) -> str:
    """A short buildah call; its stdout, or ToolError with the tail of stderr."""
    result = subprocess.run(list(command), capture_output=True, text=True, env=dict(environ),
                            check=False)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.splitlines()[-STDERR_TAIL_LINES:])
        raise ToolError(command, result.returncode, tail)
    return result.stdout


def container_ids(environ: Mapping[str, str]) -> set[str]:
    listed = json.loads(run([PROGRAM, "containers", "--json"], environ) or "[]")
    return {entry["id"] for entry in listed or []}


def container_origin(container_id: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """(FROM reference as written, image ID) of a working container."""
    info = json.loads(run([PROGRAM, "inspect", "--type", "container", container_id], environ))
    return info.get("FromImage") or "", info.get("FromImageID") or ""


def remove_containers(container_ids: Sequence[str], environ: Mapping[str, str]) -> None:
    if container_ids:
        run([PROGRAM, "rm", *container_ids], environ)


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

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = dict(environ)
        self._lock = threading.Lock()
        self._children: set[Child] = set()
        self._stopping = False
        self._origins = _Origins(set(), set())
        # Containers that existed before we started are never ours to remove.
        self._preexisting = container_ids(self.environ)

    def build(self, job: BuildJob, on_line: LineSink) -> BuildOutcome:
        with tempfile.TemporaryDirectory(prefix="aipcc-build-") as scratch:
            iidfile = str(Path(scratch) / "iid")
            request = BuildRequest(
                containerfile=job.image.containerfile, context=build_context(job.image),
                tag=job.image.reference, iidfile=iidfile, build_args=job.build_args,
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

            code, stopped = self._run(build_command(request, self.environ), line)
            if code == 0:
                return BuildOutcome(ok=True, image_id=Path(iidfile).read_text().strip())
            text = "\n".join(tail)
            error = _error_line(tail) or f"buildah build exited {code}"
            if OCI_ISOLATION_UNSUPPORTED in text:
                error = f"{error} ({ISOLATION_HINT})"
            return BuildOutcome(
                ok=False, stopped=stopped, error=error,
                transient=bool(TRANSIENT.search(text)) and not RUN_STEP_FAILED.search(text),
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

            command = push_command(image_id, job.image.reference, digestfile, tls_verify,
                                   self.environ)
            code, stopped = self._run(command, line)
            if code == 0:
                return PushOutcome(ok=True, digest=Path(digestfile).read_text().strip())
            return PushOutcome(ok=False, stopped=stopped,
                               error=_error_line(tail) or f"buildah push exited {code}")

    def stop(self) -> None:
        """SIGTERM every child's process group, SIGKILL what is left after the grace time."""
        with self._lock:
            self._stopping = True
            children = list(self._children)
        for child in children:
            child.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
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
        for container_id in sorted(container_ids(self.environ) - self._preexisting):
            try:
                reference, image_id = container_origin(container_id, self.environ)
            except ToolError:
                continue  # removed meanwhile by its owner
            with self._lock:
                if self._origins.matches(reference, image_id):
                    ours.append(container_id)
        remove_containers(ours, self.environ)
        return ours

    def _run(self, command: list[str], on_line: LineSink) -> tuple[int, bool]:
        """Run to completion; (exit code, whether `stop` ended it)."""
        on_line("$ " + " ".join(command))
        with self._lock:
            if self._stopping:
                return -signal.SIGTERM, True
            child = Child(command, self.environ)
            self._children.add(child)
        try:
            code = child.stream(on_line)
        finally:
            with self._lock:
                self._children.discard(child)
                stopped = self._stopping
        # buildah catches SIGTERM and exits 1 after cleaning up, so the code cannot tell.
        return code, stopped

    def _learn(self, line: str) -> None:
        step = STEP_FROM.match(line)
        if step:
            self._remember(reference=step.group(1))
        image = STEP_IMAGE.match(line)
        if image:
            self._remember(image_id=image.group(1))

    def _remember(self, reference: str = "", image_id: str = "") -> None:
        with self._lock:
            if reference:
                self._origins.references.add(reference)
            if image_id:
                self._origins.image_ids.add(image_id)


def _error_line(tail: Sequence[str]) -> str:
    """buildah's own summary ("Error: ..."), else its last line."""
    for text in reversed(tail):
        if text.startswith("Error: "):
            return text[len("Error: "):]
    return tail[-1] if tail else ""
