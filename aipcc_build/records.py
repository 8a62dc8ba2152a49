"""Frozen records: `@record` makes what `@dataclass(frozen=True)` makes, without compiling
code at import.

dataclasses writes the source of six functions for each frozen class (`__init__`,
`__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`) and compiles each one: about
a millisecond a class, which was most of a warm `aipcc-build validate` (issue 37: it loads
twenty such classes to re-judge an image in well under a tenth of a second). Here the six
are shared functions that read the class's fields; the class is still a dataclass
(`dataclasses.fields`, `replace`, `asdict` and pickling work alike) and mypy checks it as a
frozen one. Equality, hashing and the repr are those of a dataclass: the fields in order,
those with `compare=False` or `repr=False` left out.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda function: function

T = TypeVar("T")
_MISSING = dataclasses.MISSING


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    spec = cls.__record_init__
    if len(args) > len(spec):
        raise TypeError(f"{cls.__qualname__}.__init__() takes {len(spec) + 1} positional "
                        f"arguments but {len(args) + 1} were given")
    put = object.__setattr__
    for (name, _, _), value in zip(spec, args):
        if name in kwargs:
            raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for "
                            f"argument {name!r}")
        put(self, name, value)
    for name, default, factory in spec[len(args):]:
        if name in kwargs:
            put(self, name, kwargs.pop(name))
        elif default is not _MISSING:
            put(self, name, default)
        elif factory is not _MISSING:
            put(self, name, factory())
        else:
            raise TypeError(f"{cls.__qualname__}.__init__() missing 1 required argument: "
                            f"{name!r}")
    if kwargs:
        raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument "
                        f"{next(iter(kwargs))!r}")
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_repr__)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _compared(self) == _compared(other)


def _compared(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in self.__record_compare__)


def _hash(self: Any) -> int:
    return hash(_compared(self))


def _setattr(self: Any, name: str, value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,
                                                            dataclasses.Field))
def record(cls: type[T]) -> type[T]:
    """CLS as a frozen dataclass whose methods are shared, not compiled for it."""
    # A class without a docstring gets its signature as one, which dataclasses would read
    # through `inspect` and `tokenize` (compiling tokenize's patterns): written here.
    undocumented = not cls.__doc__
    if undocumented:
        cls.__doc__ = cls.__name__
    # Fields only: with every generated method turned off, dataclasses compiles nothing.
    made: Any = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    fields = dataclasses.fields(made)
    if undocumented:
        made.__doc__ = f"{cls.__name__}({', '.join(field.name for field in fields)})"
    if any(not field.init for field in fields):
        raise TypeError(f"{cls.__qualname__}: a record's fields are all set by __init__")
    made.__record_init__ = tuple(
        (field.name, field.default, field.default_factory) for field in fields)
    made.__record_repr__ = tuple(
        field.name for field in fields if field.repr)
    # As dataclasses does (field.hash None: as compare): hash what is compared.
    made.__record_compare__ = tuple(
        field.name for field in fields if field.compare)
    for name, function in (("__init__", _init), ("__repr__", _repr), ("__eq__", _eq),
                           ("__hash__", _hash), ("__setattr__", _setattr),
                           ("__delattr__", _delattr)):
        if name not in cls.__dict__:  # one the class defines is kept, as dataclasses does
            setattr(made, name, function)
    return made
