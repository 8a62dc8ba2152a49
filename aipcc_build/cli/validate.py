"""`aipcc-build validate`: prove images do not mix toolkit versions or accelerators."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import click

from ..tools.skopeo import COPY_TIMEOUT
from .options import (
    Context,
    LocalPath,
    authfile_for_tools,
    cli,
    make_filters,
    pass_context,
    raw_filters,
    reference_options,
    resolved_build_id,
    tls_verify_option,
)
from .validate_args import (
    GPU_ARCHS_OPTION,
    expectation_of,
    expected_archs,
    report,
    run_references,
)

if TYPE_CHECKING:
    from ..validate import Expectation


def parse_expect(value: Optional[str]) -> Optional[Expectation]:
    """--expect cuda=12.8 | rocm=6.4 | cpu"""
    if value is None:
        return None
    expectation = expectation_of(value)
    if expectation is None:
        raise click.BadParameter("expected ACCELERATOR=VERSION (cuda=12.8) or cpu",
                                 param_hint="--expect")
    return expectation


def parse_gpu_archs(value: Optional[str]) -> Optional[tuple[str, ...]]:
    """--expect-gpu-archs sm_80,sm_90,gfx942"""
    if value is None:
        return None
    from ..toolkit.gpu_archs import BadArch

    try:
        return expected_archs(value)
    except BadArch as exc:
        raise click.BadParameter(str(exc), param_hint=GPU_ARCHS_OPTION) from None


@cli.command()
@click.argument("refs", nargs=-1, metavar="REF...")
@click.option("--expect", metavar="ACCELERATOR=VERSION",
              help="What the images must hold (cuda=12.8, rocm=6.4, cpu); default: their "
                   "ai.aipcc.* labels, else inferred.")
@click.option(GPU_ARCHS_OPTION, "gpu_archs", metavar="ARCH,...",
              help="GPUs the image's compiled device code must run on (sm_80,sm_90,gfx942); "
                   "replaces the matrix entry's gpu_archs.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema 1).")
@tls_verify_option("Verify the registry's TLS certificate and require HTTPS (docker://).")
@authfile_for_tools
@click.option("--strict-layers", is_flag=True,
              help="Evidence deleted by a later layer is a violation, not a warning.")
@click.option("--platform", metavar="OS/ARCH", help="Only this platform of an image index.")
# Paths as strings: a warm validation loads no pathlib (issue 37).
@click.option("--cache-dir", type=LocalPath("directory"), metavar="DIR",
              help="Layer scan cache (env AIPCC_BUILD_CACHE, default ~/.cache/aipcc-build).")
@click.option("--pushed", is_flag=True,
              help="With a matrix: validate the images at the references the build pushed "
                   "(docker://), not those in local storage.")
@click.option("--allow-missing", is_flag=True,
              help="With a matrix: an image not found is skipped, not a failure (the run "
                   "still fails when it checks nothing).")
@click.option("--copy-timeout", type=click.FloatRange(min=0, min_open=True),
              default=COPY_TIMEOUT, show_default=True, metavar="SECONDS",
              help="Stop the copy of an image that cannot be read in place after this long.")
@click.option("--requirements", "requirements",
              type=LocalPath("file"), metavar="FILE",
              help="Judge a requirements set instead of images (with --expect): a "
                   "requirements file (resolved by pip, dry run), pip's --report JSON, "
                   "pylock.toml or uv.lock.")
@click.option("--index-url", metavar="URL",
              help="With --requirements FILE: resolve against this index (default: pip's "
                   "configuration).")
@reference_options
@raw_filters
@pass_context
def validate(context: Context, accelerators: tuple[str, ...], versions: tuple[str, ...],
             oses: tuple[str, ...], kinds: tuple[str, ...], names: tuple[str, ...],
             refs: tuple[str, ...],
             expect: Optional[str], gpu_archs: Optional[str],
             as_json: bool, strict_layers: bool, platform: Optional[str],
             cache_dir: Optional[str], pushed: bool, allow_missing: bool,
             build_id: Optional[str],
             registry: Optional[str], copy_timeout: float, tls_verify: bool = True,
             requirements: Optional[str] = None, index_url: Optional[str] = None) -> int:
    """Check that images do not mix accelerator toolkit versions.

    REF is any skopeo transport: oci:DIR[:TAG], oci-archive:FILE, docker-archive:FILE,
    docker://REF, containers-storage:REF; or a bare reference (quay.io/ns/name:tag), read
    as podman does: from local storage when it is there, else from the registry. With no
    REF and a matrix named (--matrix before or after the command, or AIPCC_BUILD_MATRIX):
    every image of the matrix, in local storage or (--pushed) where the build pushed it.
    Exit 0 clean, 1 violations (or, with a matrix, an image not found), 2 unreadable.
    With --requirements, the set pip would install is judged before any build.
    """
    # A matrix named in the environment does not turn REFs away: a CI job may export it.
    matrix_file = context.matrix_path if context.matrix_given and not (
        refs and context.matrix_given == "environment") else None
    if requirements is not None:  # before the image pipeline is loaded: it reads no image
        return _requirements(requirements, expect, index_url, as_json,
                             bool(refs or matrix_file))
    if index_url is not None:
        raise click.UsageError("--index-url goes with --requirements")
    if matrix_file is None and not refs:
        raise click.UsageError("give at least one REF, or --matrix FILE")
    if matrix_file is not None and refs:
        raise click.UsageError("give REFs or --matrix, not both")
    if matrix_file is None and (pushed or allow_missing):
        raise click.UsageError("--pushed and --allow-missing go with a matrix (--matrix)")
    expectation = parse_expect(expect)
    archs = parse_gpu_archs(gpu_archs)
    if matrix_file is None:
        # What the common lines run without click too (`validate_args`).
        return run_references(refs=refs, expect=expectation, gpu_archs=archs,
                              as_json=as_json, strict_layers=strict_layers,
                              platform=platform, cache_dir=cache_dir, tls_verify=tls_verify,
                              copy_timeout=copy_timeout)
    from ..tools.skopeo import Skopeo
    from ..validate.matrix_run import LOCAL, PUSHED, MatrixValidation, validate_matrix

    request = MatrixValidation(
        matrix_path=matrix_file, build_id=resolved_build_id(build_id),
        filters=make_filters(accelerators, versions, oses, kinds, names),
        registry=registry, where=PUSHED if pushed else LOCAL, platform=platform,
        expect=expectation, allow_missing=allow_missing, gpu_archs=archs,
        gpu_source=GPU_ARCHS_OPTION)
    run = validate_matrix(request, strict_layers=strict_layers, cache_dir=cache_dir,
                          skopeo=Skopeo(tls_verify=tls_verify, copy_timeout=copy_timeout))
    return report(run, as_json)


def _requirements(path: str, expect: Optional[str], index_url: Optional[str],
                  as_json: bool, images: bool) -> int:
    from pathlib import Path

    from ..report import validation
    from ..validate.requirements import RequirementsRequest, check_requirements

    if images:
        raise click.UsageError("give REFs, --matrix or --requirements, one of them")
    expectation = parse_expect(expect)
    if expectation is None:
        raise click.UsageError("--requirements needs --expect (cuda=12.8, rocm=6.4, cpu)")
    verdict = check_requirements(RequirementsRequest(Path(path), expectation, index_url))
    validation.requirements(verdict, as_json)
    return 0 if verdict.ok else 1
