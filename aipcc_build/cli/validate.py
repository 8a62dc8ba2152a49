"""`aipcc-build validate`: prove images do not mix toolkit versions or accelerators."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import click

from ..tools.skopeo import COPY_TIMEOUT
from .options import (
    Context,
    cli,
    make_filters,
    pass_context,
    raw_filters,
    reference_options,
    resolved_build_id,
)

if TYPE_CHECKING:
    from ..validate import Expectation


def parse_expect(value: Optional[str]) -> Optional[Expectation]:
    """--expect cuda=12.8 | rocm=6.4 | cpu"""
    if value is None:
        return None
    from ..validate import Expectation

    accelerator, _, version = value.partition("=")
    if not accelerator or (accelerator != "cpu" and not version):
        raise click.BadParameter("expected ACCELERATOR=VERSION (cuda=12.8) or cpu",
                                 param_hint="--expect")
    return Expectation(accelerator, version or None, source="argument")


@cli.command()
@click.argument("refs", nargs=-1, metavar="REF...")
@click.option("--expect", metavar="ACCELERATOR=VERSION",
              help="What the images must hold (cuda=12.8, rocm=6.4, cpu); default: their "
                   "ai.aipcc.* labels, else inferred.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema 1).")
@click.option("--tls-verify", type=click.BOOL, default=True, show_default=True,
              metavar="true|false", help="Verify the registry's TLS certificate (docker://).")
@click.option("--strict-layers", is_flag=True,
              help="Evidence deleted by a later layer is a violation, not a warning.")
@click.option("--platform", metavar="OS/ARCH", help="Only this platform of an image index.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Layer scan cache (env AIPCC_BUILD_CACHE, default ~/.cache/aipcc-build).")
@click.option("--matrix", "matrix_file", metavar="PATH",
              help="Validate every image of this matrix present in local storage.")
@click.option("--copy-timeout", type=click.FloatRange(min=0, min_open=True),
              default=COPY_TIMEOUT, show_default=True, metavar="SECONDS",
              help="Stop the copy of an image that cannot be read in place after this long.")
@click.option("--requirements", "requirements",
              type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
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
             expect: Optional[str],
             as_json: bool, strict_layers: bool, platform: Optional[str],
             cache_dir: Optional[Path], matrix_file: Optional[str], build_id: Optional[str],
             registry: Optional[str], copy_timeout: float, tls_verify: bool = True,
             requirements: Optional[Path] = None, index_url: Optional[str] = None) -> int:
    """Check that images do not mix accelerator toolkit versions.

    REF is any skopeo transport: oci:DIR[:TAG], oci-archive:FILE, docker-archive:FILE,
    docker://REF, containers-storage:REF. Exit 0 clean, 1 violations, 2 unreadable.
    With --requirements, the set pip would install is judged before any build.
    """
    if requirements is not None:
        return _requirements(requirements, expect, index_url, as_json,
                             bool(refs or matrix_file))
    if index_url is not None:
        raise click.UsageError("--index-url goes with --requirements")
    from ..report import validation
    from ..validate import Target, validate_targets

    if matrix_file is None and not refs:
        raise click.UsageError("give at least one REF, or --matrix FILE")
    if matrix_file is not None and refs:
        raise click.UsageError("give REFs or --matrix, not both")
    expectation = parse_expect(expect)
    if matrix_file is not None:
        from ..matrix import expand, load
        from ..plan import make_plan
        from ..validate import expectation_from_spec

        filters = make_filters(accelerators, versions, oses, kinds, names)
        images = expand(load(matrix_file), build_id=resolved_build_id(build_id),
                        registry=registry, filters=filters)
        targets = []
        # Each platform's local image, as `matrix` tagged it (a list's instances are
        # `reference-arch`).
        for build in make_plan(images).builds:
            if platform and build.platform != platform:
                continue
            spec_expect, allow = expectation_from_spec(build.image)
            targets.append(Target(f"containers-storage:{build.tag}",
                                  expectation or spec_expect, allow, name=build.key,
                                  only_if_present=True))
    else:
        targets = [Target(ref, expectation) for ref in refs]
    from ..tools.skopeo import Skopeo

    outcomes = validate_targets(targets, strict_layers=strict_layers, platform=platform,
                                cache_dir=cache_dir, skopeo=Skopeo(tls_verify=tls_verify,
                                                          copy_timeout=copy_timeout))
    validation.validation(outcomes, as_json)
    return max([o.exit_code for o in outcomes] + [0])


def _requirements(path: Path, expect: Optional[str], index_url: Optional[str],
                  as_json: bool, images: bool) -> int:
    from ..report import validation
    from ..validate.requirements import RequirementsRequest, check_requirements

    if images:
        raise click.UsageError("give REFs, --matrix or --requirements, one of them")
    expectation = parse_expect(expect)
    if expectation is None:
        raise click.UsageError("--requirements needs --expect (cuda=12.8, rocm=6.4, cpu)")
    verdict = check_requirements(RequirementsRequest(path, expectation, index_url))
    validation.requirements(verdict, as_json)
    return 0 if verdict.ok else 1
