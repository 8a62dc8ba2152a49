"""The contract between the scheduler and what builds: a `Builder` builds, pushes and
joins platform images in manifest lists (the real one is `buildah_builder.BuildahBuilder`;
unit tests hand in a fake), and the jobs and outcomes that go in and out of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

from ..matrix import ImageSpec


@dataclass(frozen=True)
class BuildJob:
    image: ImageSpec
    # What `buildah build --from` names: the parent's freshly built local image ID, or the
    # reference of a parent this run does not build (--parent-build-id); None: the FROM line.
    from_image: Optional[str]
    build_args: Mapping[str, str]
    labels: Mapping[str, str]
    layers: Optional[bool]
    pull: Optional[str]
    platform: Optional[str]  # buildah's --platform; None: the host's
    # Seconds before the runner kills a `buildah build` / `buildah push` that has not ended
    # (a registry that accepts the connection and never answers); None: no limit.
    build_timeout: Optional[float] = None
    push_timeout: Optional[float] = None
    # Seconds a push may go without progress (no output, no byte sent or read) before it is
    # stopped, like a push past its timeout; None: no limit.
    push_stall: Optional[float] = None
    containerfile: str = ""  # this platform's; "" = the image's
    tag: str = ""  # the local name of what is built; "" = the image's reference


@dataclass(frozen=True)
class ListJob:
    """Join the platform instances of IMAGE in a manifest list named by its reference."""

    image: ImageSpec
    instances: Mapping[str, str]  # platform -> local image ID
    push_timeout: Optional[float] = None
    push_stall: Optional[float] = None


@dataclass(frozen=True)
class ListOutcome:
    ok: bool
    digest: str = ""  # the list's, once pushed
    instance_digests: Mapping[str, str] = field(default_factory=dict)  # platform -> digest
    error: str = ""
    stopped: bool = False
    refused: bool = False  # see PushOutcome
    transient: bool = False  # see PushOutcome


@dataclass(frozen=True)
class BuildOutcome:
    ok: bool
    image_id: str = ""
    error: str = ""
    transient: bool = False  # a pull or network error worth retrying
    stopped: bool = False  # ended by Builder.stop


@dataclass(frozen=True)
class PushOutcome:
    ok: bool
    digest: str = ""
    error: str = ""
    stopped: bool = False
    refused: bool = False  # the tag is another run's: never retried
    # What tools.retry's one table calls transient (a connection, a 5xx, a 429, a push that
    # stalled or ran out of time): only this is retried.
    transient: bool = False


class Builder(Protocol):
    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutcome: ...

    def push(self, job: BuildJob, image_id: str, tls_verify: bool,
             on_line: Callable[[str], None]) -> PushOutcome: ...

    def make_list(self, job: ListJob, on_line: Callable[[str], None]) -> ListOutcome:
        """Create (replace) the local manifest list of JOB's instances."""

    def push_list(self, job: ListJob, tls_verify: bool,
                  on_line: Callable[[str], None]) -> ListOutcome:
        """Push the list and its instances; the digests as the registry has them."""

    def stop(self) -> None:
        """Stop every running child (terminate, then kill after a grace time); the calls
        in progress return `stopped` outcomes and later calls start nothing."""

    def remove_leftovers(self) -> list[str]:
        """Remove what stopped children left behind (working containers)."""
