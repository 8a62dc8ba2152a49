"""Crafted layer stacks, one per class of the final-tree model that issue 37 found the
verdict getting wrong, each with the verdict a CUDA 12.8 image must get and the path whose
presence in the engine's own tree decides it. Judged from an OCI layout by the unit tests
(tests/unit/validate/test_final_tree_verdicts.py) and, against the real engine and from
containers-storage, by tests/integration/test_final_tree_engine.py."""

from __future__ import annotations

import json
from dataclasses import dataclass

from tests.support.raw_tar import Member, raw_tar

STATUS_12_9 = (b"Package: cuda-cudart-12-9\nStatus: install ok installed\n"
               b"Version: 12.9.79-1\n")
PIP_12_9 = b"[global]\nindex-url = https://wheels.example/cuda12.9/simple\n"
VERSION_12_9 = json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.9.79"}}).encode()
VERSION_12_8 = json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.8.93"}}).encode()
RUNTIME_12_9 = b"x"  # named for its release: the name alone is the evidence


def _dir(name: bytes) -> Member:
    return Member(name, b"5", mode=0o755)


def _link(name: bytes, target: bytes) -> Member:
    return Member(name, b"2", link=target, mode=0o777)


def _hard(name: bytes, target: bytes) -> Member:
    return Member(name, b"1", link=target, mode=0o644)


@dataclass(frozen=True)
class Case:
    name: str
    layers: tuple[bytes, ...]
    ok: bool  # the verdict of a CUDA 12.8 image
    shows: str  # the path holding the other release in the engine's tree (when not ok)
    hidden: str = ""  # the path the engine hides (when ok)


CASES = (
    # A directory whited out and written again in the same layer merges with the lower one.
    Case("whiteout-then-recreate", (
        raw_tar([_dir(b"opt/"), _dir(b"opt/nv/"),
                 Member(b"opt/nv/libcudart.so.12.9.79", data=RUNTIME_12_9)]),
        raw_tar([_dir(b"opt/"), Member(b"opt/.wh.nv"), _dir(b"opt/nv/")]),
    ), ok=False, shows="/opt/nv/libcudart.so.12.9.79"),
    # dpkg reads its status through a hard link, and through a symlink.
    Case("status-hard-link", (
        raw_tar([_dir(b"opt/"), Member(b"opt/blob", data=STATUS_12_9),
                 _dir(b"var/"), _dir(b"var/lib/"), _dir(b"var/lib/dpkg/"),
                 _hard(b"var/lib/dpkg/status", b"opt/blob")]),
    ), ok=False, shows="/var/lib/dpkg/status"),
    Case("status-symlink", (
        raw_tar([_dir(b"opt/"), _dir(b"opt/state/"), Member(b"opt/state/db", data=STATUS_12_9)]),
        raw_tar([_dir(b"var/"), _dir(b"var/lib/"), _dir(b"var/lib/dpkg/"),
                 _link(b"var/lib/dpkg/status", b"/opt/state/db")]),
    ), ok=False, shows="/var/lib/dpkg/status"),
    # A status behind a link that dpkg cannot read (a directory): nothing of the packages
    # is judged, and a gate fails closed.
    Case("status-symlink-to-directory", (
        raw_tar([_dir(b"opt/"), _dir(b"opt/state/"), _dir(b"var/"), _dir(b"var/lib/"),
                 _dir(b"var/lib/dpkg/"), _link(b"var/lib/dpkg/status", b"/opt/state")]),
    ), ok=False, shows="/var/lib/dpkg/status"),
    # pip reads its config through a symlink into content written elsewhere.
    Case("pip-conf-symlink", (
        raw_tar([_dir(b"opt/"), _dir(b"opt/conf/"), Member(b"opt/conf/global", data=PIP_12_9),
                 _dir(b"etc/"), _link(b"etc/pip.conf", b"../opt/conf/global")]),
    ), ok=False, shows="/etc/pip.conf"),
    # A toolkit's version file as a hard link to bytes written under another name.
    Case("version-json-hard-link", (
        raw_tar([_dir(b"opt/"), Member(b"opt/v", data=VERSION_12_9),
                 _dir(b"usr/"), _dir(b"usr/local/"), _dir(b"usr/local/cuda-12.8/"),
                 _hard(b"usr/local/cuda-12.8/version.json", b"opt/v")]),
    ), ok=False, shows="/usr/local/cuda-12.8/version.json"),
    # A member written through a symlink the same layer made lands where the link leads.
    Case("member-through-same-layer-symlink", (
        raw_tar([_dir(b"var/"), _dir(b"var/lib/"), _dir(b"var/lib/dpkg/"),
                 _link(b"d", b"var/lib/dpkg"), Member(b"d/status", data=STATUS_12_9)]),
    ), ok=False, shows="/var/lib/dpkg/status"),
    # A later regular file over a lower directory that held the other release hides it.
    Case("file-over-directory", (
        raw_tar([_dir(b"opt/"), _dir(b"opt/nv/"),
                 Member(b"opt/nv/libcudart.so.12.9.79", data=RUNTIME_12_9),
                 _dir(b"usr/"), _dir(b"usr/local/"), _dir(b"usr/local/cuda-12.8/"),
                 Member(b"usr/local/cuda-12.8/version.json", data=VERSION_12_8)]),
        raw_tar([_dir(b"opt/"), Member(b"opt/nv", data=b"a file now")]),
    ), ok=True, shows="", hidden="/opt/nv/libcudart.so.12.9.79"),
    # A later directory over a lower /usr/local/cuda symlink replaces the link.
    Case("directory-over-cuda-symlink", (
        raw_tar([_dir(b"usr/"), _dir(b"usr/local/"), _dir(b"usr/local/cuda-12.8/"),
                 Member(b"usr/local/cuda-12.8/version.json", data=VERSION_12_8),
                 _link(b"usr/local/cuda", b"cuda-12.9")]),
        raw_tar([_dir(b"usr/"), _dir(b"usr/local/"), _dir(b"usr/local/cuda/"),
                 Member(b"usr/local/cuda/README", data=b"a directory now")]),
    ), ok=True, shows="", hidden="/usr/local/cuda"),
    # An opaque marker written through a symlink makes the directory it leads to opaque.
    Case("opaque-through-symlink", (
        raw_tar([_dir(b"opt/"), _dir(b"opt/x/"),
                 Member(b"opt/x/libcudart.so.12.9.79", data=RUNTIME_12_9),
                 _dir(b"usr/"), _dir(b"usr/local/"), _dir(b"usr/local/cuda-12.8/"),
                 Member(b"usr/local/cuda-12.8/version.json", data=VERSION_12_8)]),
        raw_tar([_dir(b"opt/"), _dir(b"opt/x/"), _link(b"opt/l", b"x"),
                 Member(b"opt/l/.wh..wh..opq")]),
    ), ok=True, shows="", hidden="/opt/x/libcudart.so.12.9.79"),
)
