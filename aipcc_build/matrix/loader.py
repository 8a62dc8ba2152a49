"""Load a matrix file into the typed model and expand it into image specs.

Every error names the file, line, column and field: the loader walks the node tree with
`positioned_yaml`'s reader.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Optional

import yaml

from .. import positioned_yaml
from ..errors import InputError
from ..fsutil import read_regular
from ..image_index_settings import INDEX_AUTH_MODES
from ..positioned_yaml import shown
from ..suggest import did_you_mean
from ..toolkit.gpu_archs import BadArch, declared_arch
from . import shape
from .expand import expand_all
from .model import (
    CLONABLE,
    COMMITTED_KINDS,
    DEFAULT_BRANCH,
    DEFAULT_CI_IMAGE,
    SAFE_NAME,
    SAFE_PATH,
    SAFE_PATH_WHAT,
    SAFE_REFERENCE,
    Accelerator,
    AllowRule,
    CiSettings,
    Exclude,
    ImageKind,
    Matrix,
    OsSpec,
    Product,
    ToolkitVersion,
    Where,
    default_bundles,
    parse_quantity,
)
from .platforms import KNOWN as KNOWN_PLATFORMS
from .platforms import unknown_hint

SCHEMA = 1
VERSION = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?")
# A Tekton bundle: an image reference, pinned by digest or not.
BOOLEAN = re.compile(r"true|false")
SOURCE_URL = re.compile(CLONABLE.pattern + r"[A-Za-z0-9._~:/@%+-]+")
BUNDLE_REFERENCE = re.compile(r"[A-Za-z0-9._:/-]+(@sha256:[0-9a-f]{64})?")
DRIVER = re.compile(r"[0-9]+(\.[0-9]+){1,2}")


class _Reader(positioned_yaml.Reader):
    """The positioned reader with the matrix's own kinds of value."""

    def where(self, node: yaml.Node) -> Where:
        return Where(self.path, node.start_mark.line + 1, node.start_mark.column + 1)

    def name(self, node: yaml.Node, field: str) -> str:
        return self.scalar(node, field, SAFE_NAME,
                           "a valid name (letters, digits, '.', '_', '-' only)")

    def number(self, node: yaml.Node, field: str) -> float:
        text = self.scalar(node, field)
        amount = parse_quantity(text)
        if amount is None:
            raise self.error(node, field, f"'{text}' is not a quantity (like 2, 0.5 or 4Gi)")
        return amount


# A template variable is rendered into a Containerfile, where a line break starts a new
# instruction (`RUN ...`): its value must be one line.
ONE_LINE = "a template variable's value goes into a Containerfile: it must be one line"


def several_lines(value: object) -> bool:
    """Whether VALUE (or a string inside it) holds a line break, as str.splitlines sees one."""
    if isinstance(value, str):
        return len(value.splitlines()) > 1 or value != "".join(value.splitlines())
    if isinstance(value, dict):
        return any(several_lines(k) or several_lines(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(several_lines(item) for item in value)
    return False


def canonical_version(version: str) -> str:
    """12.08.1 -> 12.8.1: the one spelling a version has in names and tags."""
    return ".".join(str(int(part)) for part in version.split("."))


# What a registry accepts as a tag.
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def _pattern(reader: _Reader, node: yaml.Node, field: str, allowed: Iterable[str]) -> str:
    """A str.format pattern that may only use the given placeholders."""
    text = reader.scalar(node, field)
    names = set(allowed)
    used = {m.group(1) for m in re.finditer(r"{([^{}]*)}", text)}
    unknown = sorted(used - names)
    if unknown:
        raise reader.error(node, field, f"unknown placeholder '{{{unknown[0]}}}' "
                           f"(allowed: {', '.join('{' + n + '}' for n in sorted(names))})")
    return text


def load(path: str | os.PathLike[str]) -> Matrix:
    """Parse and validate a matrix file; raise InputError at the first problem."""
    file = str(path)
    try:
        data = read_regular(file)
    except OSError as exc:
        raise InputError(f"cannot read the matrix file: {exc.strerror}", file=file) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", file=file,
                         line=line, column=column) from None
    return parse(text, file)


def parse(text: str, file: str) -> Matrix:
    """Validate matrix TEXT as if it were the file FILE (paths resolve from its directory).

    `add-version` and `retire` check an edited matrix with this before they replace the file.
    """
    try:
        return _parse(text, file)
    except RecursionError:
        raise InputError("nested too deeply to be a matrix", file=file) from None


def _parse(text: str, file: str) -> Matrix:
    reader = _Reader(file)
    root = positioned_yaml.compose(text, file)
    if root is None:
        raise InputError("the matrix file is empty", file=file)

    top = reader.mapping(
        root, "",
        allowed=("schema", "product", "registry", "templates", "output", "platforms", "os",
                 "accelerators", "images", "exclude", "wheel_index", "wheel_index_auth",
                 "ci"),
        required=("schema", "product", "registry", "os", "accelerators", "images"),
    )
    schema_node = top["schema"][1]
    if reader.scalar(schema_node, "schema") != str(SCHEMA):
        raise reader.error(schema_node, "schema", f"unsupported schema (this tool reads {SCHEMA})")

    product_fields = reader.mapping(top["product"][1], "product",
                                    ("name", "version", "moving_tags"), ("name", "version"))
    moving_tags: list[str] = []
    if "moving_tags" in product_fields:
        items = reader.sequence(product_fields["moving_tags"][1], "product.moving_tags")
        for index, node in enumerate(items):
            field = f"product.moving_tags[{index}]"
            tag = _pattern(reader, node, field, ("version", "build_id"))
            sample = tag.format(version="1.0", build_id="1")
            if not TAG.fullmatch(sample):
                raise reader.error(node, field, f"'{tag}' does not make a valid tag "
                                   "(letters, digits, '.', '_', '-'; 128 at most)")
            moving_tags.append(tag)
    product = Product(
        name=reader.name(product_fields["name"][1], "product.name"),
        version=reader.name(product_fields["version"][1], "product.version"),
        moving_tags=tuple(moving_tags),
    )
    registry = reader.scalar(top["registry"][1], "registry", SAFE_REFERENCE,
                             "a registry reference (host[:port]/namespace)")

    base = Path(file).resolve().parent
    templates = _directory(reader, top, "templates", base, "../templates")
    output = _directory(reader, top, "output", base, "../containerfiles")

    platforms = _platforms(reader, top, "platforms", "platforms")
    oses: dict[str, OsSpec] = {}
    for name, key_node, value in reader.entries(top[shape.OS][1], shape.OS):
        reader.name(key_node, f"os.{name}")
        oses[name] = _os(reader, name, value)

    accelerators = {
        name: _accelerator(reader, name, key_node, value)
        for name, key_node, value in reader.entries(top[shape.ACCELERATORS][1],
                                                    shape.ACCELERATORS)
    }
    wheel_index = None
    if "wheel_index" in top:
        wheel_index = _wheel_index(reader, top["wheel_index"][1], "wheel_index")
    _check_unversioned_indexes(reader, top, accelerators)
    wheel_index_auth = _index_auth(reader, top, "wheel_index_auth")
    _check_auth_has_index(reader, top, accelerators, wheel_index)

    images: dict[str, ImageKind] = {}
    for kind, key_node, value in reader.entries(top[shape.IMAGES][1], shape.IMAGES):
        images[kind] = _image_kind(reader, kind, key_node, value, oses, templates, base)
    _check_from_images(reader, top["images"][1], images)

    excludes: tuple[Exclude, ...] = ()
    if "exclude" in top:
        excludes = tuple(
            _exclude(reader, node, f"exclude[{i}]")
            for i, node in enumerate(reader.sequence(top["exclude"][1], "exclude"))
        )

    matrix = Matrix(
        path=file, schema=SCHEMA, product=product, registry=registry,
        templates=str(templates), output=str(output), os=oses,
        accelerators=accelerators, images=images, exclude=excludes, platforms=platforms,
        wheel_index=wheel_index, wheel_index_auth=wheel_index_auth or "none",
        ci=_ci(reader, top["ci"][1]) if "ci" in top else CiSettings(),
        locations=_locations(reader, top),
    )
    # Expanding once here surfaces name clashes and bad patterns as load errors.
    expand_all(matrix, build_id="dev", registry=None)
    return matrix


def _ci(reader: _Reader, node: yaml.Node) -> CiSettings:
    fields = reader.mapping(node, "ci", ("fetch", "image", "bundles", "hermetic",
                                         "prefetch_input", "branch", "source_url",
                                         "committed"))
    known = default_bundles()
    bundles = dict(known)
    if "bundles" in fields:
        for task, key_node, value in reader.entries(fields["bundles"][1], "ci.bundles"):
            if task not in known:
                raise reader.error(key_node, f"ci.bundles.{task}", f"unknown task '{task}' "
                                   f"(expected one of: {', '.join(known)})")
            bundles[task] = reader.scalar(value, f"ci.bundles.{task}", BUNDLE_REFERENCE,
                                          "an image reference (with an optional @sha256:)")

    def text(name: str, default: str, pattern: Optional[re.Pattern[str]] = None,
             what: str = "") -> str:
        return reader.scalar(fields[name][1], f"ci.{name}", pattern, what) \
            if name in fields else default

    hermetic = text("hermetic", "false", BOOLEAN, "true or false") == "true"
    prefetch_input = text("prefetch_input", "")
    if prefetch_input:
        try:
            json.loads(prefetch_input)
        except ValueError as exc:
            raise reader.error(fields["prefetch_input"][1], "ci.prefetch_input",
                               f"not JSON ({exc}): Konflux's prefetch-input is JSON, e.g. "
                               '\'[{"type": "pip", "path": "."}]\'') from None
    if hermetic and not prefetch_input:
        raise reader.error(fields["hermetic"][1], "ci.hermetic",
                           "a hermetic build has no network: give ci.prefetch_input, what "
                           "the prefetch task fetches before it (pip requirements, RPMs)")
    committed: list[str] = []
    if "committed" in fields:
        for index, node in enumerate(reader.sequence(fields["committed"][1], "ci.committed")):
            field = f"ci.committed[{index}]"
            kind = reader.scalar(node, field)
            if kind not in COMMITTED_KINDS:
                raise reader.error(node, field, f"unknown kind '{shown(kind)}'"
                                   + did_you_mean(kind, COMMITTED_KINDS,
                                                  listing="expected one of"))
            if kind in committed:
                raise reader.error(node, field, f"'{kind}' is listed twice")
            committed.append(kind)
    return CiSettings(
        fetch=text("fetch", "") or None,
        image=text("image", DEFAULT_CI_IMAGE, SAFE_REFERENCE, "an image reference"),
        bundles=bundles,
        hermetic=hermetic,
        prefetch_input=prefetch_input,
        branch=text("branch", DEFAULT_BRANCH, SAFE_REFERENCE, "a branch name"),
        source_url=text("source_url", "", SOURCE_URL, "a URL a build cluster can clone "
                        "(https://, ssh://, git://, user@host:path)") or None,
        committed=tuple(committed),
    )


def _locations(reader: _Reader, top: Mapping[str, tuple[yaml.Node, yaml.Node]]
               ) -> dict[str, Where]:
    """Where the fields that expansion can still find fault with are written."""
    found: dict[str, Where] = {}
    for field_name in ("platforms", "wheel_index"):
        if field_name in top:
            found[field_name] = reader.where(top[field_name][1])
    for section, fields in (("images", ("from_image", "repository", "platforms")),
                            ("accelerators", ("variant", "wheel_index")),
                            ("os", ("from", "platforms"))):
        for key_node, value in top[section][1].value:
            name = f"{section}.{key_node.value}"
            found[name] = reader.where(value)
            if isinstance(value, yaml.MappingNode):
                for field_key, field_value in value.value:
                    if field_key.value in fields:
                        found[f"{name}.{field_key.value}"] = reader.where(field_value)
    return found


def _platforms(reader: _Reader, fields: Mapping[str, tuple[yaml.Node, yaml.Node]], key: str,
               field: str) -> tuple[str, ...]:
    """A `platforms` list of OCI platform names; () when not written."""
    if key not in fields:
        return ()
    names: list[str] = []
    items = reader.sequence(fields[key][1], field)
    if not items:
        raise reader.error(fields[key][1], field, "an empty platform list builds nothing "
                           "(leave the key out to allow every platform)")
    for index, node in enumerate(items):
        name = _platform(reader, node, f"{field}[{index}]")
        if name in names:
            raise reader.error(node, f"{field}[{index}]", f"'{name}' is listed twice")
        names.append(name)
    return tuple(names)


def _platform(reader: _Reader, node: yaml.Node, field: str) -> str:
    name = reader.scalar(node, field)
    if name not in KNOWN_PLATFORMS:
        raise reader.error(node, field,
                           f"unknown platform '{shown(name)}'{unknown_hint(name)}")
    return name


def _os(reader: _Reader, name: str, value: yaml.Node) -> OsSpec:
    """`from` is one reference (a manifest list, or an image for one platform) or a mapping
    platform -> reference, each platform with its own base image."""
    field = f"os.{name}"
    fields = reader.mapping(value, field, ("from", "platforms"), ("from",))
    platforms = _platforms(reader, fields, "platforms", f"{field}.platforms")
    from_node = fields["from"][1]
    if not isinstance(from_node, yaml.MappingNode):
        return OsSpec(name, reader.scalar(from_node, f"{field}.from", SAFE_REFERENCE,
                                          "an image reference"), platforms=platforms)
    froms: dict[str, str] = {}
    for platform, key_node, ref_node in reader.entries(from_node, f"{field}.from"):
        _platform(reader, key_node, f"{field}.from.{platform}")
        froms[platform] = reader.scalar(ref_node, f"{field}.from.{platform}", SAFE_REFERENCE,
                                        "an image reference")
    if not froms:
        raise reader.error(from_node, f"{field}.from", "expected a base image reference")
    return OsSpec(name, next(iter(froms.values())), platform_froms=froms,
                  platforms=platforms or tuple(froms))


def _directory(reader: _Reader, top: Mapping[str, tuple[yaml.Node, yaml.Node]], key: str,
               base: Path, default: str) -> Path:
    if key not in top:
        return (base / default).resolve()
    text = reader.scalar(top[key][1], key, SAFE_PATH, SAFE_PATH_WHAT)
    return (base / text).resolve()


def _accelerator(reader: _Reader, name: str, key_node: yaml.Node,
                 value: yaml.Node) -> Accelerator:
    field = f"accelerators.{name}"
    reader.name(key_node, field)
    if isinstance(value, yaml.ScalarNode) and value.tag.endswith("null"):
        return Accelerator(name=name, variant="{accelerator}-{os}", versions=())
    fields = reader.mapping(value, field, ("variant", "versions", "allow", "wheel_index",
                                           "wheel_index_auth"))
    variant = "{accelerator}-{os}"
    if "variant" in fields:
        variant = _pattern(reader, fields["variant"][1], f"{field}.variant",
                           ("accelerator", "os"))
    versions: list[ToolkitVersion] = []
    seen: dict[str, yaml.Node] = {}
    if shape.VERSIONS in fields:
        for i, node in enumerate(reader.sequence(fields[shape.VERSIONS][1],
                                                 f"{field}.{shape.VERSIONS}")):
            entry = _toolkit_version(reader, node, f"{field}.versions[{i}]")
            if entry.version in seen:
                first = seen[entry.version].start_mark.line + 1
                raise reader.error(node, f"{field}.versions[{i}].version",
                                   f"version {entry.version} is listed twice "
                                   f"(first on line {first})")
            seen[entry.version] = node
            versions.append(entry)
    allow = _allow_rules(reader, fields, field)
    wheel_index = None
    if "wheel_index" in fields:
        wheel_index = _wheel_index(reader, fields["wheel_index"][1], f"{field}.wheel_index")
    return Accelerator(name=name, variant=variant, versions=tuple(versions), allow=allow,
                       wheel_index=wheel_index,
                       wheel_index_auth=_index_auth(reader, fields, f"{field}.wheel_index_auth"))


WHEEL_INDEX_FIELDS = ("release", "accelerator", "major", "minor", "os", "variant")
_PLACEHOLDER = re.compile(r"{[^{}]*}")
# What a wheel index URL may hold once its placeholders are filled: it is written into
# every image's ENV, pip.conf and uv.toml, so nothing a shell or TOML would interpret.
_INDEX_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::[0-9]+)?/[A-Za-z0-9._~%+/-]*")


def _wheel_index(reader: _Reader, node: yaml.Node, field: str) -> str:
    """A wheel index URL pattern: http(s), a fixed host, placeholders in the path only, and
    a fixed segment after the last placeholder (the pages go there: simple/)."""
    text = _pattern(reader, node, field, WHEEL_INDEX_FIELDS)
    sample = _PLACEHOLDER.sub("x", text)
    scheme, _, rest = text.partition("://")
    problem = None
    if scheme not in ("http", "https"):
        problem = "must start with http:// or https://"
    elif "@" in rest.split("/", 1)[0]:
        problem = "must not hold credentials (user@host): every image would carry them"
    elif "{" in rest.split("/", 1)[0]:
        problem = "has a placeholder in its host: placeholders go in the path"
    elif not _PLACEHOLDER.search(text):
        problem = ("names no field ({variant}, {release}, ...): one URL would serve every "
                   "toolkit version")
    elif not _INDEX_URL.fullmatch(sample):
        problem = ("holds characters a wheel index URL may not (the path allows letters, "
                   "digits, '.', '_', '~', '%', '+', '-', '/')")
    elif not text.endswith("/"):
        problem = "must end with '/' (like .../simple/)"
    elif not _after_last_field(text).strip("/"):
        problem = ("needs a fixed path segment after the last placeholder (like "
                   "'{variant}/simple/'): the index pages go there")
    if problem:
        raise reader.error(node, field, f"'{shown(text)}' {problem}")
    return text


def _after_last_field(pattern: str) -> str:
    """The path segments after the one holding the last placeholder: "simple/"."""
    tail = pattern[pattern.rindex("}") + 1:]
    return tail.split("/", 1)[1] if "/" in tail else ""


def _index_auth(reader: _Reader, fields: Mapping[str, tuple[yaml.Node, yaml.Node]],
                field: str) -> Optional[str]:
    """A `wheel_index_auth` mode, None when not written."""
    if "wheel_index_auth" not in fields:
        return None
    node = fields["wheel_index_auth"][1]
    mode = reader.scalar(node, field)
    if mode not in INDEX_AUTH_MODES:
        raise reader.error(node, field, f"unknown authentication '{shown(mode)}' (expected "
                           f"one of: {', '.join(INDEX_AUTH_MODES)})")
    return mode


def _check_auth_has_index(reader: _Reader, top: Mapping[str, tuple[yaml.Node, yaml.Node]],
                          accelerators: Mapping[str, Accelerator],
                          wheel_index: Optional[str]) -> None:
    """An authentication setting without an index to apply it to is a mistake, not a no-op."""
    if wheel_index is None and "wheel_index_auth" in top \
            and not any(a.wheel_index for a in accelerators.values()):
        raise reader.error(top["wheel_index_auth"][1], "wheel_index_auth",
                           "the matrix has no wheel_index for it to apply to")
    nodes = {str(k.value): v for k, v in top["accelerators"][1].value}
    for name, accelerator in accelerators.items():
        if accelerator.wheel_index_auth is not None and accelerator.wheel_index is None \
                and wheel_index is None:
            node = next(v for k, v in nodes[name].value if k.value == "wheel_index_auth")
            raise reader.error(node, f"accelerators.{name}.wheel_index_auth",
                               "the matrix has no wheel_index for it to apply to (give "
                               f"wheel_index or accelerators.{name}.wheel_index)")


def _check_unversioned_indexes(reader: _Reader, top: Mapping[str, tuple[yaml.Node, yaml.Node]],
                               accelerators: Mapping[str, Accelerator]) -> None:
    """An accelerator without versions (cpu) has no {major} or {minor} to fill."""
    nodes = {str(k.value): v for k, v in top["accelerators"][1].value}
    for name, accelerator in accelerators.items():
        if accelerator.versions:
            continue
        if accelerator.wheel_index is not None:
            pattern = accelerator.wheel_index
            node = next(v for k, v in nodes[name].value if k.value == "wheel_index")
            field = f"accelerators.{name}.wheel_index"
        elif "wheel_index" in top:
            pattern, node, field = str(top["wheel_index"][1].value), top["wheel_index"][1], \
                "wheel_index"
        else:
            continue
        used = [f for f in ("major", "minor") if "{" + f + "}" in pattern]
        if used:
            raise reader.error(node, field, f"uses {{{used[0]}}}, but accelerator '{name}' has "
                               f"no versions: give accelerators.{name}.wheel_index without "
                               "it, or use {variant}")


# A toolkit version's driver: the one it needs natively, NVIDIA's "minimum required driver"
# of the release (the driver it ships with). Below it, minor-version compatibility or the
# forward-compat package may still run the image (compat, select). Matrices written before
# the field was named for that meaning call it min_driver: read the same.
NATIVE_DRIVER = "native_driver"
OLD_NATIVE_DRIVER = "min_driver"


def _toolkit_version(reader: _Reader, node: yaml.Node, field: str) -> ToolkitVersion:
    fields = reader.mapping(node, field,
                            ("version", NATIVE_DRIVER, OLD_NATIVE_DRIVER, "eol", "gpu_archs",
                             "vars", "allow", "platforms"),
                            ("version",))
    version = reader.scalar(fields["version"][1], f"{field}.version", VERSION,
                            "a version of the form X.Y or X.Y.Z")
    if canonical_version(version) != version:
        raise reader.error(fields["version"][1], f"{field}.version",
                           f"'{version}' has leading zeros: write "
                           f"{canonical_version(version)}")
    native_driver = None
    if NATIVE_DRIVER in fields and OLD_NATIVE_DRIVER in fields:
        raise reader.error(fields[OLD_NATIVE_DRIVER][1], f"{field}.{OLD_NATIVE_DRIVER}",
                           f"{OLD_NATIVE_DRIVER} is the old name of {NATIVE_DRIVER}: give "
                           "one of them")
    for name in (NATIVE_DRIVER, OLD_NATIVE_DRIVER):
        if name in fields:
            native_driver = reader.scalar(fields[name][1], f"{field}.{name}", DRIVER,
                                          "a driver version (like 570.124.06)")
    eol = reader.date(fields["eol"][1], f"{field}.eol") if "eol" in fields else None
    gpu_archs: tuple[str, ...] = ()
    if "gpu_archs" in fields:
        gpu_archs = tuple(
            _gpu_arch(reader, n, f"{field}.gpu_archs[{i}]")
            for i, n in enumerate(reader.sequence(fields["gpu_archs"][1], f"{field}.gpu_archs"))
        )
    variables: dict[str, object] = {}
    if "vars" in fields:
        for key, key_node, value in reader.entries(fields["vars"][1], f"{field}.vars"):
            if not key.isidentifier():
                raise reader.error(key_node, f"{field}.vars.{key}",
                                   "a template variable name must be an identifier")
            variables[key] = reader.plain(value, f"{field}.vars.{key}")
            if several_lines(variables[key]):
                raise reader.error(value, f"{field}.vars.{key}", ONE_LINE)
    return ToolkitVersion(
        version=version, native_driver=native_driver, eol=eol, gpu_archs=gpu_archs,
        vars=variables, allow=_allow_rules(reader, fields, field),
        where=reader.where(fields["version"][1]),
        platforms=_platforms(reader, fields, "platforms", f"{field}.platforms"),
    )


def _gpu_arch(reader: _Reader, node: yaml.Node, field: str) -> str:
    """A GPU a toolkit version's images promise to run on, as `compat`, `select` and the
    validator read it: a misspelling stops the load, before anything is built."""
    text = reader.scalar(node, field)
    try:
        declared_arch(text)
    except BadArch as err:
        raise reader.error(node, field, str(err)) from None
    return text


def _allow_rules(reader: _Reader, fields: Mapping[str, tuple[yaml.Node, yaml.Node]],
                 field: str) -> tuple[AllowRule, ...]:
    if "allow" not in fields:
        return ()
    rules = []
    for i, node in enumerate(reader.sequence(fields["allow"][1], f"{field}.allow")):
        sub = f"{field}.allow[{i}]"
        rule = reader.mapping(node, sub, ("reason", "toolkit", "component", "versions", "path"),
                              ("reason",))
        reason = reader.scalar(rule["reason"][1], f"{sub}.reason").strip()
        if not reason:
            raise reader.error(rule["reason"][1], f"{sub}.reason", "a reason must be given")
        if not {"toolkit", "component", "versions", "path"} & set(rule):
            raise reader.error(node, sub, "an allow rule needs at least one of toolkit, "
                               "component, versions, path (it would allow everything)")
        versions: tuple[str, ...] = ()
        if "versions" in rule:
            versions = tuple(
                reader.scalar(n, f"{sub}.versions[{j}]")
                for j, n in enumerate(reader.sequence(rule["versions"][1], f"{sub}.versions"))
            )
        rules.append(AllowRule(
            reason=reason,
            toolkit=reader.name(rule["toolkit"][1], f"{sub}.toolkit")
            if "toolkit" in rule else None,
            component=reader.name(rule["component"][1], f"{sub}.component")
            if "component" in rule else None,
            versions=versions,
            path=reader.scalar(rule["path"][1], f"{sub}.path") if "path" in rule else None,
            where=reader.where(node),
        ))
    return tuple(rules)


def _image_kind(reader: _Reader, kind: str, key_node: yaml.Node, value: yaml.Node,
                oses: Mapping[str, OsSpec], templates: Path, matrix_dir: Path) -> ImageKind:
    field = f"images.{kind}"
    reader.name(key_node, field)
    fields = reader.mapping(value, field,
                            ("template", "repository", "os", "from_image", "resources", "allow",
                             "context", "platforms", "requirements"),
                            ("template", "os"))
    template_node = fields["template"][1]
    template = reader.scalar(template_node, f"{field}.template", SAFE_PATH, SAFE_PATH_WHAT)
    template_path = (templates / template).resolve()
    if templates not in template_path.parents:
        raise reader.error(template_node, f"{field}.template",
                           "a template must lie inside the templates directory")
    if not template_path.is_file():
        raise reader.error(template_node, f"{field}.template",
                           f"template '{template}' not found in {templates}")
    repository = "{registry}/{kind}/{name}"
    if "repository" in fields:
        repository = _pattern(reader, fields["repository"][1], f"{field}.repository",
                              ("registry", "kind", "name", "accelerator", "os", "product"))
    os_names = []
    for i, node in enumerate(reader.sequence(fields["os"][1], f"{field}.os")):
        os_name = reader.name(node, f"{field}.os[{i}]")
        if os_name not in oses:
            extra = did_you_mean(os_name, oses)
            raise reader.error(node, f"{field}.os[{i}]",
                               f"OS '{os_name}' is not declared under 'os'{extra}")
        os_names.append(os_name)
    from_image = None
    if "from_image" in fields:
        from_image = reader.name(fields["from_image"][1], f"{field}.from_image")
    resources: dict[str, float] = {}
    if "resources" in fields:
        for slot, slot_node, amount in reader.entries(fields["resources"][1],
                                                      f"{field}.resources"):
            reader.name(slot_node, f"{field}.resources.{slot}")
            resources[slot] = reader.number(amount, f"{field}.resources.{slot}")
    context = None
    if "context" in fields:
        # Relative to the matrix file, like templates and output. It need not exist yet:
        # build inputs (the demo's wheelhouse) are often fetched after `render --check`.
        context = str((matrix_dir / reader.scalar(fields["context"][1], f"{field}.context",
                                                  SAFE_PATH, SAFE_PATH_WHAT)).resolve())
    requirements = None
    if "requirements" in fields:
        # Relative to the matrix file; judged before a build (validate --requirements).
        node = fields["requirements"][1]
        path = matrix_dir / reader.scalar(node, f"{field}.requirements")
        if not path.is_file():
            raise reader.error(node, f"{field}.requirements",
                               f"requirements file '{path}' not found")
        requirements = str(path.resolve())
    return ImageKind(
        name=kind, template=template, repository=repository, os=tuple(os_names),
        from_image=from_image, resources=resources, allow=_allow_rules(reader, fields, field),
        context=context, platforms=_platforms(reader, fields, "platforms", f"{field}.platforms"),
        requirements=requirements,
    )


def _check_from_images(reader: _Reader, images_node: yaml.Node,
                       images: Mapping[str, ImageKind]) -> None:
    nodes = {str(k.value): v for k, v in images_node.value}

    def from_node(kind: str) -> yaml.Node:
        return next(v for k, v in nodes[kind].value if k.value == "from_image")

    for kind, spec in images.items():
        if spec.from_image is not None and spec.from_image not in images:
            extra = did_you_mean(spec.from_image, images)
            raise reader.error(from_node(kind), f"images.{kind}.from_image",
                               f"unknown image kind '{spec.from_image}'{extra}")
    for kind in images:
        chain = [kind]
        current = images[kind].from_image
        while current is not None:
            if current in chain:
                cycle = " -> ".join(chain[chain.index(current):] + [current])
                raise reader.error(from_node(kind), f"images.{kind}.from_image",
                                   f"from_image cycle: {cycle}")
            chain.append(current)
            current = images[current].from_image


def _exclude(reader: _Reader, node: yaml.Node, field: str) -> Exclude:
    fields = reader.mapping(node, field, ("accelerator", "version", "os", "kind", "platform"))
    if not fields:
        raise reader.error(node, field, "an empty exclude would remove every image")
    values = {key: reader.scalar(v, f"{field}.{key}") for key, (_, v) in fields.items()}
    if "platform" in fields:
        _platform(reader, fields["platform"][1], f"{field}.platform")
    return Exclude(**values)
