"""Commands on released images: promote (by digest to the release repositories) and mirror
(to another registry, or through an archive to a disconnected site)."""

from __future__ import annotations

from typing import Optional

import click

from .options import Context, cli, make_filters, pass_context, raw_filters, resolved_build_id

TLS = click.option("--tls-verify/--no-tls-verify", default=True, show_default=True,
                   help="Verify registries' TLS certificates (and require HTTPS).")
AUTHFILE = click.option("--authfile", type=click.Path(dir_okay=False), metavar="FILE",
                        help="Containers auth file (default: REGISTRY_AUTH_FILE, or "
                             "skopeo's default auth.json).")
SOURCE_REGISTRY = click.option("--registry", metavar="HOST/NAMESPACE",
                               help="The registry the build pushed to (default: the "
                                    "one the build report records, else the matrix's).")


@cli.command()
@click.option("--report", "report_path", required=True, type=click.Path(dir_okay=False),
              metavar="FILE", help="The build report of the build to release.")
@click.option("--to", required=True, metavar="REGISTRY/NAMESPACE",
              help="Where the release repositories are.")
@click.option("--dry-run", is_flag=True, help="Print the plan; copy nothing.")
@SOURCE_REGISTRY
@TLS
@AUTHFILE
@pass_context
def promote(context: Context, report_path: str, to: str, dry_run: bool,
            registry: Optional[str], tls_verify: bool, authfile: Optional[str]) -> int:
    """Copy every image the build report marks ok, by digest and with all its platforms,
    to the release repositories: tagged VERSION-BUILD_ID and the matrix's moving tags."""
    from ..publish.promote import PromoteRequest
    from ..publish.promote import promote as run
    from ..publish.transfer import registries_answer
    from ..report import copy_progress
    from ..tools import registry_http

    matrix = context.load()
    request = PromoteRequest(report=report_path, to=to, source_registry=registry,
                             matrix_registry=matrix.registry, product=matrix.product,
                             dry_run=dry_run, tls_verify=tls_verify, authfile=authfile)
    copy_progress.promoted(run(request, on_event=copy_progress.event_printer(),
                               probe=registry_http.manifest_digest, check=registries_answer))
    return 0


@cli.command()
@click.option("--to", required=True, metavar="docker://HOST/NS|oci-archive:FILE|dir:PATH",
              help="Where the images go.")
@click.option("--from", "source", metavar="oci-archive:FILE|dir:PATH",
              help="Mirror out of an archive or layout a previous mirror wrote.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="The release: the images this build report marks ok.")
@click.option("--build-id", metavar="ID",
              help="The release: the matrix's images of this build (with the filters).")
@click.option("--out", default=".", show_default=True, type=click.Path(file_okay=False),
              metavar="DIR", help="Where the ImageDigestMirrorSet and registries.conf go.")
@click.option("--retries", type=click.IntRange(min=1), default=5, show_default=True,
              help="Attempts per image on connection errors and 5xx answers.")
@click.option("--jobs", type=click.IntRange(min=1), default=4, show_default=True,
              help="Images copied at once into a registry.")
@SOURCE_REGISTRY
@TLS
@AUTHFILE
@raw_filters
@pass_context
def mirror(context: Context, accelerators: tuple[str, ...], versions: tuple[str, ...],
           oses: tuple[str, ...], kinds: tuple[str, ...], names: tuple[str, ...],
           to: str, source: Optional[str],
           report_path: Optional[str], build_id: Optional[str], out: str, retries: int, jobs: int,
           registry: Optional[str], tls_verify: bool, authfile: Optional[str]) -> int:
    """Copy every image of a release, by digest with all platforms and digests kept, to a
    registry, an OCI layout or an archive; skip what is already there."""
    from ..imagebuild import build_report
    from ..publish import mirror as core
    from ..report import copy_progress
    from ..tools import registry_http
    from ..tools.retry import Retry
    from ..tools.skopeo import Skopeo

    if sum(x is not None for x in (source, report_path, build_id)) != 1:
        raise click.UsageError("give one of --from, --report or --build-id")
    core.destination(to)
    temporary = None
    try:
        if source is not None:
            images, source_registry, temporary = core.images_from_layout(source)
        else:
            from ..matrix import EVERYTHING, expand

            filters = make_filters(accelerators, versions, oses, kinds, names)
            if report_path is not None:
                release = build_report.read_release(report_path)
                # Where the build pushed, as its report records it, unless told otherwise.
                source_registry = registry or release.registry or context.load().registry
                entries = release.images
                if filters != EVERYTHING:  # the filters pick the report's images by key
                    keys = {s.key for s in expand(context.load(), build_id="any",
                                                  registry=registry, filters=filters)}
                    entries = [entry for entry in entries if entry.key in keys]
                images = core.images_from_report(entries, source_registry)
            else:
                source_registry = registry or context.load().registry
                specs = expand(context.load(), build_id=resolved_build_id(build_id),
                               registry=registry, filters=filters)
                images = core.images_from_references(
                    [(s.key, s.reference) for s in specs], source_registry, Skopeo(),
                    tls_verify=tls_verify, authfile=authfile)
        request = core.MirrorRequest(images=tuple(images), to=to,
                                     source_registry=source_registry, out=out,
                                     tls_verify=tls_verify, authfile=authfile,
                                     retry=Retry(attempts=retries), jobs=jobs)
        result = core.mirror(request, on_event=copy_progress.event_printer(),
                             probe=registry_http.manifest_digest)
    finally:
        if temporary is not None:
            from ..publish import layout

            layout.remove(temporary)
    copy_progress.mirrored(result)
    return 1 if result.failed else 0


@cli.command("index")
@click.argument("root", metavar="ROOT|pulp+https://HOST[:PORT]")
@click.argument("wheels", nargs=-1, metavar="VARIANT=DIR...")
@click.option("--keep", type=click.IntRange(min=0), default=3, show_default=True,
              help="Older generations (Pulp: repository versions) kept besides the current "
                   "one.")
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option("--rollback", "rollbacks", multiple=True, metavar="VARIANT",
              help="Pulp: point VARIANT's distribution back at its previous version "
                   "(repeatable; no VARIANT=DIR then).")
@click.option("--profile", metavar="NAME",
              help="Pulp: the pulp-cli profile ([cli-NAME] of ~/.config/pulp/cli.toml) with "
                   "the credentials (default: PULP_CLI_PROFILE or PULP_PROFILE, else [cli]).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_context
def index(context: Context, root: str, wheels: tuple[str, ...], keep: int, dry_run: bool,
          rollbacks: tuple[str, ...], profile: Optional[str], as_json: bool) -> int:
    """Publish per-variant wheel indexes laid out as the matrix's wheel_index says. Each
    VARIANT=DIR gives a variant (cuda12.8-ubi9) a directory of its wheels (repeatable), or
    VARIANT=https://.../simple/ an index to mirror (a Pulp distribution). A wheel built for
    another toolkit refuses the whole run (exit 1).

    ROOT a directory: static PEP 503 pages with hashes and PEP 658 metadata; a new
    generation replaces the current one atomically. ROOT pulp+https://HOST: each variant
    is a pulp_python repository whose distribution's base path is the variant's URL; one
    new repository version per changed variant, the distributions switched once all are
    ready. Credentials come from pulp-cli's configuration (--profile) or PULP_USERNAME and
    PULP_PASSWORD, or OAuth2 client credentials (client_id/client_secret, PULP_CLIENT_ID and
    PULP_CLIENT_SECRET)."""
    from ..report import index_summary

    pulp = root.startswith("pulp+")
    if rollbacks and (wheels or not pulp or dry_run):
        raise click.UsageError("--rollback takes a pulp+https:// server and no VARIANT=DIR "
                               "nor --dry-run")
    if not rollbacks and not wheels:
        raise click.UsageError("give at least one VARIANT=DIR")
    if profile is not None and not pulp:
        raise click.UsageError("--profile is for a pulp+https:// server")
    directories: dict[str, tuple[str, ...]] = {}
    for item in wheels:
        variant, sep, directory = item.partition("=")
        if not sep or not variant or not directory:
            raise click.BadParameter(f"'{item}' is not VARIANT=DIR", param_hint="VARIANT=DIR")
        directories[variant] = directories.get(variant, ()) + (directory,)
    from ..publish import index_source

    if pulp:
        from ..publish import pulp as core
        from ..publish.pulp_config import server

        target = server(root, profile)
        if rollbacks:
            index_summary.rolled_back(core.rollback(context.load(), target, rollbacks), as_json)
            return 0
        with index_source.local(directories) as local:
            result = core.publish(context.load(), core.PulpRequest(
                server=target, wheels=local, dry_run=dry_run, keep=keep))
    else:
        from ..publish.wheel_index import IndexRequest, publish

        with index_source.local(directories) as local:
            result = publish(context.load(), IndexRequest(root=root, wheels=local,
                                                          dry_run=dry_run, keep=keep))
    index_summary.published(result, as_json)
    return 1 if result.refusals else 0
