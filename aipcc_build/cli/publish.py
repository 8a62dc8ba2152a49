"""Commands on released images: promote (by digest to the release repositories) and mirror
(to another registry, or through an archive to a disconnected site); and index, the
per-variant wheel indexes."""

from __future__ import annotations

from typing import Optional

import click

from ..publish import COPY_JOBS
from ..tools.retry import DEFAULT_ATTEMPTS
from ..wheel_indexes import DEFAULT_KEEP
from .options import (
    Context,
    authfile_option,
    cli,
    given_matrix_path,
    make_filters,
    pass_context,
    raw_filters,
    resolved_build_id,
    tls_verify_option,
)
from .verify import Signer, Trust, signed, signing_options, trust_options

TLS = tls_verify_option("Verify registries' TLS certificates (and require HTTPS).")
SOURCE_REGISTRY = click.option("--registry", metavar="HOST/NAMESPACE",
                               help="The registry the build pushed to (default: the "
                                    "one the build report records, else the matrix's).")
REPORTS_HELP = ("A build report of the release, or a directory of them (one per CI job): "
                "repeatable, joined into one release.")
REPORTS = click.option("--report", "report_paths", multiple=True,
                       type=click.Path(exists=True), metavar="FILE|DIR", help=REPORTS_HELP)


@cli.command()
@REPORTS
@click.option("--build-id", metavar="ID",
              help="Without --report: the matrix's images of this build, at the digests "
                   "their tags hold now.")
@click.option("--to", required=True, metavar="HOST/NAMESPACE",
              help="Where the release repositories are (docker://HOST/NAMESPACE too).")
@click.option("--dry-run", is_flag=True, help="Print the plan; copy nothing.")
@click.option("--allow-unreleased-build-id", is_flag=True,
              help="Promote a dev or pull-request build (build id dev, dev-*, on-pr-*, pr-*, "
                   "mr-*) as a release.")
@click.option("--manifest", "manifest_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write the release manifest (what --json prints) to FILE.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the release manifest (schema 1) on stdout.")
@SOURCE_REGISTRY
@TLS
@authfile_option
@signing_options
@pass_context
def promote(context: Context, report_paths: tuple[str, ...], build_id: Optional[str], to: str,
            dry_run: bool, allow_unreleased_build_id: bool, manifest_path: Optional[str],
            as_json: bool, registry: Optional[str], tls_verify: bool,
            authfile: Optional[str], signer: Optional[Signer],
            require_verdict_by: Optional[str]) -> int:
    """Copy every image of a release, by digest and with all its platforms, to the release
    repositories: tagged VERSION-BUILD_ID and the moving tags of the product the reports
    record (a matrix named with --matrix must be of that version); then read every tag
    back. The release: the build reports CI left (one per job, joined; all of one product,
    version and build id), or the matrix's images of --build-id."""
    from ..publish.promote import PromoteRequest
    from ..publish.promote import promote as run
    from ..publish.transfer import registries_answer
    from ..report import copy_progress
    from ..tools import registry_http

    if bool(report_paths) == (build_id is not None):
        raise click.UsageError("give --report (repeatable) or --build-id")
    # The build report says what the build was made with; a matrix named too must agree.
    request = PromoteRequest(
        reports=report_paths, to=to, source_registry=registry,
        matrix_path=context.matrix_path if build_id else given_matrix_path(context),
        build_id=build_id, allow_unreleased_build_id=allow_unreleased_build_id,
        manifest=manifest_path, dry_run=dry_run, tls_verify=tls_verify, authfile=authfile,
        signer=signer, require_verdict_by=require_verdict_by)
    result = run(request, on_event=copy_progress.event_printer(),
                 probe=registry_http.manifest_digest, check=registries_answer)
    copy_progress.promoted(result, as_json)
    signed(result.signing)
    return 0


@cli.command()
@click.option("--to", required=True,
              metavar="HOST/NS|docker://HOST/NS|oci-archive:FILE|dir:PATH",
              help="Where the images go.")
@click.option("--from", "source", metavar="oci-archive:FILE|dir:PATH",
              help="Mirror out of an archive or layout a previous mirror wrote.")
@click.option("--report", "report_paths", multiple=True, type=click.Path(exists=True),
              metavar="FILE|DIR",
              help="The release manifest promote wrote (its --manifest: the released, signed "
                   "images; alone, and the only source --key takes), or " +
                   REPORTS_HELP[0].lower() + REPORTS_HELP[1:])
@click.option("--build-id", metavar="ID",
              help="The release: the matrix's images of this build (with the filters).")
@click.option("--out", default=".", show_default=True, type=click.Path(file_okay=False),
              metavar="DIR", help="Where the ImageDigestMirrorSet and registries.conf go.")
@click.option("--retries", type=click.IntRange(min=1), default=DEFAULT_ATTEMPTS,
              show_default=True,
              help="Attempts per image on connection errors and 5xx answers.")
@click.option("--jobs", type=click.IntRange(min=1), default=COPY_JOBS, show_default=True,
              help="Images copied at once into a registry.")
@click.option("--json", "as_json", is_flag=True,
              help="Print every image's outcome and the files written as JSON (schema 1).")
@SOURCE_REGISTRY
@TLS
@authfile_option
@trust_options
@raw_filters
@pass_context
def mirror(context: Context, accelerators: tuple[str, ...], versions: tuple[str, ...],
           oses: tuple[str, ...], kinds: tuple[str, ...], names: tuple[str, ...],
           to: str, source: Optional[str], report_paths: tuple[str, ...],
           build_id: Optional[str], out: str, retries: int, jobs: int, as_json: bool,
           registry: Optional[str], tls_verify: bool, authfile: Optional[str],
           trust: Trust) -> int:
    """Copy every image of a release, by digest with all platforms and digests kept, to a
    registry, an OCI layout or an archive; skip what is already there; read every image
    back. The mirror configuration names only what the destination was found to serve."""
    from ..publish.mirror import MirrorRelease, mirror_release
    from ..publish.transfer import registries_answer
    from ..report import copy_progress
    from ..tools import registry_http
    from ..tools.retry import Retry

    if sum(bool(x) for x in (source, report_paths, build_id)) != 1:
        raise click.UsageError("give one of --from, --report or --build-id")
    chosen = (accelerators, versions, oses, kinds, names)
    request = MirrorRelease(
        to=to, matrix_path=context.matrix_path,
        matrix_named=given_matrix_path(context) is not None, layout=source,
        reports=report_paths, build_id=resolved_build_id(build_id) if build_id else None,
        filters=make_filters(*chosen) if any(chosen) else None, registry=registry, out=out,
        tls_verify=tls_verify, authfile=authfile, retry=Retry(attempts=retries), jobs=jobs,
        trust=trust)
    result = mirror_release(request, on_event=copy_progress.event_printer(),
                            probe=registry_http.manifest_digest, check=registries_answer)
    copy_progress.mirrored(result, as_json)
    return 1 if result.failed else 0


@cli.command("merge-reports", reads_matrix=False)
@click.argument("reports", nargs=-1, required=True, type=click.Path(exists=True),
                metavar="FILE|DIR...")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              metavar="FILE", help="Where the joined build report goes.")
def merge_reports(reports: tuple[str, ...], output: str) -> int:
    """Join the build reports of one build (one per CI job; directories: every *.json below
    them) into one report, as `matrix --report` writes it: refused (exit 2, naming the
    files) when they are of different products, versions, build ids or registries."""
    from ..fsutil import write_atomic
    from ..imagebuild import build_report

    write_atomic(output, build_report.merged_text(reports, field="reports"))
    return 0


class VariantSource(click.ParamType):
    """VARIANT=DIR or VARIANT=https://.../simple/: (variant, source), refused at parse time
    with one line (exit 2)."""

    name = "VARIANT=DIR|URL"

    def convert(self, value: object, param: Optional[click.Parameter],
                ctx: Optional[click.Context]) -> tuple[str, str]:
        if isinstance(value, tuple):
            return value
        from ..errors import InputError, without_credentials

        variant, sep, source = str(value).partition("=")
        if not sep or not variant or not source or any(c.isspace() for c in variant):
            raise InputError(f"'{without_credentials(str(value))}' is not VARIANT=DIR or "
                             "VARIANT=https://.../simple/", field="wheels")
        return variant, source


@cli.command("index")
@click.argument("root", metavar="ROOT|pulp+https://HOST[:PORT]")
@click.argument("wheels", nargs=-1, type=VariantSource(), metavar="VARIANT=DIR|URL...")
@click.option("--keep", type=click.IntRange(min=0), default=DEFAULT_KEEP, show_default=True,
              help="Older generations (Pulp: repository versions) kept besides the current "
                   "one.")
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option("--rollback", "rollbacks", multiple=True, metavar="VARIANT",
              help="Pulp: point VARIANT's distribution back at the version it served before "
                   "the current one (repeatable; no VARIANT=DIR then).")
@click.option("--profile", metavar="NAME",
              help="Pulp: the pulp-cli profile ([cli-NAME] of ~/.config/pulp/cli.toml) with "
                   "the credentials (default: PULP_CLI_PROFILE or PULP_PROFILE, else [cli]).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_context
def index(context: Context, root: str, wheels: tuple[tuple[str, str], ...], keep: int,
          dry_run: bool, rollbacks: tuple[str, ...], profile: Optional[str],
          as_json: bool) -> int:
    """Publish per-variant wheel indexes laid out as the matrix's wheel_index says. Each
    VARIANT=DIR gives a variant (cuda12.8-ubi9) a directory of its wheels (repeatable), or
    VARIANT=https://.../simple/ an index to mirror (a Pulp distribution). A wheel built for
    another toolkit refuses the whole run (exit 1).

    ROOT a directory: static PEP 503 pages with hashes and PEP 658 metadata; a new
    generation replaces the current one atomically. ROOT pulp+https://HOST: each variant
    is a pulp_python repository whose distribution's base path is the variant's URL; one
    new repository version per changed variant, the distributions switched once all are
    ready. Every variant's index is read again after the switches: one that does not serve
    what the run published (a switch failed, another publisher won) fails the run (exit 1).
    Credentials come from pulp-cli's configuration (--profile) or PULP_USERNAME and
    PULP_PASSWORD, or OAuth2 client credentials (client_id/client_secret, PULP_CLIENT_ID and
    PULP_CLIENT_SECRET)."""
    from ..report import index_summary
    from ..wheel_indexes.destinations import IndexRequest, publish_indexes

    sources: dict[str, tuple[str, ...]] = {}
    for variant, source in wheels:
        sources[variant] = sources.get(variant, ()) + (source,)
    request = IndexRequest(root=root, wheels=sources, dry_run=dry_run, keep=keep,
                           rollback=rollbacks, profile=profile)
    result = publish_indexes(context.load(), request)
    index_summary.published(result, as_json)
    return 1 if result.failed else 0
