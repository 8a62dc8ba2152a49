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
    tls_verify_option,
)

if TYPE_CHECKING:
    from ..validate import Expectation, Outcome


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


def _naming_option(outcome: Outcome) -> Outcome:
    """An unreadable image's error with the option that fixes it (--no-tls-verify)."""
    from dataclasses import replace

    from . import option_of_field

    option = option_of_field(outcome.error_field) if outcome.error_field else None
    return replace(outcome, error=f"{outcome.error} ({option})") if option else outcome


@cli.command()
@click.argument("refs", nargs=-1, metavar="REF...")
@click.option("--expect", metavar="ACCELERATOR=VERSION",
              help="What the images must hold (cuda=12.8, rocm=6.4, cpu); default: their "
                   "ai.aipcc.* labels, else inferred.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema 1).")
@tls_verify_option("Verify the registry's TLS certificate and require HTTPS (docker://).")
@click.option("--strict-layers", is_flag=True,
              help="Evidence deleted by a later layer is a violation, not a warning.")
@click.option("--platform", metavar="OS/ARCH", help="Only this platform of an image index.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Layer scan cache (env AIPCC_BUILD_CACHE, default ~/.cache/aipcc-build).")
@click.option("--copy-timeout", type=click.FloatRange(min=0, min_open=True),
              default=COPY_TIMEOUT, show_default=True, metavar="SECONDS",
              help="Stop the copy of an image that cannot be read in place after this long.")
@reference_options
@raw_filters
@pass_context
def validate(context: Context, accelerators: tuple[str, ...], versions: tuple[str, ...],
             oses: tuple[str, ...], kinds: tuple[str, ...], names: tuple[str, ...],
             refs: tuple[str, ...],
             expect: Optional[str],
             as_json: bool, strict_layers: bool, platform: Optional[str],
             cache_dir: Optional[Path], build_id: Optional[str],
             registry: Optional[str], copy_timeout: float, tls_verify: bool = True) -> int:
    """Check that images do not mix accelerator toolkit versions.

    REF is any skopeo transport: oci:DIR[:TAG], oci-archive:FILE, docker-archive:FILE,
    docker://REF, containers-storage:REF; or a bare reference (quay.io/ns/name:tag), read
    as podman does: from local storage when it is there, else from the registry. With no
    REF and a matrix named (--matrix before or after the command, or AIPCC_BUILD_MATRIX):
    every image of the matrix present in local storage. Exit 0 clean, 1 violations, 2
    unreadable.
    """
    from ..report import validation
    from ..validate import Target, validate_targets

    # A matrix named in the environment does not turn REFs away: a CI job may export it.
    matrix_file = context.matrix_path if context.matrix_given and not (
        refs and context.matrix_given == "environment") else None
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
    validation.validation([_naming_option(outcome) for outcome in outcomes], as_json)
    return max([o.exit_code for o in outcomes] + [0])
