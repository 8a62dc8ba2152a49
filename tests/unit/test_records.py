"""records.record: a frozen dataclass without code compiled for it (issue 37) behaves as
`@dataclass(frozen=True)` does: construction, defaults, equality, hashing, repr, frozen
fields, and the dataclasses functions the product uses on its records."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import field
from typing import Optional

import pytest

from aipcc_build.records import record


@record
class Point:
    """A test record."""

    name: str
    size: int = 0
    note: Optional[str] = field(default=None, compare=False, repr=False)
    tags: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Twin:
    """The same fields, made by dataclasses."""

    name: str
    size: int = 0
    note: Optional[str] = field(default=None, compare=False, repr=False)
    tags: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)


@record
class Plain:
    first: str
    second: int


def test_construction_and_defaults_as_a_dataclass() -> None:
    point = Point("a", 2, tags=("x",))
    assert (point.name, point.size, point.note, point.tags, point.extra) == \
        ("a", 2, None, ("x",), {})
    assert Point("a").extra is not Point("a").extra  # a fresh default each time
    assert repr(Point("a", 2, "hidden", ("x",))).replace("Point", "Twin") == \
        repr(Twin("a", 2, "hidden", ("x",)))


@pytest.mark.parametrize("args, kwargs", [((), {}), (("a", 1, None, (), {}, 9), {}),
                                          (("a",), {"name": "b"}), (("a",), {"colour": 1})])
def test_wrong_arguments_are_refused_as_a_dataclass_refuses_them(
        args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        Point(*args, **kwargs)  # type: ignore[arg-type, misc]
    with pytest.raises(TypeError):
        Twin(*args, **kwargs)  # type: ignore[arg-type, misc]


def test_equality_and_hash_over_the_compared_fields() -> None:
    assert Point("a", 1, note="x") == Point("a", 1, note="y")
    assert Point("a", 1) != Point("a", 2)
    assert Point("a") != Twin("a")  # another class is never equal
    assert hash(Plain("a", 1)) == hash(Plain("a", 1))
    assert {Plain("a", 1), Plain("a", 1), Plain("b", 1)} == {Plain("a", 1), Plain("b", 1)}
    with pytest.raises(TypeError):  # a dict field is unhashable, as in a dataclass
        hash(Point("a"))


def test_fields_cannot_be_assigned_or_deleted() -> None:
    plain = Plain("a", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.first = "b"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del plain.first  # type: ignore[misc]


def test_the_dataclasses_functions_and_pickle_work_on_it() -> None:
    point = Point("a", 1, tags=("x",))
    assert dataclasses.is_dataclass(point)
    assert [f.name for f in dataclasses.fields(point)] == \
        ["name", "size", "note", "tags", "extra"]
    assert dataclasses.replace(point, size=5) == Point("a", 5, tags=("x",))
    assert dataclasses.asdict(point) == {"name": "a", "size": 1, "note": None,
                                         "tags": ("x",), "extra": {}}
    assert pickle.loads(pickle.dumps(point)) == point


def test_a_record_without_a_docstring_gets_its_fields_as_one() -> None:
    assert Plain.__doc__ == "Plain(first, second)"
    assert Point.__doc__ == "A test record."
