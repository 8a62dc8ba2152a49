"""yaml_text makes the nodes itself for the plain documents the engines are built of: the
text must be what PyYAML's own safe dumpers write, aliases and refusals included."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from aipcc_build.plan.emit import yaml_text


def pyyaml(document: Any, dumper: Any) -> str:
    return yaml.dump(document, Dumper=dumper, sort_keys=False, width=4096)


def dumpers() -> list[Any]:
    return [yaml.SafeDumper] + ([yaml.CSafeDumper] if yaml.__with_libyaml__ else [])


SHARED = {"a": 1}
LOOP: list[Any] = []
LOOP.append(LOOP)
DOCUMENTS = [
    {"x": [SHARED, SHARED], "z": {}, "w": [], "k": {1: "x", None: 2, False: [[]]},
     "y": [True, False, None, 0, -3, 10**30, "", "yes", "1.5", "null", "~", "a: b", "- x",
           "#", "é\u2028", "line\nbreak", " lead", "x" * 5000, 1.5, float("inf")]},
    {"s": {1, 2}, "t": (1, (SHARED,)), "u": ()},
    LOOP,
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_text_is_pyyamls(document: Any) -> None:
    for dumper in dumpers():
        assert yaml_text(document) == pyyaml(document, dumper)


@pytest.mark.parametrize("document", [object(), {"a": [b"x", {1.5j}]}])
def test_what_a_safe_dump_refuses_is_refused(document: Any) -> None:
    with pytest.raises(yaml.representer.RepresenterError) as refused:
        pyyaml(document, dumpers()[-1])
    with pytest.raises(yaml.representer.RepresenterError) as ours:
        yaml_text(document)
    assert str(ours.value) == str(refused.value)
