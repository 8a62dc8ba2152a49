"""Read back the simple-index pages `publish/simple_index` writes, as pip and uv see them:
what the index tests check a published index against."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Optional

from aipcc_build.publish.simple_index import GENERATION_META, FileLink


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
