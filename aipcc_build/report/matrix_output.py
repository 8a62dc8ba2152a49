"""Output of the commands that work on the matrix itself: list, render, plan, add-version,
retire."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .console import REGENERATE_COMMAND, document, emit_json, shown_path, table

if TYPE_CHECKING:  # keep jinja2 out of commands that only print
    from ..compat.generated import DerivedFiles, Regenerated
    from ..imagebuild.runs import Cleaned
    from ..matrix import ImageSpec, Matrix
    from ..plan import BuildPlan
    from ..render import RenderResult
    from ..render.version_changes import AddVersionResult, RetireResult


def image_record(image: ImageSpec) -> dict[str, Any]:
    return {
        "name": image.name,
        "key": image.key,
        "kind": image.kind,
        "accelerator": image.accelerator,
        "version": image.version,
        "os": image.os,
        "variant": image.variant,
        "versioned_variant": image.versioned_variant,
        "wheel_index": image.wheel_index,
        "repository": image.repository,
        "tag": image.tag,
        "reference": image.reference,
        "template": image.template,
        "containerfile": image.containerfile,
        "depends_on": image.depends_on,
        "platforms": list(image.platforms),
    }


def image_list(images: Sequence[ImageSpec], as_json: bool, wide: bool = False) -> None:
    if as_json:
        emit_json({"images": [image_record(image) for image in images]})
        return
    table(
        ("NAME", "KIND", "ACCELERATOR", "VERSION", "OS", "PLATFORMS", "VARIANT", "REFERENCE",
         "TEMPLATE"),
        [(i.name, i.kind, i.accelerator, i.version or "-", i.os, ",".join(i.platforms),
          i.variant, i.reference, i.template) for i in images],
        keep=("NAME", "REFERENCE"), wide=wide,
        # The name already says accelerator, version and OS.
        drop=("TEMPLATE", "PLATFORMS", "VARIANT", "ACCELERATOR", "VERSION", "OS", "KIND"),
    )


def _render_changes(result: RenderResult) -> None:
    if result.checked:
        words = {"changed": "drifted", "missing": "missing", "stale": "stale"}
    else:
        words = {"changed": "updated", "missing": "created", "stale": "removed"}
    for change in result.changes:
        sys.stdout.write(f"{words[change.state]}: {shown_path(change.path)}\n")


def render_result(result: RenderResult, what: str = "Containerfile(s)",
                  command: str = "aipcc-build render") -> None:
    """What a run that writes generated files (render, plan --format konflux) did, or
    with --check found; a drift names COMMAND and the one that regenerates everything."""
    _render_changes(result)
    sys.stderr.write(_outcome(result, what, f"run '{command}', or '{REGENERATE_COMMAND}' "
                                            "for every derived file") + "\n")


def _outcome(result: RenderResult, what: str, fix: str) -> str:
    total = len(result.changes) + result.unchanged
    if result.checked:
        verdict = "up to date" if not result.changes else \
            f"{len(result.changes)} file(s) differ: {fix}"
        return f"{total} {what} checked, {verdict}"
    return f"{total} {what}: {len(result.changes)} written or removed, " \
           f"{result.unchanged} unchanged"


def regenerated(derived: Sequence[DerivedFiles]) -> None:
    """`regenerate`: each file it wrote, removed or (checking) found drifted, then a line
    per kind of file."""
    for item in derived:
        _render_changes(item.result)
    for item in derived:
        sys.stderr.write(_outcome(item.result, item.what, f"run '{REGENERATE_COMMAND}'")
                         + "\n")


def build_plan(plan: BuildPlan, as_json: bool) -> None:
    if as_json:
        emit_json({"waves": [[dict(image_record(b.image), key=b.key, platform=b.platform,
                                   needs=list(b.needs)) for b in wave]
                             for wave in plan.waves]})
        return
    for number, wave in enumerate(plan.waves, start=1):
        sys.stdout.write(f"wave {number} ({len(wave)} build(s) can run together):\n")
        for build in wave:
            after = f"  after {', '.join(build.needs)}" if build.needs else ""
            sys.stdout.write(f"  {build.key}  {build.image.reference}{after}\n")


def added_version(result: AddVersionResult, regenerated: Regenerated) -> None:
    """The new images, the files written, and what a person must still do: the registry
    repositories and wheel indexes to request, ready to paste into a ticket, and the demo's
    wheel pins ready to paste. A patch release (a bump) needs no new repository or index."""
    if result.replaced is not None:
        sys.stdout.write(f"Bumped {result.accelerator} {result.replaced} to {result.version}; "
                         "these images rebuild under the same names:\n")
    else:
        sys.stdout.write(f"New images for {result.accelerator} {result.version}:\n")
    for image in result.images:
        sys.stdout.write(f"  {image.key}  {image.reference}\n")
    _render_changes(result.rendered)
    _regenerated_changes(regenerated)
    indexes: dict[str, list[str]] = {}
    for image in result.images:
        if image.wheel_index:
            indexes.setdefault(image.wheel_index, []).append(image.key)
    if result.replaced is None:
        _requests(result, indexes)
    local = [url for url in indexes if _on_this_machine(url)]
    if local:
        variants = " ".join(index_variant(url) for url in local)
        if result.demo_pins:
            where = (f"in place of the pins of its `# [{variants}]` section" if result.replaced
                     else f"as a new section (a section listing every variant needs "
                          f"{variants} too)")
            sys.stdout.write(
                "\nServed on this machine: the demo's wheels of this release, ready to paste "
                f"into matrix/demo-wheels.txt {where}; then scripts/fetch-wheels and "
                f"scripts/demo-index:\n\n# [{variants}]\n"
                + "".join(pin + "\n" for pin in result.demo_pins))
        else:
            sys.stdout.write(
                "\nServed on this machine: publish the variant's wheels there with "
                "`aipcc-build index` (for the demo, add a `# [VARIANT]` section naming "
                f"{', '.join(index_variant(url) for url in local)} to "
                "matrix/demo-wheels.txt).\n")
    verb = f"bumped {result.accelerator} {result.replaced} to" if result.replaced else \
        f"added {result.accelerator}"
    sys.stderr.write(f"{shown_path(result.matrix_path)}: {verb} {result.version}; commit it "
                     "with the files above\n")


def _requests(result: AddVersionResult, indexes: dict[str, list[str]]) -> None:
    """The registry repositories and wheel indexes a new version needs, to paste."""
    sys.stdout.write(
        "\nRegistry repositories to request (paste into a ticket):\n\n"
        f"Please create the following {len(result.repositories)} container image "
        f"repositories. They hold the {result.accelerator} {result.version} images of "
        f"{result.product.name} {result.product.version} and must exist before CI pushes "
        "to them for the first time.\n\n")
    for image in result.images:
        sys.stdout.write(f"- {image.repository}  ({image.kind} image, {result.accelerator} "
                         f"{result.version} on {image.os})\n")
    if indexes:
        sys.stdout.write(
            "\nWheel indexes to request (paste into a ticket):\n\n"
            f"The new images install their Python wheels from these indexes, which must "
            "serve wheels built for "
            f"{result.accelerator} {result.version} before the images build (the build "
            "checks each one answers):\n\n")
        for url, keys in indexes.items():
            sys.stdout.write(f"- {url}  (variant {index_variant(url)}; for "
                             f"{', '.join(keys)})\n")


def index_variant(url: str) -> str:
    """The variant a per-variant index serves: the path part before `simple/`."""
    parts = [part for part in url.rstrip("/").split("/") if part]
    if len(parts) >= 2 and parts[-1] == "simple":
        return parts[-2]
    return parts[-1] if parts else url


def _on_this_machine(url: str) -> bool:
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    return host == "localhost" or host.startswith("127.") or host == "::1"


def retired(result: RetireResult, regenerated: Regenerated) -> None:
    verb = "Removed" if result.removed else f"End of life {result.eol} for"
    sys.stdout.write(f"{verb} {result.accelerator} {result.version}: "
                     f"{len(result.images)} image(s)\n")
    for image in result.images:
        sys.stdout.write(f"  {image.key}  {image.repository}\n")
    if result.rendered is not None:
        _render_changes(result.rendered)
    _regenerated_changes(regenerated)
    if result.removed:
        sys.stdout.write("\nThe registry repositories above are left as they are: request "
                         "their deletion once nobody pulls the images (docs/eol-policy.md)."
                         "\n")
    sys.stderr.write(f"{shown_path(result.matrix_path)}: updated; commit it with the "
                     "files above\n")


def _regenerated_changes(regenerated: Regenerated) -> None:
    for result in (regenerated.konflux, regenerated.compat_page):
        if result is not None:
            _render_changes(result)


def plan_json(matrix: Matrix, build_plan: BuildPlan, changed_since: str | None) -> None:
    from ..plan import build_context, project_path

    emit_json({
        "changed_since": changed_since,
        "images": [
            dict(image_record(b.image),
                 containerfile=project_path(matrix, b.image.containerfile),
                 containerfiles={platform: project_path(matrix, path)
                                 for platform, path in b.image.containerfiles.items()},
                 context=project_path(matrix, build_context(b.image)),
                 needs=list(b.needs), wave=b.wave + 1)
            for b in build_plan.builds
        ],
    })
    if not build_plan.builds:
        sys.stderr.write("the plan selects no image: nothing to build\n")


def ci_document(text: str, build_plan: BuildPlan) -> None:
    """A CI engine's document on stdout; an empty plan is said out loud on stderr."""
    if text:
        document(text if text.endswith("\n") else text + "\n")
    if not build_plan.builds:
        sys.stderr.write("the plan selects no image: nothing to build\n")


def cleaned(result: Cleaned) -> None:
    """What `clean` removed (stderr: nothing here is data)."""
    for container_id, run_id in result.removed:
        sys.stderr.write(f"removed working container {container_id[:12]} (run {run_id})\n")
    for run_id in result.live_runs:
        sys.stderr.write(f"left run {run_id} alone: it is still running\n")
    if not result.removed:
        sys.stderr.write("nothing to clean\n")
