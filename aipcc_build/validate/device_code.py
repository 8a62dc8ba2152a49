"""The GPU code an ELF file carries, read as its bytes stream past, never run.

A shared object built with nvcc keeps its device code in `.nv_fatbin`: fatbinaries at
8-byte aligned offsets, each a 16-byte header (magic 0xBA55ED50, version 1, header size,
size of its entries) and entries, each a header (64 to 120 bytes; kind at +0, 1 PTX and
2 SASS; header size at +4; payload size at +8; architecture at +28; flags at +40, 0x100000
an arch-specific `a` target, 0x200000 a family `f` target, as NVIDIA's cuobjdump names the
entries of vLLM's sm_90a/sm_100f/sm_120f kernels) followed by its payload. The architecture
is never
compressed: nothing is decompressed. One built with hipcc keeps `.hip_fatbin`: clang
offload bundles at 4096-byte aligned offsets (clang aligns the section to a page), plain
(`__CLANG_OFFLOAD_BUNDLE__`, a count, then offset, size, triple length and triple per
entry; the target follows `--`) or compressed (`CCOB`: version, method 1 zstd or 0 zlib,
sizes 32-bit in versions 1 and 2, 64-bit in 3, a hash, then a frame holding a plain
bundle, of which only the first `BUNDLE_HEADER_LIMIT` bytes are decompressed).

The file is fed once from its start (`DeviceCodeReader.feed`); the containers are found
by their magic at their alignment, and the headers they announce are picked from the
bytes as they pass. Every count, size and offset is checked against the stated limits
and the file's length: a container past one is refused, one line (`refusals`), and its
entries are not counted.
"""

from __future__ import annotations

import io
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

from ..patterns import lazy
from ..toolkit.gpu_archs import sort_archs
from .results import DeviceCode, Hazard

FATBIN_MAGIC = struct.pack("<IHH", 0xBA55ED50, 1, 16)
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_MAGIC = b"CCOB"
FATBIN_ALIGN, BUNDLE_ALIGN = 8, 4096
KIND_PTX, KIND_SASS = 1, 2
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000
MIN_ENTRY_HEADER, MAX_ENTRY_HEADER = 48, 4096
MAX_CONTAINERS = 1 << 16  # fatbinaries and bundles in one file (cuBLAS holds thousands)
MAX_ENTRIES = 1 << 20  # entries over all of a file's containers
MAX_BUNDLE_ENTRIES = 4096
MAX_TRIPLE = 1024
# A bundle's header (count and triples) is read whole from this many bytes at most.
BUNDLE_HEADER_LIMIT = 1 << 20
# Of a compressed bundle, at most this many compressed bytes are held.
COMPRESSED_INPUT_LIMIT = BUNDLE_HEADER_LIMIT + (64 << 10)
_CCOB_HEADER = {1: "<4sHHIQ", 2: "<4sHHIIQ", 3: "<4sHHQQQ"}
_CARRY = max(len(FATBIN_MAGIC), len(BUNDLE_MAGIC), len(COMPRESSED_MAGIC)) - 1
# The search for fatbinaries (`DeviceCodeReader._search`): the magic's byte picked out at
# each aligned offset, and how many hits in one window before the magic itself is searched
# for. The magic cannot overlap itself (its first byte occurs once in it), so `finditer`
# finds each one `find` would.
_FATBIN_PICK = 3
_FATBIN_BYTE = FATBIN_MAGIC[_FATBIN_PICK]
_MAX_PICKED_HITS = 4096
_FATBIN = lazy(re.escape(FATBIN_MAGIC))
_BUNDLE_HEADS = lazy(b"[" + re.escape(BUNDLE_MAGIC[:1] + COMPRESSED_MAGIC[:1]) + b"]")


class Refused(ValueError):
    """A container whose header breaks a limit or points outside it."""


@dataclass(frozen=True)
class DeviceCodeFound:
    """What one file carries: CUDA SASS and PTX architectures, ROCm targets, and how they
    were found (the evidence)."""

    sass: tuple[str, ...] = ()  # "sm_80", "sm_90a"
    ptx: tuple[str, ...] = ()  # "compute_90"
    gfx: tuple[str, ...] = ()  # "gfx90a:xnack-", "gfx11-generic"
    detail: str = ""  # "2 fatbinaries, 14 entries"
    refusals: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.sass or self.ptx or self.gfx)


def cuda_arch_name(kind: int, arch: int, flags: int) -> str:
    # both flags: no compiler writes that; named by the narrower claim, so a gate judging
    # it expects less of it, never more
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    return f"{'compute' if kind == KIND_PTX else 'sm'}_{arch}{suffix}"


def bundle_target(triple: str) -> Optional[str]:
    """"gfx90a:xnack-" of "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"; None for a host entry
    or one for another device."""
    kind, sep, target = triple.partition("--")
    if not sep or "amdgcn" not in kind or not target:
        return None
    return target


def bundle_targets(data: bytes, limit: int) -> tuple[list[str], int]:
    """The device targets of the plain bundle at the start of DATA, whose entries must lie
    within LIMIT bytes of its start, and where its last entry ends. Raises Refused."""
    if not data.startswith(BUNDLE_MAGIC):
        raise Refused("no bundle magic")
    at = len(BUNDLE_MAGIC)
    if len(data) < at + 8:
        raise Refused("its header is cut short")
    count = struct.unpack_from("<Q", data, at)[0]
    at += 8
    if count > MAX_BUNDLE_ENTRIES:
        raise Refused(f"{count} bundle entries, more than {MAX_BUNDLE_ENTRIES}")
    targets = []
    last = at
    for number in range(count):
        if len(data) < at + 24:
            raise Refused(f"entry {number + 1}'s header lies past {len(data)} bytes")
        offset, size, length = struct.unpack_from("<QQQ", data, at)
        at += 24
        if length > MAX_TRIPLE:
            raise Refused(f"entry {number + 1}'s triple is {length} bytes, more than "
                          f"{MAX_TRIPLE}")
        if offset > limit or size > limit - offset:
            raise Refused(f"entry {number + 1} ({offset}+{size}) ends past the bundle's "
                          f"{limit} bytes")
        if len(data) < at + length:
            raise Refused(f"entry {number + 1}'s triple lies past {len(data)} bytes")
        triple = data[at:at + length].decode("ascii", "replace")
        at += length
        last = max(last, offset + size)
        target = bundle_target(triple)
        if target is not None:
            targets.append(target)
    return targets, last


def _decompress_prefix(method: int, frame: bytes, limit: int) -> bytes:
    """At most LIMIT bytes of what FRAME (zstd for 1, zlib for 0) decompresses to."""
    if method == 0:
        try:
            return zlib.decompressobj().decompress(frame, limit)
        except zlib.error as exc:
            raise Refused(f"its zlib frame does not inflate: {exc}") from None
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(frame),
                                                        read_across_frames=False)
    out = bytearray()
    try:
        while len(out) < limit:
            piece = reader.read(limit - len(out))
            if not piece:
                break
            out.extend(piece)
    except zstandard.ZstdError as exc:
        if not out:
            raise Refused(f"its zstd frame does not decompress: {exc}") from None
    return bytes(out)


def compressed_bundle_targets(data: bytes, available: int) -> list[str]:
    """The targets of the compressed bundle (CCOB) DATA begins with; AVAILABLE is how many
    bytes of the file it may span. Raises Refused."""
    if len(data) < 8:
        raise Refused("its header is cut short")
    version, method = struct.unpack_from("<HH", data, 4)
    layout = _CCOB_HEADER.get(version)
    if layout is None:
        raise Refused(f"compressed bundle version {version}, not 1, 2 or 3")
    if method not in (0, 1):
        raise Refused(f"compression method {method}, neither zlib (0) nor zstd (1)")
    header = struct.calcsize(layout)
    if len(data) < header:
        raise Refused("its header is cut short")
    fields = struct.unpack_from(layout, data)
    total = fields[3] if version >= 2 else None
    uncompressed = fields[-2]
    if total is not None and (total < header or total > available):
        raise Refused(f"its total size {total} lies outside the file's {available} bytes")
    end = total if total is not None else len(data)
    plain = _decompress_prefix(method, data[header:end], min(uncompressed,
                                                              BUNDLE_HEADER_LIMIT))
    return bundle_targets(plain, uncompressed)[0]


@dataclass
class _Want:
    owner: int  # the offset of the container it belongs to
    offset: int
    size: int
    done: Callable[[bytes], None]
    got: bytearray = field(default_factory=bytearray)
    short_ok: bool = False  # answer with fewer bytes at the file's end


@dataclass
class _Container:
    what: str  # "fatbinary", "offload bundle", "compressed offload bundle"
    end: Optional[int] = None  # where its header says it (or its last entry) ends
    sass: set[str] = field(default_factory=set)
    ptx: set[str] = field(default_factory=set)
    gfx: set[str] = field(default_factory=set)
    entries: int = 0
    complete: bool = False
    refusal: Optional[str] = None


_CONTAINER_FIRST_BYTES = BUNDLE_MAGIC[:1] + COMPRESSED_MAGIC[:1]


def _may_start_container(carry: bytes, start: int) -> bool:
    """Whether a magic may begin in CARRY (the last bytes of the previous piece, from byte
    START of the file) and run into the next piece: only a fatbinary's first byte at an
    offset aligned for one, or a bundle's at a page boundary, can begin one."""
    if FATBIN_MAGIC[0] in carry[-start % FATBIN_ALIGN::FATBIN_ALIGN]:
        return True
    page = -start % BUNDLE_ALIGN
    return page < len(carry) and carry[page] in _CONTAINER_FIRST_BYTES


class DeviceCodeReader:
    """Fed a file's bytes in order (`feed`), answers what device code it holds (`finish`)."""

    def __init__(self) -> None:
        self.position = 0
        self.head = b""  # the file's first 4 bytes: b"\x7fELF" for an ELF file
        self._carry = b""
        self._window, self._window_start = b"", 0
        self._wants: list[_Want] = []
        self._covered = 0  # inside a fatbinary found already: its payloads are not searched
        self._containers: dict[int, _Container] = {}  # by offset
        self._entries = 0
        self._stopped: Optional[str] = None
        self._finished = False

    def _refuse(self, offset: int, why: str) -> None:
        container = self._containers[offset]
        if container.refusal is None:
            container.refusal = why
        self._wants = [w for w in self._wants if w.owner != offset]

    def feed(self, piece: bytes) -> None:
        if len(self.head) < 4:
            self.head += piece[:4 - len(self.head)]
        self.position += len(piece)
        if self._stopped or not piece:
            return
        carry = self._carry
        if carry and not _may_start_container(carry, self.position - len(piece) - len(carry)):
            carry = self._carry = b""  # the piece is searched as it is, not copied
        self._window_start = self.position - len(piece) - len(carry)
        self._window = carry + piece if carry else piece
        self._search()
        self._fill()
        self._carry = self._window[-_CARRY:]

    def _search(self) -> None:
        window, start = self._window, self._window_start
        # Fatbinaries lie at multiples of 8. Every shared object's bytes pass here: the
        # byte at each such offset + 3 (where the magic holds 0xBA) is picked out, a
        # strided copy of an eighth of the window, and searched by memchr; a hit is checked
        # whole. That is 2.5 times as fast as searching the magic itself (re's literal
        # search, twice bytes.find's speed on ELF data: the magic ends in a zero), which a
        # window full of hits falls back to.
        first = -start % FATBIN_ALIGN
        column = window[first + _FATBIN_PICK::FATBIN_ALIGN]
        hit = column.find(_FATBIN_BYTE)
        hits = 0
        while hit >= 0 and not self._stopped:
            at = first + hit * FATBIN_ALIGN
            hits += 1
            if hits > _MAX_PICKED_HITS:
                for found in _FATBIN.finditer(window, at):
                    if self._stopped:
                        break
                    self._candidate(start + found.start(), found.start(), FATBIN_MAGIC,
                                    self._fatbin)
                break
            if window.startswith(FATBIN_MAGIC, at):
                self._candidate(start + at, at, FATBIN_MAGIC, self._fatbin)
            hit = column.find(_FATBIN_BYTE, hit + 1)
        # Bundles lie at page boundaries: only those are looked at, where the byte there
        # can start a magic.
        first = -start % BUNDLE_ALIGN
        for head in _BUNDLE_HEADS.finditer(window[first::BUNDLE_ALIGN]):
            if self._stopped:
                return
            at = first + head.start() * BUNDLE_ALIGN
            if window.startswith(BUNDLE_MAGIC, at):
                self._candidate(start + at, at, BUNDLE_MAGIC, self._bundle)
            elif window.startswith(COMPRESSED_MAGIC, at):
                self._candidate(start + at, at, COMPRESSED_MAGIC, self._compressed)

    def _candidate(self, offset: int, at: int, magic: bytes,
                   found: Callable[[int], None]) -> None:
        # the carry was searched with the previous piece: a magic wholly in it is not
        # found twice; a fatbinary's payloads are not searched
        if offset % (FATBIN_ALIGN if magic == FATBIN_MAGIC else BUNDLE_ALIGN) \
                or at + len(magic) <= len(self._carry) or offset < self._covered:
            return
        if len(self._containers) == MAX_CONTAINERS:
            self._stopped = f"more than {MAX_CONTAINERS} fatbinaries and bundles: the " \
                            f"rest, from byte {offset}, not read"
            self._wants.clear()
            return
        found(offset)
        self._fill()  # its header, when here, before the search goes on (`_covered`)

    def _want(self, owner: int, offset: int, size: int, done: Callable[[bytes], None],
              short_ok: bool = False) -> None:
        self._wants.append(_Want(owner, offset, size, done, short_ok=short_ok))

    def _fill(self) -> None:
        window, start = self._window, self._window_start
        end = start + len(window)
        progress = True
        while progress and self._wants:
            progress = False
            for want in list(self._wants):
                at = want.offset + len(want.got)
                if at >= end or want not in self._wants:
                    continue
                if at < start:  # behind what is held: no header announces that
                    self._refuse(want.owner, f"a header at byte {want.offset} lies behind "
                                 "the one that announced it")
                    continue
                want.got.extend(window[at - start:min(want.offset + want.size, end) - start])
                if len(want.got) == want.size:
                    self._wants.remove(want)
                    want.done(bytes(want.got))
                    progress = True

    def _count(self, offset: int, entries: int) -> bool:
        """Whether ENTRIES more entries fit the file's limit (else the container is
        refused)."""
        if self._entries + entries > MAX_ENTRIES:
            self._refuse(offset, f"more than {MAX_ENTRIES} entries in the file")
            return False
        self._entries += entries
        self._containers[offset].entries += entries
        return True

    # CUDA fatbinaries: header, then a chain of entry headers
    def _fatbin(self, offset: int) -> None:
        container = self._containers[offset] = _Container("fatbinary")

        def header(data: bytes) -> None:
            _, _, size, entries = struct.unpack_from("<IHHQ", data)
            begin = offset + size
            container.end = begin + entries
            self._covered = max(self._covered, container.end)
            if entries:
                self._entry(offset, begin)
            else:
                container.complete = True

        self._want(offset, offset, 16, header)

    def _entry(self, fatbin: int, at: int) -> None:
        container = self._containers[fatbin]
        end = container.end or 0
        if end - at < MIN_ENTRY_HEADER:
            self._refuse(fatbin, f"an entry at byte {at} is cut short by its end at "
                         f"byte {end}")
            return

        def header(data: bytes) -> None:
            kind, _, size, payload = struct.unpack_from("<HHIQ", data)
            arch = struct.unpack_from("<I", data, 28)[0]
            flags = struct.unpack_from("<Q", data, 40)[0]
            if not MIN_ENTRY_HEADER <= size <= MAX_ENTRY_HEADER:
                self._refuse(fatbin, f"an entry at byte {at} claims a {size}-byte header")
                return
            following = at + size + payload
            if following > end:
                self._refuse(fatbin, f"an entry at byte {at} ({payload} bytes) ends past "
                             f"the fatbinary's end at byte {end}")
                return
            if not self._count(fatbin, 1):
                return
            if kind in (KIND_PTX, KIND_SASS) and 0 < arch < 10000:
                name = cuda_arch_name(kind, arch, flags)
                (container.ptx if kind == KIND_PTX else container.sass).add(name)
            if following < end:
                self._entry(fatbin, following)
            else:
                container.complete = True

        self._want(fatbin, at, MIN_ENTRY_HEADER, header)

    # ROCm bundles: their header read whole
    def _bundle(self, offset: int) -> None:
        container = self._containers[offset] = _Container("offload bundle")

        def header(data: bytes) -> None:
            try:
                targets, last = bundle_targets(data, self._length_from(offset))
            except Refused as exc:
                self._refuse(offset, str(exc))
                return
            container.end = offset + last
            if self._count(offset, len(targets)):
                container.gfx.update(targets)
                container.complete = True

        self._want(offset, offset, BUNDLE_HEADER_LIMIT, header, short_ok=True)

    def _compressed(self, offset: int) -> None:
        container = self._containers[offset] = _Container("compressed offload bundle")

        def header(data: bytes) -> None:
            if data[4:6] not in (b"\1\0", b"\2\0", b"\3\0"):
                del self._containers[offset]  # "CCOB" in other bytes: not a bundle
                return
            try:
                targets = compressed_bundle_targets(data, self._length_from(offset))
            except Refused as exc:
                self._refuse(offset, str(exc))
                return
            if self._count(offset, len(targets)):
                container.gfx.update(targets)
                container.complete = True

        self._want(offset, offset, COMPRESSED_INPUT_LIMIT, header, short_ok=True)

    def _length_from(self, offset: int) -> int:
        """Bytes of the file from OFFSET on, as far as known (all of it, at `finish`)."""
        return self.position - offset if self._finished else 1 << 62

    def finish(self) -> DeviceCodeFound:
        """What the bytes fed hold; the file ended where they end. A container refused, or
        cut short by the file's end, counts for nothing and is named in one line."""
        self._finished = True
        for want in list(self._wants):
            if want in self._wants:
                self._wants.remove(want)
                if want.short_ok and want.got:
                    want.done(bytes(want.got))
        sass: set[str] = set()
        ptx: set[str] = set()
        gfx: set[str] = set()
        refusals = []
        counted = {"fatbinary": 0, "offload bundle": 0}
        entries = 0
        for offset, container in sorted(self._containers.items()):
            why = container.refusal
            if container.end is not None and container.end > self.position:
                why = f"claims to end at byte {container.end}, past the file's end at " \
                      f"byte {self.position}"
            elif why is None and not container.complete:
                why = f"its header ends past the file's end at byte {self.position}"
            if why is not None:
                refusals.append(f"{container.what} at byte {offset}: {why}")
                continue
            counted["fatbinary" if container.what == "fatbinary" else "offload bundle"] += 1
            entries += container.entries
            sass |= container.sass
            ptx |= container.ptx
            gfx |= container.gfx
        if self._stopped:
            refusals.append(self._stopped)
        parts = [f"{n} {what}{'s' if n > 1 else ''}".replace("binarys", "binaries")
                 for what, n in counted.items() if n]
        detail = ", ".join(parts) + (f": {entries} entries" if parts else "")
        return DeviceCodeFound(sort_archs(sass), sort_archs(ptx), sort_archs(gfx), detail,
                               tuple(refusals))


# The hazard kind of device code whose header breaks a limit (that container not counted).
DEVICE_CODE_HAZARD = "device-code-limit"


def device_code_evidence(path: str, found: DeviceCodeFound
                         ) -> tuple[Optional[DeviceCode], list[Hazard]]:
    """What the shared object at PATH carries (FOUND), as the layer's scan keeps it: its
    device code, if any, and a hazard for each container refused."""
    hazards = [Hazard(DEVICE_CODE_HAZARD, path, f"{refusal}: not counted", severe=False)
               for refusal in found.refusals]
    if not found.any:
        return None, hazards
    return DeviceCode(path, found.sass, found.ptx, found.gfx, found.detail), hazards


def read_device_code(data: bytes, chunk: int = 1 << 20) -> DeviceCodeFound:
    """What the whole file DATA holds, fed in CHUNK-byte pieces (tests and tools)."""
    reader = DeviceCodeReader()
    for at in range(0, len(data), chunk):
        reader.feed(data[at:at + chunk])
    return reader.finish()
