"""add-version and retire as the render stage sees them: the matrix stage edits the file's
text, this renders the edited matrix in memory, and only then are the matrix and the
Containerfiles written. A template that cannot render leaves the matrix file unchanged."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import InputError
from ..fsutil import write_atomic
from ..matrix import EVERYTHING, Filters, ImageSpec, Product
from ..matrix.text_edits import MatrixEdit, NewVersion, Retirement
from ..matrix.text_edits import add_version as edit_add_version
from ..matrix.text_edits import retire as edit_retire
from .containerfiles import RenderedFile, RenderResult, apply, missing_values, render_all

# The demo's wheel list, beside its matrix: `# [VARIANT ...]` sections of `name==version`
# lines (scripts/fetch-wheels and scripts/demo-index read it).
DEMO_WHEELS = "demo-wheels.txt"


@dataclass(frozen=True)
class AddVersionResult:
    matrix_path: str
    accelerator: str
    version: str
    product: Product
    images: tuple[ImageSpec, ...]  # the images the new version adds, in matrix order
    rendered: RenderResult
    # A patch release of a version the matrix had: the version it replaced (its images are
    # the same names, rebuilt); None for a new version
    replaced: Optional[str] = None
    # The pins (`name==version`) of the demo's wheel list (DEMO_WHEELS beside the matrix)
    # for this version: its projects for the accelerator's other releases, at the versions
    # the CUDA component table gives this one; empty when there is no list or no pin known
    demo_pins: tuple[str, ...] = ()

    @property
    def repositories(self) -> tuple[str, ...]:
        """One per new image name: each must exist in the registry before the first push."""
        return tuple(dict.fromkeys(image.repository for image in self.images))


@dataclass(frozen=True)
class RetireResult:
    matrix_path: str
    accelerator: str
    version: str
    eol: Optional[dt.date]
    removed: bool
    images: tuple[ImageSpec, ...]  # the version's images (gone from the matrix when removed)
    rendered: Optional[RenderResult]  # the render after a removal; None otherwise


def add_version(path: str, new: NewVersion) -> AddVersionResult:
    """Add NEW to its accelerator's versions (a patch release of one it has: bump that
    one), write the matrix, render the new (or bumped) images."""
    edit = edit_add_version(path, new)
    rendered = _rendered(edit, Filters(names=tuple(image.key for image in edit.images)))
    write_atomic(edit.path, edit.text)
    return AddVersionResult(
        matrix_path=path, accelerator=edit.accelerator, version=edit.version,
        product=edit.matrix.product, images=edit.images,
        rendered=apply(edit.matrix, rendered, check=False, remove_stale=False),
        replaced=edit.replaced,
        demo_pins=demo_wheel_pins(path, edit.accelerator, edit.version),
    )


def demo_wheel_pins(matrix_path: str, accelerator: str, version: str) -> tuple[str, ...]:
    """The pins the demo's wheel list needs for VERSION of ACCELERATOR: each project it
    pins for another release of ACCELERATOR (a `-cuNN` suffix aside), at the version the
    CUDA component table gives VERSION. Empty without a list, or for a release or an
    accelerator the table does not know."""
    from ..toolkit import components

    listed = Path(matrix_path).resolve().parent / DEMO_WHEELS
    if accelerator != "cuda" or not listed.is_file() or \
            not components.knows_release(version):
        return ()
    projects: set[str] = set()
    ours = False
    for line in listed.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if line.startswith("# ["):
            variants = line[3:].partition("]")[0].split()
            ours = any(variant.startswith(accelerator) for variant in variants)
        elif ours and line and not line.startswith("#"):
            projects.add(_without_cuda_suffix(line.partition("==")[0].strip()))
    pins = []
    for component, pinned in components.release_components(version).items():
        project = components.wheel_project(component, version)
        if _without_cuda_suffix(project) in projects:
            pins.append(f"{project}=={pinned}")
    return tuple(pins)


def _without_cuda_suffix(project: str) -> str:
    """nvidia-cuda-runtime-cu12 -> nvidia-cuda-runtime: the project across CUDA majors."""
    base, dash, suffix = project.lower().rpartition("-")
    return base if dash and suffix.startswith("cu") and suffix[2:].isdigit() else project.lower()


def retire(path: str, retirement: Retirement) -> RetireResult:
    """Set the version's `eol`, or remove it and its generated Containerfiles."""
    edit = edit_retire(path, retirement)
    rendered = _rendered(edit, EVERYTHING) if retirement.remove else None
    write_atomic(edit.path, edit.text)
    return RetireResult(
        matrix_path=path, accelerator=edit.accelerator, version=edit.version,
        eol=retirement.eol, removed=retirement.remove, images=edit.images,
        # Removal is render's own stale-file removal: the version's files left the matrix.
        rendered=apply(edit.matrix, rendered, check=False, remove_stale=True)
        if rendered is not None else None,
    )


def _rendered(edit: MatrixEdit, filters: Filters) -> list[RenderedFile]:
    try:
        return render_all(edit.matrix, filters)
    except InputError as exc:
        missing = missing_values(edit.matrix, filters)
        if missing:
            # Values the CUDA component table would have given for a release it lists.
            raise InputError(
                f"the templates need {', '.join(missing)} for this version, and the CUDA "
                f"component table does not list them ({edit.what}; the matrix is unchanged: "
                f"give {' and '.join(f'{name}=VALUE' for name in missing)})",
                file=exc.file, line=exc.line, column=exc.column, field="vars") from None
        raise InputError(f"{exc.message} ({edit.what}; the matrix is unchanged: give the "
                         f"template variables this version needs)", file=exc.file,
                         line=exc.line, column=exc.column, field="vars") from None
