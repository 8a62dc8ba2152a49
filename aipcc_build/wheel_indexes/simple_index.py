"""The "simple" repository HTML format (PEP 503, with PEP 658/714 metadata): written by
`aipcc-build index`, read from an index a variant mirrors (`index_source`) and by whoever
checks a published index. The one module that knows it.

A project page links each file with a `#sha256=` fragment (pip checks the download
against it), `data-requires-python` (pip skips files for other Pythons without
downloading them) and `data-core-metadata` / `data-dist-info-metadata` (the hash of the
`FILE.metadata` served beside the file: pip and uv resolve from it without downloading
whole wheels; pip before 23.3 reads the older attribute name).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Optional

REPOSITORY_VERSION = "1.0"
GENERATION_META = "aipcc:generation"


@dataclass(frozen=True)
class FileLink:
    filename: str
    url: str  # relative to the project page, without the fragment
    sha256: str
    requires_python: Optional[str] = None
    metadata_sha256: Optional[str] = None  # PEP 658: FILE.metadata is served beside it


def _page(title: str, anchors: Sequence[str], generation: Optional[int]) -> str:
    meta = [f'<meta name="pypi:repository-version" content="{REPOSITORY_VERSION}">']
    if generation is not None:
        meta.append(f'<meta name="{GENERATION_META}" content="{generation}">')
    body = "\n".join(f"    {anchor}<br/>" for anchor in anchors)
    return (f"<!DOCTYPE html>\n<html>\n  <head>\n    {''.join(meta)}\n"
            f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n"
            f"    <h1>{html.escape(title)}</h1>\n{body}\n  </body>\n</html>\n")


def project_page(project: str, links: Sequence[FileLink]) -> str:
    """The page of one project: every file of every version, in the order given."""
    anchors = []
    for link in links:
        attributes = [f'href="{html.escape(link.url)}#sha256={link.sha256}"']
        if link.requires_python:
            attributes.append(f'data-requires-python="{html.escape(link.requires_python)}"')
        if link.metadata_sha256:
            value = f"sha256={link.metadata_sha256}"
            attributes += [f'data-core-metadata="{value}"', f'data-dist-info-metadata="{value}"']
        anchors.append(f"<a {' '.join(attributes)}>{html.escape(link.filename)}</a>")
    return _page(f"Links for {project}", anchors, None)


def root_page(projects: Sequence[str], generation: Optional[int] = None) -> str:
    """The index's root page: one link per (normalised) project, and the generation that
    wrote it."""
    return _page("Simple index", [f'<a href="{html.escape(p)}/">{html.escape(p)}</a>'
                                  for p in projects], generation)


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[tuple[dict[str, Optional[str]], str]] = []
        self.meta: dict[str, str] = {}
        self._open: Optional[dict[str, Optional[str]]] = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        if tag == "a":
            self._open, self._text = dict(attrs), []
        elif tag == "meta":
            values = dict(attrs)
            if values.get("name") and values.get("content") is not None:
                self.meta[str(values["name"])] = str(values["content"])

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.anchors.append((self._open, "".join(self._text).strip()))
            self._open = None


def read_project_page(text: str) -> list[FileLink]:
    parser = _Anchors()
    parser.feed(text)
    links = []
    for attributes, name in parser.anchors:
        url, _, fragment = (attributes.get("href") or "").partition("#")
        metadata = attributes.get("data-core-metadata") or \
            attributes.get("data-dist-info-metadata")
        links.append(FileLink(
            filename=name, url=url, sha256=fragment.removeprefix("sha256="),
            requires_python=attributes.get("data-requires-python"),
            metadata_sha256=metadata.removeprefix("sha256=")
            if metadata and metadata != "true" else None))
    return links


def read_root_page(text: str) -> tuple[list[str], Optional[int]]:
    """(projects, generation) of a root page."""
    parser = _Anchors()
    parser.feed(text)
    generation = parser.meta.get(GENERATION_META)
    return ([name for _, name in parser.anchors],
            int(generation) if generation and generation.isdigit() else None)
