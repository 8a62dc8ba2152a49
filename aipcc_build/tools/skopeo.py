"""Every call to skopeo: argument lists in, parsed results out, `ToolError` on failure.

Calls go through the process runner, so unit tests hand in a recording fake.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from ..errors import InputError, ToolError
from . import SHORT_TIMEOUT

if TYPE_CHECKING:
    from .runner import Runner

# Phrases skopeo and containers/image print when the image itself does not exist: a bad
# reference is the user's input (exit 2 with a clear message), not a tool breakdown.
_NOT_FOUND = (
    "does not exist",
    "manifest unknown",
    "not found",
    "no such file or directory",
    "identifier is not an image",
    "no such image",
    "name unknown",
)
# The transports a reference may start with (TRANSPORT:REST), as skopeo names them.
TRANSPORTS = ("oci", "oci-archive", "docker-archive", "dir", "docker", "containers-storage")
# An inspect is a short call; a copy moves whole images.
INSPECT_TIMEOUT = SHORT_TIMEOUT
COPY_TIMEOUT = 3600.0


class Skopeo:
    """A thin wrapper over the skopeo executable."""

    def __init__(self, runner: Optional[Runner] = None, executable: str = "skopeo",
                 registries_conf: Optional[str] = None, tls_verify: bool = True,
                 copy_timeout: float = COPY_TIMEOUT,
                 inspect_timeout: float = INSPECT_TIMEOUT) -> None:
        self._runner = runner  # None: the process runner, made at the first call
        self._copy_timeout = copy_timeout
        self._inspect_timeout = inspect_timeout
        self._executable = executable
        # skopeo 1.9 ignores CONTAINERS_REGISTRIES_CONF: a private registry's settings
        # (an insecure test registry, a mirror) must be passed as a global option.
        self._global = ["--registries-conf", registries_conf] if registries_conf else []
        # A registry's TLS certificate is checked unless told otherwise (a plain-HTTP or
        # self-signed test registry).
        self._tls = [] if tls_verify else ["--tls-verify=false"]
        self._src_tls = [] if tls_verify else ["--src-tls-verify=false"]

    def _call(self, args: Sequence[str], ref: Optional[str] = None,
              timeout: Optional[float] = None) -> bytes:
        timeout = self._inspect_timeout if timeout is None else timeout
        argv = [self._executable, *self._global, *args]
        if self._runner is None:
            # Made here: a validation read in place never starts skopeo, and need not load
            # the process runner.
            from .runner import ProcessRunner

            self._runner = ProcessRunner()
        result = self._runner.run(argv, timeout=timeout, check=False)
        if result.returncode != 0:
            stderr = result.error_text
            if ref is not None and any(p in stderr.lower() for p in _NOT_FOUND):
                tail = stderr.strip().splitlines()[-1] if stderr.strip() else ""
                raise InputError(f"cannot read image {ref}: {tail}")
            raise ToolError(argv, result.returncode, stderr)
        return result.stdout

    def inspect_raw(self, ref: str) -> dict[str, Any]:
        """The manifest or image index exactly as stored."""
        return json_object(self._call(["inspect", *self._tls, "--raw", ref], ref), ref)

    def inspect_config(self, ref: str) -> dict[str, Any]:
        """The image configuration (Env, Labels, rootfs.diff_ids)."""
        return json_object(self._call(["inspect", *self._tls, "--config", "--raw", ref], ref),
                           ref)

    def exists(self, ref: str) -> bool:
        """Whether REF names an image (False when it does not exist; other errors raise)."""
        try:
            self.inspect_raw(ref)
        except InputError:
            return False
        return True

    def copy(self, source: str, dest: str, extra: Sequence[str] = ()) -> None:
        """Copy an image; EXTRA are further `skopeo copy` options."""
        self._call(["copy", "--quiet", *self._src_tls, *extra, source, dest], source,
                   timeout=self._copy_timeout)


    def manifest_digest(self, ref: str, *, tls_verify: bool = True,
                        authfile: Optional[str] = None) -> Optional[str]:
        """sha256 of the manifest (or index) bytes as stored: the digest a pull by digest
        gets. None when REF does not exist; other failures raise ToolError."""
        raw = self.manifest(ref, tls_verify=tls_verify, authfile=authfile)
        if raw is None:
            return None
        import hashlib  # here: most commands never hash a manifest

        return "sha256:" + hashlib.sha256(raw).hexdigest()

    def manifest(self, ref: str, *, tls_verify: bool = True,
                 authfile: Optional[str] = None) -> Optional[bytes]:
        """The manifest (or index) bytes REF serves; None when it serves none."""
        args = ["inspect", "--raw", *_tls("--tls-verify", ref, tls_verify),
                *_auth("--authfile", authfile), ref]
        try:
            return self._call(args, ref)
        except InputError:
            return None

    def config_of(self, ref: str, *, tls_verify: bool = True,
                  authfile: Optional[str] = None) -> dict[str, Any]:
        """The image configuration of REF (one platform's manifest)."""
        args = ["inspect", "--config", "--raw", *_tls("--tls-verify", ref, tls_verify),
                *_auth("--authfile", authfile), ref]
        return json_object(self._call(args, ref), ref)

    def copy_all(self, source: str, dest: str, *, tls_verify: bool = True,
                 authfile: Optional[str] = None) -> None:
        """Copy SOURCE with every platform, keeping its digests (`--all --preserve-digests`:
        skopeo refuses rather than rewrite a manifest)."""
        self.copy(source, dest, [
            "--all", "--preserve-digests",
            *_tls("--src-tls-verify", source, tls_verify),
            *_tls("--dest-tls-verify", dest, tls_verify),
            *_auth("--src-authfile", authfile), *_auth("--dest-authfile", authfile),
        ])


def _tls(option: str, ref: str, verify: bool) -> list[str]:
    # Only the docker transport talks TLS; oci:, dir: and the archives reject the option.
    return [f"{option}=false"] if not verify and ref.startswith("docker://") else []


def _auth(option: str, authfile: Optional[str]) -> list[str]:
    # Without it skopeo reads REGISTRY_AUTH_FILE or the default auth.json by itself.
    return [option, authfile] if authfile else []


def json_object(data: bytes, what: str) -> dict[str, Any]:
    """A JSON object (a manifest, an index, a config), or InputError naming WHAT."""
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise InputError(f"{what}: invalid JSON ({exc})") from exc
    except RecursionError as exc:  # arrays or objects nested thousands deep: hostile
        raise InputError(f"{what}: JSON nested deeper than this reader follows") from exc
    if not isinstance(value, dict):
        raise InputError(f"{what}: expected a JSON object")
    return value


def split_transport(ref: str) -> list[str]:
    """`oci:dir:tag` -> ["oci", "dir:tag"]; raises InputError without a transport."""
    transport, sep, rest = ref.partition(":")
    if not sep or not rest:
        raise InputError(f"{ref}: expected TRANSPORT:REFERENCE (oci:, oci-archive:, "
                         "docker-archive:, docker://, containers-storage:)")
    return [transport, rest]
