"""Images in local containers/storage, found and read in place (no `skopeo copy`).

The store is located the way containers/storage does it for root: the file named by
`CONTAINERS_STORAGE_CONF`, else /etc/containers/storage.conf, else
/usr/share/containers/storage.conf gives `graphroot` and `driver` (`STORAGE_DRIVER`
overrides the driver); the defaults are /var/lib/containers/storage and the driver whose
directory is already there. The overlay and vfs layouts are read:

    <driver>-images/images.json       image records: id, names, top layer
    <driver>-images/<id>/<key>        the image's manifest and config ("big data")
    <driver>-layers/layers.json       layer records: id, parent, diff-digest
    <driver>-layers/<id>.tar-split.gz the layer's tar without file contents
    overlay/<id>/diff, vfs/dir/<id>   the layer's files

Anything else (another driver, a reference only containers/image can resolve, a layer
without a tar-split) raises `NotInPlace`, and the caller copies the image with skopeo.
Metadata files are replaced atomically by containers/storage, so they are read without
taking its locks; a build committing meanwhile does not wait for a validation.

images.json and layers.json list every image and layer of the store, and parsing them
whole cost a warm validation more than judging the image (issue 37). What is read from
them (the image a reference names, a top layer's chain) is kept in a metadata cache
beside the exact bytes it was read from: while the file holds those bytes, the answer is
the same; any change to them, a rename, a tag, an image added or removed, is a miss.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from typing import Any, Callable, Optional, TypeVar

from ..digest import hexdigest, is_lower_hex
from ..oci import INDEX_TYPES
from ..records import record
from .blobs import TarSplitLayer

CONFIG_ENV = "CONTAINERS_STORAGE_CONF"
DRIVER_ENV = "STORAGE_DRIVER"
# Paths as strings, here and below: pathlib's joins were a fifth of reading a store's image,
# and loading pathlib (with urllib.parse and ipaddress) a third of a warm validation's own
# cost (issue 37).
CONFIG_FILES = ("/etc/containers/storage.conf", "/usr/share/containers/storage.conf")
DEFAULT_GRAPHROOT = "/var/lib/containers/storage"
# Directories a graph driver keeps under the graphroot: exactly one present names the
# driver in use when none is configured ("prior driver").
KNOWN_DRIVERS = ("overlay", "overlay2", "btrfs", "zfs", "vfs", "devicemapper", "aufs")
READ_IN_PLACE = ("overlay", "vfs")
# The metadata cache's entry format (`_answer`): bump it when what an answer holds changes.
METADATA_CACHE_FORMAT = 1
# Answers kept per metadata file's bytes: the references validated since it last changed.
MAX_ANSWERS = 64

T = TypeVar("T")


class NotInPlace(Exception):
    """The image cannot be read in place; the message says why."""


@record
class Store:
    graphroot: str
    driver: str

    @property
    def images(self) -> str:
        return os.path.join(self.graphroot, f"{self.driver}-images")

    @property
    def layers(self) -> str:
        return os.path.join(self.graphroot, f"{self.driver}-layers")

    def files(self, layer_id: str) -> str:
        if self.driver == "vfs":
            return os.path.join(self.graphroot, "vfs", "dir", layer_id)
        return os.path.join(self.graphroot, "overlay", layer_id, "diff")


@record
class StoredImage:
    """An image in the store: its config and its layers (diffID, where), bottom first."""

    image_id: str
    config: Mapping[str, Any]
    layers: tuple[tuple[str, TarSplitLayer], ...]


def _config_file(environ: Mapping[str, str]) -> Optional[str]:
    if environ.get(CONFIG_ENV):
        return environ[CONFIG_ENV]
    return next((path for path in CONFIG_FILES if os.path.exists(path)), None)


def find_store(environ: Mapping[str, str] = os.environ) -> Store:
    """The root store as containers/storage would open it; NotInPlace if it cannot be read."""
    if os.geteuid() != 0:
        raise NotInPlace("rootless storage is not read in place")
    settings: Any = {}
    path = _config_file(environ)
    if path is not None and os.path.exists(path):  # as containers/storage: a missing file
        # Imported here: hosts without the file (and every warm validation on them) skip it.
        if sys.version_info >= (3, 11):
            import tomllib
        else:
            import tomli as tomllib
        try:
            with open(path, encoding="utf-8") as handle:
                settings = tomllib.loads(handle.read()).get("storage") or {}
        except (OSError, ValueError) as exc:
            raise NotInPlace(f"{path}: {exc}") from exc
    if not isinstance(settings, dict) or not all(
            isinstance(settings.get(key, ""), str) for key in ("graphroot", "driver")):
        raise NotInPlace(f"{path}: [storage] graphroot and driver must be strings")
    graphroot = settings.get("graphroot") or DEFAULT_GRAPHROOT
    driver = environ.get(DRIVER_ENV) or settings.get("driver") or ""
    if not driver:
        present = [name for name in KNOWN_DRIVERS if os.path.isdir(os.path.join(graphroot, name))]
        if len(present) != 1:
            raise NotInPlace(f"{graphroot}: cannot tell the storage driver "
                             f"({', '.join(present) or 'none'} present)")
        driver = present[0]
    if driver not in READ_IN_PLACE:
        raise NotInPlace(f"the {driver} storage driver is not read in place")
    return Store(graphroot, driver)


def _read_metadata(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise NotInPlace(f"{path}: {exc}") from exc


def _parsed(path: str, data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise NotInPlace(f"{path}: {exc}") from exc


def _cache_entry(cache: str, path: str) -> str:
    return os.path.join(cache, f"v{METADATA_CACHE_FORMAT}",
                        f"{hexdigest('sha256', path.encode())}.json")


def _cached_answers(entry: str, path: str, data: bytes) -> dict[str, Any]:
    """The answers ENTRY keeps for PATH holding exactly DATA; none when it keeps another
    file's, other bytes, or is not a whole entry (a damaged or foreign file is a miss)."""
    from ..fsutil import open_regular

    try:
        with open_regular(entry) as handle:  # a FIFO there is not waited on
            kept = handle.read()
    except OSError:
        return {}
    # Compared in place: a copy of the bytes would cost as much as the comparison saves.
    newline = kept.find(b"\n")
    if newline < 0 or len(kept) - newline - 1 != len(data) or not kept.endswith(data):
        return {}
    try:
        parsed = json.loads(kept[:newline])
    except (ValueError, RecursionError):
        return {}
    if not isinstance(parsed, dict) or parsed.get("format") != METADATA_CACHE_FORMAT or \
            parsed.get("path") != path or not isinstance(parsed.get("answers"), dict):
        return {}
    return parsed["answers"]


def _answer(path: str, question: str, work: Callable[[Any], T], cache: Optional[str]) -> T:
    """WORK's answer to QUESTION from the parsed metadata file PATH, taken from CACHE (a
    directory) when PATH's bytes are those it was read from; else read now and kept.
    What WORK raises (a name not found, a malformed file) is raised each time, not kept."""
    data = _read_metadata(path)
    if cache is None:
        return work(_parsed(path, data))
    entry = _cache_entry(cache, path)
    answers = _cached_answers(entry, path, data)
    if question in answers:
        return answers[question]
    answer = work(_parsed(path, data))
    if len(answers) >= MAX_ANSWERS:
        answers = {}
    answers[question] = answer
    header = json.dumps({"format": METADATA_CACHE_FORMAT, "path": path,
                         "answers": answers}, separators=(",", ":")).encode()
    from ..fsutil import write_atomic

    # A cache that cannot be written (read-only, full, or not a regular file there) costs
    # only speed.
    with contextlib.suppress(OSError):
        if os.path.exists(entry) and not os.path.isfile(entry):
            return answer
        write_atomic(entry, [header, b"\n", data])
    return answer


_BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def base64_text(data: bytes) -> str:
    """DATA in standard base64, padded (Go's base64.StdEncoding), for a key of a few
    dozen bytes: without the base64 module, which loads struct, nor binascii, a library
    of its own to load (together 0.6 to 1.7 M instructions of a warm validation, issue 37)."""
    out = []
    for start in range(0, len(data), 3):
        chunk = data[start:start + 3]
        bits = int.from_bytes(chunk + bytes(3 - len(chunk)), "big")
        shown = len(chunk) + 1
        out.append("".join(_BASE64[(bits >> shift) & 63] for shift in (18, 12, 6, 0)[:shown]))
        out.append("=" * (4 - shown))
    return "".join(out)


def _big_data(store: Store, image_id: str, key: str) -> bytes:
    # containers/storage names the file after the key if it is all [0-9a-z.], else "=" and
    # the key in base64.
    plain = all(c == "." or "0" <= c <= "9" or "a" <= c <= "z" for c in key)
    name = key if plain else "=" + base64_text(key.encode())
    try:
        with open(os.path.join(store.images, image_id, name), "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise NotInPlace(f"image {image_id[:12]}: no {key} ({exc.strerror})") from exc


def _image_record(store: Store, reference: str, cache: Optional[str]) -> Mapping[str, Any]:
    """The image a full image ID or an exact stored name (registry/path:tag) refers to.
    Short names, ID prefixes and digests are left to containers/image to resolve."""
    return _answer(os.path.join(store.images, "images.json"), f"image {reference}",
                   lambda records: _find_image(records, reference), cache)


def _find_image(records: Any, reference: str) -> Mapping[str, Any]:
    for image in records:
        if (image.get("id") == reference if len(reference) == 64 and is_lower_hex(reference)
                else reference in (image.get("names") or ())):
            return image
    raise NotInPlace(f"{reference} is not an image ID or a stored name")


def _layer_chain(store: Store, top: str, cache: Optional[str]) -> list[Mapping[str, Any]]:
    return _answer(os.path.join(store.layers, "layers.json"), f"chain {top}",
                   lambda records: _chain(store, records, top), cache)


def _chain(store: Store, listed: Any, top: str) -> list[Mapping[str, Any]]:
    records = {r.get("id"): r for r in listed}
    chain: list[Mapping[str, Any]] = []
    current = top
    while current:
        record = records.get(current)
        if record is None or len(chain) > len(records):
            raise NotInPlace(f"layer {current[:12]} is not in {store.layers}/layers.json")
        chain.append(record)
        current = record.get("parent") or ""
    chain.reverse()
    return chain


def read_image(store: Store, reference: str, cache: Optional[str] = None) -> StoredImage:
    """The config and layers of REFERENCE in STORE, or NotInPlace; what images.json and
    layers.json say of it kept in the directory CACHE, if given. The manifest and config
    are read, and the config checked against its digest, every time."""
    if reference.startswith("["):
        raise NotInPlace("the reference names its own store")
    try:
        return _read_image(store, reference, cache)
    except (KeyError, TypeError, ValueError, AttributeError, OSError, RecursionError) as exc:
        raise NotInPlace(f"unexpected storage metadata ({exc!r})") from exc


def _read_image(store: Store, reference: str, cache: Optional[str]) -> StoredImage:
    record = _image_record(store, reference, cache)
    image_id = str(record["id"])
    manifest = json.loads(_big_data(store, image_id, "manifest"))
    if manifest.get("mediaType") in INDEX_TYPES or "manifests" in manifest:
        raise NotInPlace("an image index")
    config_digest = str(manifest["config"]["digest"])
    config_bytes = _big_data(store, image_id, config_digest)
    algorithm, _, expected = config_digest.partition(":")
    if hexdigest(algorithm, config_bytes) != expected:
        raise NotInPlace(f"image {image_id[:12]}: its config does not match its digest")
    config = json.loads(config_bytes)
    diff_ids = [str(d) for d in config["rootfs"]["diff_ids"]]
    chain = _layer_chain(store, str(record.get("layer") or ""), cache)
    if [layer.get("diff-digest") for layer in chain] != diff_ids:
        raise NotInPlace(f"image {image_id[:12]}: its layers do not match its config's diff_ids")
    layers = []
    layers_dir = store.layers
    for diff_id, layer in zip(diff_ids, chain):
        layer_id = str(layer["id"])
        tar_split = os.path.join(layers_dir, f"{layer_id}.tar-split.gz")
        files = store.files(layer_id)
        if (layer.get("flags") or {}).get("incomplete"):
            raise NotInPlace(f"layer {layer_id[:12]} is incomplete")
        if not os.path.isfile(tar_split):
            raise NotInPlace(f"layer {layer_id[:12]} has no tar-split")
        if not os.path.isdir(files):
            raise NotInPlace(f"layer {layer_id[:12]} has no {files}")
        if os.path.exists(os.path.join(os.path.dirname(files), "composefs-data")):
            # composefs stores a layer's files by digest, not under their names.
            raise NotInPlace(f"layer {layer_id[:12]} is stored for composefs")
        layers.append((diff_id, TarSplitLayer(tar_split, files,
                                              int(layer.get("diff-size") or 0))))
    return StoredImage(image_id, config, tuple(layers))
