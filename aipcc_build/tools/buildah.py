"""Every buildah command aipcc-build makes: argument lists (never a shell), run through
the process runner; what buildah's output means (a failed RUN step, the isolation hint, the
FROM lines and image IDs of a build) is read here too; which failures are transient,
in `retry`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import ToolError
from .retry import Retry, storage_race, with_retries
from .runner import Runner

PROGRAM = "buildah"
# `build --from`, `--iidfile`, `push --digestfile` and `--retry` as used here: tested on 1.28.
MIN_VERSION = (1, 28)
STOP_GRACE_SECONDS = 10.0

# A failing RUN step is the template's fault: retrying it would only fail again.
RUN_STEP_FAILED = re.compile(r'building at STEP "RUN ')
# The OCI runtime cannot create containers on hosts with hybrid cgroups; chroot isolation can.
OCI_ISOLATION_UNSUPPORTED = "cgroups in hybrid mode not supported"
ISOLATION_HINT = ("RUN steps cannot use the OCI runtime on this host: set "
                  "BUILDAH_ISOLATION=chroot")
UNCONSUMED_ARGS = re.compile(r"^\[Warning\] one or more build args were not consumed: "
                             r"\[(.*)\]$")

def check_version(runner: Runner) -> str:
    """buildah's version; raise ToolMissing or ToolError when it is missing or too old.
    Call once, before starting concurrent work, so a missing tool is one clear error rather
    than N failures."""
    command = [PROGRAM, "--version"]
    result = runner.run(command)
    match = re.search(r"version (\d+)\.(\d+)\.(\d+)", result.text)
    if not match:
        raise ToolError(command, 0, f"unexpected output: {result.text.strip()}")
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


def diff_ids(runner: Runner, image: str) -> list[str]:
    """The uncompressed digests of IMAGE's layers, bottom first."""
    listed = runner.run([PROGRAM, "inspect", "--type", "image", "--format",
                         "{{range .OCIv1.RootFS.DiffIDs}}{{.}} {{end}}", image]).text
    return listed.split()


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


def replace_list(runner: Runner, name: str, image_ids: Sequence[str]) -> None:
    """Create the manifest list NAME of the local IMAGE_IDS (one per platform), replacing
    a list or an image that holds the name (an earlier run of the same reference)."""
    removed = runner.run([PROGRAM, "manifest", "rm", name], check=False)
    if removed.returncode != 0 and "not a manifest list" in removed.error_text:
        # A single-platform image of an earlier run: `rmi` of a name only untags an image
        # that has others. (Never `rmi` a list: that removes its instances.)
        runner.run([PROGRAM, "rmi", name])
    elif removed.returncode != 0 and "image not known" not in removed.error_text:
        raise ToolError(removed.argv, removed.returncode, removed.error_text)
    runner.run([PROGRAM, "manifest", "create", name, *image_ids])


def push_list_command(name: str, reference: str, digestfile: str, tls_verify: bool,
                      environ: Mapping[str, str]) -> list[str]:
    """Push the manifest list NAME and every image it lists (`--all`) as an OCI index."""
    command = [PROGRAM, "manifest", "push", "--all", "--format", "oci", "--digestfile",
               digestfile, f"--tls-verify={'true' if tls_verify else 'false'}"]
    if environ.get("REGISTRY_AUTH_FILE"):
        command += ["--authfile", environ["REGISTRY_AUTH_FILE"]]
    command += [name, f"docker://{reference}"]
    return command


# Build arguments whose names say they carry a secret: their values never reach a log.
SECRET_NAME = re.compile(r"TOKEN|PASSWORD|PASSWD|SECRET|KEY|AUTH|CREDENTIAL|PRIVATE|CERT|PAT$",
                         re.IGNORECASE)
MASK = "***"


def shown(command: Sequence[str]) -> str:
    """COMMAND as logs show it: values of secret-looking `--build-arg`s masked (pass secrets
    with `--secret`, which buildah never writes into the image or its history)."""
    parts = list(command)
    for index, part in enumerate(parts[:-1]):
        if part == "--build-arg":
            name, equals, _ = parts[index + 1].partition("=")
            if equals and SECRET_NAME.search(name):
                parts[index + 1] = f"{name}={MASK}"
    return " ".join(parts)


# A listing of storage that other processes change meanwhile: tried again at once.
LISTING_RETRY = Retry(attempts=5, first=0.1, cap=1.0)


def containers(runner: Runner) -> set[str]:
    """IDs of every working container in local storage (another process removing one while
    buildah lists them fails the listing: it is listed again)."""
    done = with_retries(lambda: runner.run([PROGRAM, "containers", "--json"]), LISTING_RETRY,
                        lambda attempt, wait, reason: None, cured_by_retry=storage_race)
    listed = json.loads(done.text or "[]")
    return {entry["id"] for entry in listed or []}


@dataclass(frozen=True)
class Storage:
    """Where buildah's containers/storage lives (`buildah info`)."""

    graph_root: Path
    run_root: Path  # on tmpfs: emptied at boot
    driver: str

    def container_state(self, container_id: str) -> Path:
        return (self.graph_root / f"{self.driver}-containers" / container_id / "userdata"
                / "buildah.json")


def storage(runner: Runner) -> Storage:
    store = json.loads(runner.run([PROGRAM, "info"]).text)["store"]
    return Storage(Path(store["GraphRoot"]), Path(store["RunRoot"]), store["GraphDriverName"])


def build_args_of(store: Storage, container_id: str) -> Optional[Mapping[str, str]]:
    """The `--build-arg`s of the `buildah build` that made a working container; None when
    the container is gone (or is not buildah's).

    buildah records them in the container's state file from the moment it creates the
    container; no buildah command shows them (`inspect` leaves them out).
    """
    try:
        state = json.loads(store.container_state(container_id).read_bytes())
    except (OSError, ValueError):
        return None
    args = state.get("Args") if isinstance(state, dict) else None
    return args if isinstance(args, dict) else {}


def without_unconsumed(line: str, names: Sequence[str]) -> Optional[str]:
    """LINE without NAMES in buildah's "build args were not consumed" warning (build args
    the Containerfile never declares but aipcc-build passes on purpose); None when no
    other name is left in it."""
    match = UNCONSUMED_ARGS.match(line)
    if not match:
        return line
    left = [name for name in match.group(1).split() if name not in names]
    return line[:match.start(1)] + " ".join(left) + "]" if left else None


def remove_containers(runner: Runner, container_ids: Sequence[str]) -> list[str]:
    """Remove working containers; the IDs removed (one removed meanwhile by someone else
    is not an error)."""
    if not container_ids:
        return []
    done = runner.run([PROGRAM, "rm", *container_ids], check=False)
    removed = set(done.text.split())
    return [cid for cid in container_ids if cid in removed]


def error_line(tail: Sequence[str]) -> str:
    """buildah's own summary ("Error: ..."), else its last line."""
    for text in reversed(tail):
        if text.startswith("Error: "):
            return text[len("Error: "):]
    return tail[-1] if tail else ""
