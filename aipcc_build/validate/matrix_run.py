"""`validate --matrix`: the matrix's images, each held to its cell, as a gate that fails
closed. An image that is not there was not checked: the run fails unless the request allows
missing images, and the result always counts what was validated, skipped and failed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

from ..records import record
from ..tools.skopeo import Skopeo
from .pipeline import (
    Outcome,
    Target,
    expectation_from_spec,
    gpu_archs_of,
    gpu_archs_source,
    validate_targets,
)
from .results import Expectation

if TYPE_CHECKING:
    from ..matrix import Filters
    from ..matrix.model import ImageSpec
    from .cache import CacheDir

# Where the matrix's images are looked for.
LOCAL = "local"  # containers-storage, tagged as `matrix` tags what it builds
PUSHED = "pushed"  # the registry, at the references `matrix --push` pushed


@record
class MatrixValidation:
    """One `validate --matrix` run, decided before it starts."""

    matrix_path: str
    build_id: str
    filters: Optional[Filters] = None  # None: every image
    registry: Optional[str] = None  # replaces the matrix's registry
    where: str = LOCAL
    platform: Optional[str] = None  # only this platform (os/arch) of each image
    expect: Optional[Expectation] = None  # replaces each cell's expectation
    allow_missing: bool = False  # an image not found is skipped, not a failure
    gpu_archs: Optional[tuple[str, ...]] = None  # replaces each cell's gpu_archs
    gpu_source: str = "expected"  # where GPU_ARCHS come from, as findings name it


@record
class ValidationRun:
    """The outcomes of one run of `validate`, and whether images not found fail it."""

    outcomes: tuple[Outcome, ...]
    allow_missing: bool = False

    @property
    def validated(self) -> int:
        """Images read and found clean."""
        return sum(1 for o in self.outcomes if not o.skipped and o.exit_code == 0)

    @property
    def skipped(self) -> int:
        """Images not found: nothing of them was checked."""
        return sum(1 for o in self.outcomes if o.skipped)

    @property
    def failed(self) -> int:
        """Images with a violation, or that could not be read."""
        return sum(1 for o in self.outcomes if not o.skipped and o.exit_code != 0)

    @property
    def exit_code(self) -> int:
        """The worst outcome's code, and at least 1 when an image was not found (unless
        missing images are allowed) or when nothing at all was checked: a gate never
        passes by checking nothing."""
        code = max((o.exit_code for o in self.outcomes), default=0)
        if (self.skipped and not self.allow_missing) or self.validated + self.failed == 0:
            return max(code, 1)
        return code


def matrix_targets(request: MatrixValidation) -> list[Target]:
    """Each selected image (one target per platform where it is looked for per platform),
    with what its matrix cell says it must hold."""
    from ..matrix import EVERYTHING, expand, load
    from ..plan import make_plan

    images = expand(load(request.matrix_path), build_id=request.build_id,
                    registry=request.registry, filters=request.filters or EVERYTHING)
    targets = []
    if request.where == PUSHED:
        # The pushed reference: a manifest list holds every platform; `platform` keeps one.
        for image in images:
            targets.append(_matrix_target(f"docker://{image.reference}", image.key, request,
                                          image))
        return targets
    # Local storage: each platform's image as `matrix` tagged it (a list's instances are
    # `reference-arch`).
    for build in make_plan(images).builds:
        if request.platform and build.platform != request.platform:
            continue
        targets.append(_matrix_target(f"containers-storage:{build.tag}", build.key,
                                      request, build.image))
    return targets


def _matrix_target(ref: str, name: str, request: MatrixValidation, image: ImageSpec
                   ) -> Target:
    """IMAGE's target NAME at REF, held to its matrix cell (what the request replaces aside):
    its expectation, allow rules, and the GPU architectures its device code must run on."""
    expected, allow = expectation_from_spec(image)
    if request.gpu_archs is not None:
        archs, source = request.gpu_archs, request.gpu_source
    else:
        archs, source = gpu_archs_of(image), gpu_archs_source(image)
    return Target(ref, request.expect or expected, allow, name=name,
                  only_if_present=True, gpu_archs=archs, gpu_source=source)


def validate_matrix(request: MatrixValidation, *, strict_layers: bool = False,
                    cache_dir: Optional[CacheDir] = None,
                    skopeo: Optional[Skopeo] = None) -> ValidationRun:
    """Validate the images REQUEST selects where it says they are."""
    outcomes = validate_targets(matrix_targets(request), strict_layers=strict_layers,
                                platform=request.platform, cache_dir=cache_dir, skopeo=skopeo)
    return ValidationRun(tuple(outcomes), request.allow_missing)


def validate_references(targets: Sequence[Target], *, strict_layers: bool = False,
                        platform: Optional[str] = None, cache_dir: Optional[CacheDir] = None,
                        skopeo: Optional[Skopeo] = None) -> ValidationRun:
    """Validate images named by reference (`validate REF...`)."""
    return ValidationRun(tuple(validate_targets(
        targets, strict_layers=strict_layers, platform=platform, cache_dir=cache_dir,
        skopeo=skopeo)))
