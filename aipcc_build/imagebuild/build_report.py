"""The build report (`matrix --report`): the one module that writes it and reads it. It
records what the build stage did, so it lives in that stage; the stages after it (promote,
mirror, compat) and `report/junit` read it from here.

Schema 1 is documented in docs/commands/matrix.md. `matrix --history` reads the build
durations from it; `compat --report`, `promote` and `mirror` what the build made (product,
registry, references, digests, platforms).

It holds one entry per image and platform. The reader gives one entry per image: a
multi-platform image's entries become one, with the manifest list's digest and its
platforms' own entries as `instances`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from ..errors import InputError, without_credentials
from ..fsutil import read_regular, write_atomic

if TYPE_CHECKING:
    from ..matrix.model import Product
    from ..validate.results import DeviceCode, ImageVerdict
    from .outcomes import RunResult

REPORT_SCHEMA = 1


def iso_time(epoch: Optional[float]) -> Optional[str]:
    if epoch is None:
        return None
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="milliseconds")


def _seconds(value: Optional[float]) -> Optional[float]:
    return round(value, 3) if value is not None else None


def data(result: RunResult, build_id: str) -> dict[str, Any]:
    """The --report document (schema 1, documented in docs/commands/matrix.md)."""
    return {
        "schema": REPORT_SCHEMA,
        "build_id": build_id,
        # Where the images were pushed (the {registry} of their references): promote and
        # mirror take their sources from there unless told otherwise.
        "registry": result.registry or None,
        # What the matrix's product was: the version in every tag, and the tags `promote`
        # moves. promote, mirror and compat take it from here, not from a matrix.
        "product": {"name": result.product.name, "version": result.product.version,
                    "moving_tags": list(result.product.moving_tags)}
        if result.product is not None else None,
        "start": iso_time(result.start),
        "end": iso_time(result.end),
        "duration": round(result.end - result.start, 3),
        "stopped_by": result.stopped_by,
        "images": [
            {
                "name": item.image.name,
                "key": item.image.key,
                "kind": item.image.kind,
                "reference": item.image.reference,
                "platform": item.platform or None,
                "status": item.status.value,
                "message": item.message,
                "image_id": item.image_id or None,
                "digest": item.digest or None,  # the platform's instance, when a list
                "list_digest": item.list_digest or None,  # the manifest list joining them
                "start": iso_time(item.start),
                "end": iso_time(item.end),
                "duration": _seconds(item.duration),
                "build_duration": _seconds(item.build_duration),
                "log": item.log,
                "retries": item.retries,
                "toolkits": {name: list(versions) for name, versions in item.toolkits.items()}
                if item.toolkits is not None else None,
                # what the validator read of its GPU code (validate --json's records)
                "gpu_code_files": [{"path": code.path, "sass": list(code.sass),
                                    "ptx": list(code.ptx), "gfx": list(code.gfx)}
                                   for code in item.gpu_code],
                # the validator's verdict and findings: promote attests them for this
                # digest instead of validating it again
                "verdict": verdict_record(item.verdicts[0])
                if len(item.verdicts) == 1 else None,
            }
            for item in result.images
        ],
    }


def text(result: RunResult, build_id: str) -> str:
    return without_credentials(json.dumps(data(result, build_id), indent=2)) + "\n"


def write(result: RunResult, build_id: str, path: str) -> None:
    write_atomic(path, text(result, build_id))


@dataclass(frozen=True)
class ReportEntry:
    """One image of a build report, as far as later commands need it. For a multi-platform
    image: the manifest list's digest, a status "ok" only when every platform's is, and
    each platform's own entry in `instances`."""

    name: str
    kind: str
    key: str
    reference: Optional[str]
    status: Optional[str]
    digest: Optional[str]
    build_duration: Optional[float]
    platform: Optional[str] = None
    instances: tuple[ReportEntry, ...] = ()
    gpu_code: Optional[tuple[DeviceCode, ...]] = None  # what the validator read, per file
    verdict: Optional[ImageVerdict] = None  # the validator's at build, bound to `digest`

    @property
    def verdicts(self) -> Optional[list[ImageVerdict]]:
        """The validator's verdict at build of each platform, each bound to the digest
        the report records for it; None unless the report records every platform's."""
        found = [i.verdict for i in self.instances] if self.instances else [self.verdict]
        return [v for v in found if v is not None] if all(found) else None

    @property
    def platforms(self) -> tuple[str, ...]:
        if self.instances:
            return tuple(i.platform for i in self.instances if i.platform)
        return (self.platform,) if self.platform else ()


@dataclass(frozen=True)
class Release:
    """What a build report says of the build: its build id (`promote` tags releases with
    it), the registry it pushed to and the matrix's product (its version is in every tag;
    each None in a report written before it was recorded), and its images."""

    build_id: Optional[str]
    registry: Optional[str]
    images: list[ReportEntry]
    product: Optional[Product] = None
    path: str = ""  # the file it was read from

    def check_matrix(self, version: str, keys: Optional[set[str]] = None,
                     matrix_path: str = "the matrix") -> None:
        """InputError (naming the report) when a matrix of product VERSION, with the image
        KEYS (when given), is not the one this build was made with."""
        if self.product is not None and self.product.version != version:
            raise InputError(f"the build was made with product version "
                             f"{self.product.version}, {matrix_path} says {version}: give "
                             "the matrix the build was made with", file=self.path)
        unknown = [entry.key for entry in self.images
                   if keys is not None and entry.key not in keys]
        if unknown:
            raise InputError(f"{matrix_path} has no image {unknown[0]} of the build"
                             + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
                             + ": give the matrix the build was made with", file=self.path)


def read(path: Union[str, Path], field: str = "report") -> list[ReportEntry]:
    """The images of a build report; InputError naming the file and FIELD (the option or
    request field the path came from) when it is not one."""
    return read_release(path, field).images


def read_release(path: Union[str, Path], field: str = "report") -> Release:
    """The build a report records, from one read of the file."""
    return _release(_document(str(path), field), str(path))


def report_files(paths: Sequence[Union[str, Path]], field: str = "report") -> list[str]:
    """PATHS with each directory replaced by the JSON files below it (sorted): what CI
    jobs left, one report per image. InputError naming a directory that holds none."""
    files: list[str] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(str(p) for p in path.rglob("*.json") if p.is_file())
            if not found:
                raise InputError("holds no build report (*.json)", file=str(path),
                                 field=field)
            files += found
        else:
            files.append(str(path))
    return list(dict.fromkeys(files))


def read_releases(paths: Sequence[Union[str, Path]], field: str = "report") -> Release:
    """One release out of the reports at PATHS (files, or directories of them): the join
    of the builds CI fanned out, one job and one report per image."""
    files = report_files(paths, field)
    if len(files) == 1:
        return read_release(files[0], field)
    return _release(joined(files, field), ", ".join(files))


# What every report of one release must say alike.
_SHARED = ("build_id", "registry", "product")


def joined(files: Sequence[str], field: str = "report") -> dict[str, Any]:
    """The report documents in FILES as one: their images together, the build's span
    from the first start to the last end. InputError naming the files when they are not
    of one build (product, version, build id, registry) or give one image's platform two
    digests."""
    documents = [(path, _document(path, field)) for path in files]
    first_path, first = documents[0]
    for path, document in documents[1:]:
        for name in _SHARED:
            if document.get(name) != first.get(name):
                raise InputError(
                    f"not one release: {first_path} says {name} {_shown(first.get(name))}, "
                    f"{path} says {_shown(document.get(name))}", file=path, field=name)
    images: list[Any] = []
    seen: dict[tuple[str, str], tuple[str, Any]] = {}
    for path, document in documents:
        for entry in document["images"]:
            if not isinstance(entry, dict):
                images.append(entry)  # refused, with its index, by _release
                continue
            key = (f"{entry.get('kind')}/{entry.get('name')}" if entry.get("key") is None
                   else str(entry.get("key")), str(entry.get("platform")))
            before = seen.setdefault(key, (path, entry))
            if before[1] is entry:
                images.append(entry)
            elif _built(before[1]) != _built(entry):
                raise InputError(f"{key[0]} is in {before[0]} and in {path} with another "
                                 "digest or status: not one build", file=path,
                                 field="images")
    starts = [d["start"] for _, d in documents if isinstance(d.get("start"), str)]
    ends = [d["end"] for _, d in documents if isinstance(d.get("end"), str)]
    merged = {name: first.get(name) for name in ("schema", *_SHARED)}
    merged.update(start=min(starts) if starts else None, end=max(ends) if ends else None,
                  stopped_by=next((d["stopped_by"] for _, d in documents
                                   if d.get("stopped_by")), None),
                  images=images)
    return merged


def _built(entry: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(entry.get(name) for name in ("reference", "status", "digest", "list_digest"))


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(str(value.get(k)) for k in ("name", "version")) or "{}"
    return "none" if value is None else str(value)


def merged_text(files: Sequence[str], field: str = "report") -> str:
    """The joined report, as a file `merge-reports` writes (checked: it reads back)."""
    document = joined(report_files(files, field), field)
    text = without_credentials(json.dumps(document, indent=2)) + "\n"
    _release(json.loads(text), "the merged report")
    return text


def _document(path: str, field: str) -> dict[str, Any]:
    """The parsed report at PATH: a JSON object with an "images" list, of this schema."""
    try:
        data = json.loads(read_regular(path))
    except OSError as exc:
        raise InputError(f"cannot read the build report: {exc.strerror}", file=path,
                         field=field) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"not a JSON build report: {exc}", file=path, field=field) from None
    images = data.get("images") if isinstance(data, dict) else None
    if not isinstance(images, list) or data.get("schema", REPORT_SCHEMA) != REPORT_SCHEMA:
        raise InputError(f"not a build report of schema {REPORT_SCHEMA} (expected an object "
                         "with an \"images\" list)", file=path, field=field)
    return data


def _release(data: dict[str, Any], path: str) -> Release:
    """The build a parsed report document records (PATH names it in errors)."""
    images = data["images"]
    entries: list[ReportEntry] = []
    list_digests: dict[str, Optional[str]] = {}
    for index, entry in enumerate(images):
        key = _text(entry.get("key")) if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or key is None and (
                _text(entry.get("name")) is None or _text(entry.get("kind")) is None):
            raise InputError("each image needs \"key\", or \"name\" and \"kind\"",
                             file=path, field=f"images[{index}]")
        kind, _, name = (key or "").partition("/")
        kind, name = _text(entry.get("kind")) or kind, _text(entry.get("name")) or name
        duration = entry.get("build_duration")
        entries.append(ReportEntry(
            name=name, kind=kind, key=key or f"{kind}/{name}",
            reference=_text(entry.get("reference")), status=_text(entry.get("status")),
            digest=_text(entry.get("digest")),
            build_duration=float(duration) if isinstance(duration, (int, float))
            and not isinstance(duration, bool) else None,
            platform=_text(entry.get("platform")),
            gpu_code=_gpu_code(entry.get("gpu_code_files"), path, f"images[{index}]"),
            verdict=read_verdict(entry.get("verdict"), _text(entry.get("digest")), path,
                                 f"images[{index}].verdict"),
        ))
        if _text(entry.get("list_digest")):
            list_digests[entries[-1].key] = _text(entry.get("list_digest"))
    return Release(_text(data.get("build_id")), _text(data.get("registry")),
                   _by_image(entries, list_digests), _product(data.get("product"), path),
                   path)


def _gpu_code(value: Any, path: str, field: str) -> Optional[tuple[DeviceCode, ...]]:
    """The device code an entry records ("gpu_code_files"); None in a report without it."""
    from ..validate.results import DeviceCode

    if value is None:
        return None

    def names(item: dict[str, Any], key: str) -> tuple[str, ...]:
        found = item.get(key, [])
        if not isinstance(found, list) or not all(_text(a) for a in found):
            raise InputError(f"{key} must be a list of architectures", file=path,
                             field=f"{field}.gpu_code_files")
        return tuple(found)

    if not isinstance(value, list) or not all(
            isinstance(item, dict) and _text(item.get("path")) for item in value):
        raise InputError("gpu_code_files must be a list of {\"path\": ...} records",
                         file=path, field=f"{field}.gpu_code_files")
    return tuple(DeviceCode(item["path"], names(item, "sass"), names(item, "ptx"),
                            names(item, "gfx")) for item in value)


def _product(value: Any, path: str) -> Optional[Product]:
    """The report's "product", held to the matrix's rules: its version and moving tags go
    into the tags promote pushes."""
    if value is None:
        return None
    # Here: most readers never need the matrix model.
    from ..matrix.loader import TAG
    from ..matrix.model import SAFE_NAME, Product

    tags = value.get("moving_tags", []) if isinstance(value, dict) else None
    if not isinstance(value, dict) or _text(value.get("name")) is None or not SAFE_NAME.fullmatch(
            _text(value.get("version")) or "") or not isinstance(tags, list) or not all(
            _text(tag) and _makes_a_tag(tag, TAG) for tag in tags):
        raise InputError('"product" must be {"name": ..., "version": ..., "moving_tags": '
                         '[...]} as the matrix has them (a version and tags of letters, '
                         "digits, '.', '_', '-')", file=path, field="product")
    return Product(value["name"], value["version"], tuple(tags))


def _makes_a_tag(pattern: str, tag: Any) -> bool:
    try:
        return bool(tag.fullmatch(pattern.format(version="1.0", build_id="1")))
    except (KeyError, IndexError, ValueError):
        return False


def _by_image(entries: list[ReportEntry], list_digests: dict[str, Optional[str]]
              ) -> list[ReportEntry]:
    """One entry per image: the platforms of a multi-platform image joined (report order)."""
    groups: dict[str, list[ReportEntry]] = {}
    for entry in entries:
        groups.setdefault(entry.key, []).append(entry)
    result = []
    for key, group in groups.items():
        if len(group) == 1 and key not in list_digests:
            result.append(group[0])
            continue
        status = next((e.status for e in group if e.status != "ok"), "ok")
        result.append(replace(group[0], status=status, digest=list_digests.get(key),
                              build_duration=None, platform=None, instances=tuple(group)))
    return result


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def durations(entries: list[ReportEntry]) -> dict[str, float]:
    """Build time of each image that built fine: what holds a job slot and delays its
    dependents (`matrix --history`)."""
    found = {}
    for entry in entries:
        for build, key in ([(i, f"{entry.key}@{i.platform}") for i in entry.instances]
                           or [(entry, entry.key)]):
            if build.status == "ok" and build.build_duration is not None:
                found[key] = build.build_duration
    return found


def check_writable(path: Union[str, Path], field: str = "report", room: int = 0) -> None:
    """Before a run starts: InputError (naming FIELD) unless a file can be written at PATH,
    so that hours of builds do not end in a report nobody can write; with ROOM, unless that
    many bytes fit there too (a full disk takes an empty file)."""
    import tempfile

    target = Path(path)
    if target.is_dir():
        raise InputError("is a directory, not a file", file=str(target), field=field)
    if target.is_symlink() and not os.path.isdir(os.path.dirname(os.path.realpath(target))):
        # Its target is written where it points, and no directory is made there.
        raise InputError(f"cannot be written: a symbolic link to {os.readlink(target)}, "
                         "whose directory is missing", file=str(target), field=field)
    existing = target.parent
    while not os.path.lexists(existing):
        existing = existing.parent
    if existing.is_symlink() and not existing.exists():
        raise InputError(f"cannot be written: {existing} is a symbolic link to a missing "
                         f"{os.readlink(existing)}", file=str(target), field=field)
    if not existing.is_dir():
        raise InputError(f"cannot be written: {existing} is not a directory", file=str(target),
                         field=field)
    try:
        with tempfile.TemporaryFile(dir=existing) as probe:
            if room:
                probe.write(b"\0" * room)
                probe.flush()
                os.fsync(probe.fileno())
    except OSError as exc:
        raise InputError(f"cannot be written: {exc.strerror}", file=str(target),
                         field=field) from None


_FINDING_FIELDS = ("status", "evidence", "path", "reason", "toolkit", "version", "component",
                   "component_version", "layer_digest", "distribution")
_EXPECTED_FIELDS = ("accelerator", "version", "variant", "source", "index")


def verdict_record(verdict: ImageVerdict) -> dict[str, Any]:
    """The report's record of the validator's VERDICT on one platform (read_verdict reads
    it back)."""
    expected = verdict.expected
    return {
        "platform": verdict.platform,
        "verdict": verdict.verdict,
        "expected": {name: getattr(expected, name) for name in _EXPECTED_FIELDS}
        if expected is not None else None,
        "toolkits": {name: list(found) for name, found in verdict.toolkits.items()},
        "layers": verdict.layers,
        "error": verdict.error,
        "findings": [{name: getattr(f, name) for name in _FINDING_FIELDS}
                     for f in verdict.findings],
    }


def read_verdict(value: Any, digest: Optional[str], path: str, field: str
                 ) -> Optional[ImageVerdict]:
    """The verdict a report records (verdict_record), bound to DIGEST, the digest the
    report records for the same image (None without either); InputError naming FIELD for
    a malformed one."""
    from ..validate.results import Expectation, Finding, ImageVerdict

    if value is None or digest is None:
        return None
    try:
        expected = value["expected"]
        findings = tuple(
            Finding(**{name: _optional(f.get(name), name in _FINDING_FIELDS[:4])
                       for name in _FINDING_FIELDS}) for f in value["findings"])
        verdict = ImageVerdict(
            ref=digest, platform=str(value["platform"]), digest=digest,
            expected=Expectation(**{name: _optional(expected.get(name),
                                                    name == "accelerator")
                                    for name in _EXPECTED_FIELDS})
            if expected is not None else None,
            toolkits={str(k): tuple(str(x) for x in v)
                      for k, v in dict(value["toolkits"]).items()},
            findings=findings, layers=int(value["layers"]),
            error=_optional(value.get("error"), False))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"not a verdict record ({exc})", file=path, field=field) from None
    if verdict.verdict != value.get("verdict"):
        raise InputError(f"the verdict says {value.get('verdict')!r} but its findings make "
                         f"it {verdict.verdict!r}", file=path, field=field)
    return verdict


def _optional(value: Any, required: bool) -> Any:
    if isinstance(value, str) or value is None and not required:
        return value
    raise ValueError(f"{value!r} is not text")
