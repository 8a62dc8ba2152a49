"""The matrix file's shape where more than its loader walks it: the editor (add-version,
retire) finds an accelerator's version list, and `plan --changed-since` attributes each
line of the file to the entry that holds it. One spelling of the sections and keys for all
three."""

from __future__ import annotations

OS = "os"  # os: {NAME: {from: ...}}
ACCELERATORS = "accelerators"  # accelerators: {NAME: {versions: [...]}}
IMAGES = "images"  # images: {KIND: {template: ...}}
VERSIONS = "versions"  # an accelerator's list of versions
VERSION = "version"  # the key of one entry of that list
