"""Open an image reference: manifests, configs and where each layer blob's bytes are.

Local layouts (`oci:`, `oci-archive:`, `docker-archive:`, `dir:`) are read in place: an
archive's blobs are byte ranges of the archive file. Local-storage images
(`containers-storage:`) are read in place too, from each layer's tar-split and files
(see `storage`), when the store's layout is one this reads. Remote images, and local ones
that cannot be read in place, are first copied by skopeo to a temporary `dir:` layout,
which keeps the layers as the source has them (containers-storage gives them
uncompressed): nothing is recompressed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Optional, Union

from ..digest import hexdigest
from ..errors import InputError, quoted
from ..oci import INDEX_TYPES, OCI_LAYER_TAR, REF_NAME_ANNOTATION
from ..records import record
from ..tools.skopeo import Skopeo, json_object, split_transport
from .blobs import BlobLocation, TarSplitLayer

# How the layers were read (ImageVerdict.layers_read).
IN_PLACE = "in place"
SKOPEO_COPY = "skopeo copy"


@record
class LayerRef:
    digest: str
    media_type: str
    size: int
    location: Union[BlobLocation, TarSplitLayer]


@record
class PlatformImage:
    """One platform's image: its config (parsed JSON) and its layers, bottom first."""

    platform: str
    digest: Optional[str]
    config: Mapping[str, Any]
    layers: tuple[LayerRef, ...]

    @property
    def env(self) -> dict[str, str]:
        pairs = (self.config.get("config") or {}).get("Env") or []
        return dict(p.split("=", 1) for p in pairs if "=" in p)

    @property
    def working_dir(self) -> str:
        return str((self.config.get("config") or {}).get("WorkingDir") or "/")

    @property
    def labels(self) -> dict[str, str]:
        return dict((self.config.get("config") or {}).get("Labels") or {})


# An index may nest indexes; real ones nest one level. Deeper, or a cycle, is hostile.
MAX_INDEX_DEPTH = 8


def config_problem(config: Mapping[str, Any]) -> Optional[str]:
    """What is wrong with the types of the image config fields the validator reads (as
    "FIELD: expected ..."), or None."""
    for key in ("os", "architecture", "variant"):
        if not isinstance(config.get(key, ""), str):
            return f"{key}: expected a string"
    settings = config.get("config") or {}
    if not isinstance(settings, dict):
        return "config: expected an object"
    env = settings.get("Env") or []
    if not isinstance(env, list) or not all(isinstance(item, str) for item in env):
        return "config.Env: expected a list of strings"
    if not isinstance(settings.get("WorkingDir") or "", str):
        return "config.WorkingDir: expected a string"
    labels = settings.get("Labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        return "config.Labels: expected an object of strings"
    rootfs = config.get("rootfs") or {}
    diff_ids = rootfs.get("diff_ids") or [] if isinstance(rootfs, dict) else None
    if not isinstance(diff_ids, list) or not all(isinstance(d, str) for d in diff_ids):
        return "rootfs.diff_ids: expected a list of strings"
    return None


def _checked(config: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    problem = config_problem(config)
    if problem:
        raise InputError(f"{what}: {problem}")
    return config


class _Store:
    """Blobs by digest in some local layout."""

    def location(self, digest: str) -> BlobLocation:
        raise NotImplementedError

    def read(self, digest: str) -> bytes:
        """The blob's bytes, checked against DIGEST (a tampered layout is refused)."""
        loc = self.location(digest)
        with open(loc.path, "rb") as handle:
            handle.seek(loc.offset)
            data = handle.read(-1 if loc.length is None else loc.length)
        algorithm, _, expected = digest.partition(":")
        actual = hexdigest(algorithm, data)
        if actual is None:
            raise InputError(f"blob {digest}: unknown digest algorithm")
        if actual != expected:
            raise InputError(f"blob {digest} does not match its digest ({algorithm}:{actual})")
        return data

    def json(self, digest: str) -> dict[str, Any]:
        return json_object(self.read(digest), digest)


class _DirStore(_Store):
    """An OCI layout directory (blobs/ALG/HEX) or a skopeo `dir:` (HEX at the top)."""

    def __init__(self, root: str, flat: bool) -> None:
        self.root = root
        self.flat = flat

    def location(self, digest: str) -> BlobLocation:
        algorithm, _, hexdigest = digest.partition(":")
        if not hexdigest or "/" in digest or ".." in digest:
            raise InputError(f"{quoted(self.root)}: malformed digest {digest!r}")
        path = os.path.join(self.root, hexdigest) if self.flat else \
            os.path.join(self.root, "blobs", algorithm, hexdigest)
        if not os.path.isfile(path):
            raise InputError(f"{quoted(self.root)}: blob {digest} is missing")
        return BlobLocation(path)


class _ArchiveStore(_Store):
    """A tar archive holding a layout; members are located once, then read in place."""

    def __init__(self, archive: str) -> None:
        self.archive = archive
        import tarfile  # only archives need it; keep it off the warm-cache path

        self.members: dict[str, tuple[int, int]] = {}
        try:
            with tarfile.open(archive, "r:") as tar:  # few members: tarfile is fine here
                for member in tar:
                    if member.isfile():
                        name = member.name.lstrip("./")
                        self.members[name] = (member.offset_data, member.size)
        except (tarfile.TarError, OSError) as exc:
            raise InputError(f"{quoted(archive)}: not a readable tar archive ({exc})") from exc

    def member(self, name: str) -> BlobLocation:
        if name.lstrip("./") not in self.members:
            raise InputError(f"{quoted(self.archive)}: no {name} in the archive")
        offset, size = self.members[name.lstrip("./")]
        return BlobLocation(self.archive, offset, size)

    def location(self, digest: str) -> BlobLocation:
        algorithm, _, hexdigest = digest.partition(":")
        return self.member(f"blobs/{algorithm}/{hexdigest}")

    def read_member(self, name: str) -> bytes:
        loc = self.member(name)
        with open(loc.path, "rb") as handle:
            handle.seek(loc.offset)
            return handle.read(loc.length)


def _platform_of(config: Mapping[str, Any], descriptor: Optional[Mapping[str, Any]]) -> str:
    source = (descriptor or {}).get("platform") or config
    parts = [source.get("os") or "unknown", source.get("architecture") or "unknown"]
    if source.get("variant"):
        parts.append(source["variant"])
    return "/".join(parts)


def _matches(platform: str, wanted: Optional[str]) -> bool:
    if wanted is None:
        return True
    # "linux/arm64" matches "linux/arm64/v8": a missing variant means any variant.
    return platform == wanted or platform.startswith(wanted + "/")


def _image(store: _Store, manifest: Mapping[str, Any], digest: Optional[str],
           descriptor: Optional[Mapping[str, Any]]) -> PlatformImage:
    if manifest.get("schemaVersion") != 2 or "config" not in manifest:
        raise InputError(f"unsupported manifest (schema {manifest.get('schemaVersion')}): "
                         "only Docker v2s2 and OCI manifests can be validated")
    config_digest = manifest["config"]["digest"]
    config = _checked(store.json(config_digest), f"config {config_digest}")
    layers = tuple(
        LayerRef(layer["digest"], layer.get("mediaType", ""), int(layer.get("size", 0)),
                 store.location(layer["digest"]))
        for layer in manifest.get("layers") or [])
    return PlatformImage(_platform_of(config, descriptor), digest, config, layers)


def _from_index(store: _Store, top: Mapping[str, Any], top_digest: Optional[str],
                platform: Optional[str], what: str,
                within: tuple[str, ...] = ()) -> list[PlatformImage]:
    """The images TOP (an index or a manifest) leads to; WITHIN: the indexes above it.
    (Blobs are checked against their digests, so no index can list itself.)"""
    if len(within) >= MAX_INDEX_DEPTH:
        raise InputError(f"indexes nested more than {MAX_INDEX_DEPTH} deep "
                         f"({' -> '.join(within)})")
    if top.get("mediaType") not in INDEX_TYPES and "manifests" not in top:
        images = [_image(store, top, top_digest, None)]
    else:
        images = []
        for descriptor in top.get("manifests") or []:
            declared = descriptor.get("platform") or {}
            if declared.get("os") == "unknown":
                continue  # attestation manifests, not runnable images
            if declared and not _matches(_platform_of({}, descriptor), platform):
                continue
            manifest = store.json(descriptor["digest"])
            images.extend(_from_index(store, manifest, descriptor["digest"], platform, what,
                                      (*within, top_digest or "the top index"))
                          if manifest.get("manifests") else
                          [_image(store, manifest, descriptor["digest"], descriptor)])
    images = [i for i in images if _matches(i.platform, platform)]
    if not images:
        raise InputError(f"{what}: no image for platform {platform}" if platform
                         else f"{what}: the index lists no image")
    return images


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _split_path(rest: str) -> tuple[str, Optional[str]]:
    """PATH[:REFERENCE] where PATH itself may contain colons: the longest existing prefix."""
    if os.path.exists(rest):
        return rest, None
    cut = rest.rfind(":")
    while cut > 0:
        if os.path.exists(rest[:cut]):
            return rest[:cut], rest[cut + 1:]
        cut = rest.rfind(":", 0, cut)
    raise InputError(f"{quoted(rest.split(':')[0])}: no such file or directory")


def _oci_top(index: Mapping[str, Any], tag: Optional[str], what: str) -> Mapping[str, Any]:
    manifests = index.get("manifests") or []
    if tag is not None:
        chosen = [m for m in manifests
                  if (m.get("annotations") or {}).get(REF_NAME_ANNOTATION) == tag]
        if not chosen:
            raise InputError(f"{what}: no image tagged {tag!r}")
        return chosen[0]
    if len(manifests) != 1:
        tags = sorted((m.get("annotations") or {}).get(REF_NAME_ANNOTATION, "?") for m in manifests)
        raise InputError(f"{what}: holds {len(manifests)} images, name one of: {', '.join(tags)}")
    return manifests[0]


def _oci(store: _Store, index: Mapping[str, Any], tag: Optional[str], platform: Optional[str],
         what: str) -> list[PlatformImage]:
    chosen = _oci_top(index, tag, what)
    top = store.json(chosen["digest"])
    return _from_index(store, top, chosen["digest"], platform, what)


def _docker_archive(path: str, name: Optional[str], platform: Optional[str], what: str
                    ) -> list[PlatformImage]:
    store = _ArchiveStore(path)
    entries = json.loads(store.read_member("manifest.json"))
    if name is not None:
        entries = [e for e in entries if name in (e.get("RepoTags") or [])
                   or name.lstrip("@") == str(entries.index(e))]
    if len(entries) != 1:
        raise InputError(f"{what}: holds {len(entries)} images matching; name one "
                         "(docker-archive:FILE:NAME:TAG)")
    entry = entries[0]
    config = _checked(json_object(store.read_member(entry["Config"]), f"{what} config"),
                      f"{what} config")
    diff_ids = (config.get("rootfs") or {}).get("diff_ids") or []
    if len(diff_ids) != len(entry["Layers"]):
        raise InputError(f"{what}: {len(entry['Layers'])} layers but "
                         f"{len(diff_ids)} diff_ids in the config")
    # docker-archive layers are uncompressed tars: their diffID is their digest.
    layers = tuple(
        LayerRef(diff_id, "application/vnd.docker.image.rootfs.diff.tar", 0,
                 store.member(member))
        for diff_id, member in zip(diff_ids, entry["Layers"]))
    image = PlatformImage(_platform_of(config, None), None, config, layers)
    if not _matches(image.platform, platform):
        raise InputError(f"{what}: image is {image.platform}, not {platform}")
    return [image]


class OpenedImage:
    """The platform images of one reference, and how their layers are read ("in place",
    "skopeo copy", or a copy with the reason it was not read in place); `close()` removes
    any temporary copy."""

    def __init__(self, ref: str, images: list[PlatformImage], tempdir: Optional[str],
                 layers_read: str = IN_PLACE) -> None:
        self.ref = ref
        self.images = images
        self.layers_read = layers_read
        self._tempdir = tempdir

    def close(self) -> None:
        if self._tempdir:
            import shutil

            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    def __enter__(self) -> OpenedImage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _copy_with_skopeo(ref: str, transport: str, rest: str, platform: Optional[str],
                      skopeo: Skopeo, layers_read: str) -> OpenedImage:
    # Imported here: images read in place (a validation served from the cache among
    # them) never make a temporary copy.
    import shutil
    import tempfile

    from ..image_reference import repository_of

    top = skopeo.inspect_raw(ref)
    sources: list[tuple[str, Optional[Mapping[str, Any]]]] = []
    if top.get("mediaType") in INDEX_TYPES or "manifests" in top:
        if transport != "docker":
            raise InputError(f"{quoted(ref)}: is an image index; validate its images one "
                             "by one")
        repository = repository_of(rest.lstrip("/"))
        for descriptor in top.get("manifests") or []:
            declared = descriptor.get("platform") or {}
            if declared.get("os") == "unknown" or not _matches(
                    _platform_of({}, descriptor), platform):
                continue
            sources.append((f"docker://{repository}@{descriptor['digest']}", descriptor))
        if not sources:
            raise InputError(f"{quoted(ref)}: no image for platform {platform}")
    else:
        sources.append((ref, None))
    tempdir = tempfile.mkdtemp(prefix="aipcc-validate-copy-")
    try:
        images = []
        for number, (source, descriptor) in enumerate(sources):
            target = os.path.join(tempdir, str(number))
            skopeo.copy(source, f"dir:{target}")
            store = _DirStore(target, flat=True)
            manifest = json_object(_read(os.path.join(target, "manifest.json")), source)
            digest = descriptor["digest"] if descriptor else None
            images.append(_image(store, manifest, digest, descriptor))
        images = [i for i in images if _matches(i.platform, platform)]
        if not images:
            raise InputError(f"{quoted(ref)}: image is not for platform {platform}")
        return OpenedImage(ref, images, tempdir, layers_read)
    except BaseException:
        shutil.rmtree(tempdir, ignore_errors=True)
        raise


def _from_storage(ref: str, reference: str, platform: Optional[str],
                  metadata_cache: Optional[str]) -> OpenedImage:
    """A containers-storage image read in place; NotInPlace when it cannot be."""
    from .storage import find_store, read_image

    store = find_store()
    stored = read_image(store, reference, metadata_cache)
    _checked(stored.config, f"{quoted(ref)} config")
    # Local storage keeps layers uncompressed: their digest is their diffID, as in a copy.
    layers = tuple(LayerRef(diff_id, OCI_LAYER_TAR, layer.size,
                            layer)
                   for diff_id, layer in stored.layers)
    image = PlatformImage(_platform_of(stored.config, None), None, stored.config, layers)
    if not _matches(image.platform, platform):
        raise InputError(f"{quoted(ref)}: image is not for platform {platform}")
    return OpenedImage(ref, [image], None, f"{IN_PLACE} (containers-storage, {store.driver})")


def open_image(ref: str, platform: Optional[str] = None,
               skopeo: Optional[Skopeo] = None,
               metadata_cache: Optional[str] = None) -> OpenedImage:
    """Open REF (any skopeo transport); raises InputError when it cannot be read. What a
    containers-storage image's store lists of it is kept in the directory METADATA_CACHE
    (`storage.read_image`), if given."""
    transport, rest = split_transport(ref)
    try:
        if transport == "oci":
            path, tag = _split_path(rest)
            store: _Store = _DirStore(path, flat=False)
            index = json_object(_read(os.path.join(path, "index.json")),
                                quoted(f"{path}/index.json"))
            return OpenedImage(ref, _oci(store, index, tag, platform, quoted(ref)), None)
        if transport == "oci-archive":
            path, tag = _split_path(rest)
            archive = _ArchiveStore(path)
            index = json_object(archive.read_member("index.json"), quoted(f"{path}:index.json"))
            return OpenedImage(ref, _oci(archive, index, tag, platform, quoted(ref)), None)
        if transport == "docker-archive":
            path, name = _split_path(rest)
            return OpenedImage(ref, _docker_archive(path, name, platform, quoted(ref)), None)
        if transport == "dir":
            manifest = json_object(_read(os.path.join(rest, "manifest.json")),
                                   quoted(f"{rest}/manifest.json"))
            image = _image(_DirStore(rest, flat=True), manifest, None, None)
            if not _matches(image.platform, platform):
                raise InputError(f"{quoted(ref)}: image is {image.platform}, not {platform}")
            return OpenedImage(ref, [image], None)
    except OSError as exc:
        raise InputError(f"{quoted(ref)}: {exc.strerror or exc}") from exc
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        # A field of the wrong type somewhere in the index or manifest (found by fuzzing),
        # or one nested thousands deep.
        raise InputError(f"{quoted(ref)}: malformed image metadata ({exc!r})") from exc
    layers_read = SKOPEO_COPY
    if transport == "containers-storage":
        # Imported here: storage.conf's TOML parser is not needed for other transports.
        from .storage import NotInPlace

        try:
            return _from_storage(ref, rest, platform, metadata_cache)
        except NotInPlace as exc:
            layers_read = f"{SKOPEO_COPY} (not read in place: {exc})"
    if transport in ("docker", "containers-storage"):
        tool = skopeo or Skopeo()
        return _copy_with_skopeo(ref, transport, rest, platform, tool, layers_read)
    raise InputError(f"{quoted(ref)}: unsupported transport {transport!r} (use oci:, "
                     "oci-archive:, docker-archive:, dir:, docker://, containers-storage:)")
