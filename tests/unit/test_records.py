"""records.record: a frozen dataclass without code compiled for it, nor dataclasses loaded
(issue 37), behaves as `@dataclass(frozen=True)` does: construction, defaults, equality,
hashing, repr, frozen fields, the refusals of a malformed class, and the dataclasses
functions (their fields made when first asked for); `records.field` and `records.replace`
as dataclasses' own."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from dataclasses import field
from typing import Optional

import pytest

from aipcc_build import records
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
class Own:
    """The same fields, with the records' own `field`."""

    name: str
    size: int = 0
    note: Optional[str] = records.field(default=None, compare=False, repr=False)
    tags: tuple[str, ...] = ()
    extra: dict[str, str] = records.field(default_factory=dict)


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


@pytest.mark.parametrize("made", [Point, Own])
def test_its_dataclass_fields_are_those_dataclasses_makes(made: type) -> None:
    def described(cls: type) -> list[tuple[object, ...]]:
        return [(f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.compare,
                 f.hash) for f in dataclasses.fields(cls)]

    assert described(made) == described(Twin)
    assert made("a", 2, "hidden", ("x",)) == made("a", 2, "seen", ("x",))
    assert repr(made("a", 2, "hidden", ("x",))).split("(", 1)[1] == \
        repr(Twin("a", 2, "hidden", ("x",))).split("(", 1)[1]
    assert "extra" not in vars(made) and made.__dict__["note"] is None  # as on Twin
    assert "extra" not in vars(Twin) and Twin.__dict__["note"] is None


def test_replace_is_dataclasses_replace() -> None:
    own = Own("a", 1, "n", ("x",), {"k": "v"})
    assert records.replace(own, size=5) == dataclasses.replace(own, size=5) == \
        Own("a", 5, "n", ("x",), {"k": "v"})
    assert records.replace(own, note="m").note == "m"
    with pytest.raises(TypeError):
        records.replace(own, colour=1)
    with pytest.raises(TypeError):
        dataclasses.replace(own, colour=1)


def test_a_class_dataclasses_refuses_is_refused() -> None:
    with pytest.raises(ValueError):
        @record
        class Mutable:
            items: list[str] = []  # noqa: RUF012
    with pytest.raises(TypeError):
        @record
        class Order:
            first: str = ""
            second: str
    with pytest.raises(TypeError):
        @record
        class NotInit:
            first: str = field(default="", init=False)
    with pytest.raises(ValueError):
        records.field(default=1, default_factory=int)
    with pytest.raises(TypeError):
        @record
        class Derived(Plain):
            third: int = 0


def test_records_load_no_dataclasses_until_asked() -> None:
    code = ("import sys\n"
            "from aipcc_build.records import field, record, replace\n"
            "@record\n"
            "class A:\n"
            "    name: str\n"
            "    extra: dict = field(default_factory=dict)\n"
            "a = replace(A('x'), name='y')\n"
            "assert a == A('y') and hash(A('y', {}).name)\n"
            "print('dataclasses' in sys.modules)\n"
            "import dataclasses\n"
            "print([f.name for f in dataclasses.fields(a)])\n")
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split("\n")[:2] == ["False", "['name', 'extra']"]
