"""`aipcc-build validate REF...` without click: the common command lines of `validate` read
here, so that re-validating an image whose layers are all cached is not mostly the import
of click and the making of its command (issue 37: a warm validation within 1.2x of
`aipcc-build --version`, which itself is mostly that import). It reads only what the click
command reads the same way (its options in any order, `--opt value` and `--opt=value`,
`--tls-verify=BOOL`) and declines anything else (help, the matrix and its filters,
`--requirements`, the global options, deprecated spellings, `--`, a value click's types
refuse, an option given twice: `fast_lines`): the click command then reads it, and refuses
it, as it always has. `run_references` and `report` are what both call."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Optional

from .fast_lines import DECLINED, read_line

if TYPE_CHECKING:
    from ..validate import Expectation, Outcome
    from ..validate.matrix_run import ValidationRun

# The option naming the GPUs to judge against: coverage findings name it as their source.
GPU_ARCHS_OPTION = "--expect-gpu-archs"
# Options that take a value, by the parameter they set.
_VALUES = {"--expect": "expect", GPU_ARCHS_OPTION: "gpu_archs", "--platform": "platform",
           "--cache-dir": "cache_dir", "--copy-timeout": "copy_timeout",
           "--authfile": "authfile"}
_FLAGS = {"--json": "as_json", "--strict-layers": "strict_layers"}


def expectation_of(value: str) -> Optional[Expectation]:
    """--expect cuda=12.8 | rocm=6.4 | cpu; None when VALUE says none of them."""
    accelerator, _, version = value.partition("=")
    if not accelerator or (accelerator != "cpu" and not version):
        return None
    from ..validate import Expectation

    return Expectation(accelerator, version or None, source="argument")


def expected_archs(value: str) -> tuple[str, ...]:
    """--expect-gpu-archs sm_80,sm_90,gfx942: the GPUs, in their one order; BadArch for
    one misspelt."""
    from ..toolkit.gpu_archs import expected_gpus

    return expected_gpus([a for a in value.split(",") if a.strip()])


def parse(args: list[str]) -> Optional[tuple[dict[str, Any], Optional[str]]]:
    """(the arguments of `run_references`, the --authfile) of ARGS, the words after
    `validate`; None when the click command must read them (with no REF among them: its
    usage error, or a matrix's run)."""
    read = read_line(args, _VALUES, _FLAGS, _converted)
    if read is None:
        return None
    refs, values = read
    from ..tools.skopeo import COPY_TIMEOUT

    return ({"refs": tuple(refs), "expect": values.get("expect"),
             "gpu_archs": values.get("gpu_archs"), "as_json": values.get("as_json", False),
             "strict_layers": values.get("strict_layers", False),
             "platform": values.get("platform"), "cache_dir": values.get("cache_dir"),
             "tls_verify": values.get("tls_verify", True),
             "copy_timeout": values.get("copy_timeout", COPY_TIMEOUT)},
            values.get("authfile"))


def _converted(field: str, value: str) -> Any:
    """VALUE for FIELD as the click command takes it; DECLINED when it does not take it
    as it is."""
    if field == "expect":
        expectation = expectation_of(value)
        return DECLINED if expectation is None else expectation
    if field == "gpu_archs":
        from ..toolkit.gpu_archs import BadArch

        try:
            return expected_archs(value)
        except BadArch:
            return DECLINED
    if field == "copy_timeout":  # click.FloatRange(min=0, min_open=True)
        try:
            seconds = float(value)
        except ValueError:
            return DECLINED
        return seconds if 0 < seconds < float("inf") else DECLINED
    if field in ("cache_dir", "authfile"):  # options.LocalPath: "directory" and "file"
        try:
            mode = os.stat(value).st_mode
        except (OSError, ValueError):
            return value if value != "" and "\0" not in value else DECLINED
        wrong = stat.S_ISREG(mode) if field == "cache_dir" else stat.S_ISDIR(mode)
        return value if not wrong and os.access(value, os.R_OK) else DECLINED
    return value


def run_references(refs: tuple[str, ...], expect: Optional[Expectation],
                   gpu_archs: Optional[tuple[str, ...]], as_json: bool, strict_layers: bool,
                   platform: Optional[str], cache_dir: Optional[str], tls_verify: bool,
                   copy_timeout: float) -> int:
    """Validate the images REFS name, report, and the exit code."""
    from ..tools.skopeo import Skopeo
    from ..validate import Target
    from ..validate.matrix_run import validate_references

    skopeo = Skopeo(tls_verify=tls_verify, copy_timeout=copy_timeout)
    run = validate_references([Target(ref, expect, gpu_archs=gpu_archs or (),
                                      gpu_source=GPU_ARCHS_OPTION) for ref in refs],
                              strict_layers=strict_layers, platform=platform,
                              cache_dir=cache_dir, skopeo=skopeo)
    return report(run, as_json)


def report(run: ValidationRun, as_json: bool) -> int:
    """RUN reported (an unreadable image's error naming the option that fixes it), and
    its exit code."""
    from ..records import replace
    from ..report import validation

    run = replace(run, outcomes=tuple(_naming_option(o) for o in run.outcomes))
    validation.validation(run, as_json)
    return run.exit_code


def _naming_option(outcome: Outcome) -> Outcome:
    """An unreadable image's error with the option that fixes it (--no-tls-verify)."""
    if not outcome.error_field:
        return outcome
    from ..records import replace
    from . import option_of_field

    option = option_of_field(outcome.error_field)
    return replace(outcome, error=f"{outcome.error} ({option})") if option else outcome


@contextmanager
def authfile_exported(authfile: Optional[str]) -> Iterator[None]:
    """REGISTRY_AUTH_FILE set to AUTHFILE while the block runs (skopeo and the registry
    reads take it from there), as the click command's --authfile sets it."""
    if authfile is None:
        yield
        return
    before = os.environ.get("REGISTRY_AUTH_FILE")
    os.environ["REGISTRY_AUTH_FILE"] = authfile
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("REGISTRY_AUTH_FILE", None)
        else:
            os.environ["REGISTRY_AUTH_FILE"] = before


def fast_main(args: list[str]) -> Optional[int]:
    """`validate ARGS...` run without click, its exit code; None when click must read ARGS.
    Errors propagate to `cli.main`, which maps them as for every command."""
    parsed = parse(args)
    if parsed is None:
        return None
    arguments, authfile = parsed
    from .signals import handled

    with handled(), authfile_exported(authfile):
        return run_references(**arguments)
