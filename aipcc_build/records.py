"""Frozen records: `@record` makes what `@dataclass(frozen=True)` makes, without loading
`dataclasses` or compiling code at import.

dataclasses writes the source of six functions for each frozen class (`__init__`,
`__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`) and compiles each one: about
a millisecond a class, which was most of a warm `aipcc-build validate` (issue 37: it loads
twenty such classes to re-judge an image in well under a tenth of a second). Even its field
processing alone, and loading the module, cost as much again. Here the six are shared
functions that read the class's fields, which `record` reads from the annotations itself;
`field` takes the place of `dataclasses.field` and `replace` of `dataclasses.replace`.

The class is still a dataclass: its `__dataclass_fields__` are made by `dataclasses` when
first asked for (`dataclasses.fields`, `replace`, `asdict`, `is_dataclass`), from the same
specification; pickling needs none of it. Equality, hashing and the repr are those of a
dataclass: the fields in order, those with `compare=False` or `repr=False` left out; mypy
checks it as a frozen dataclass.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Any, Callable, TypeVar, overload

    from typing_extensions import dataclass_transform

    T = TypeVar("T")
else:
    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda function: function


class _Missing:
    """No default (dataclasses' MISSING, without loading dataclasses)."""

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


class _FieldSpec:
    """What `field` says of one field; `record` takes it off the class."""

    __slots__ = ("default", "default_factory", "repr", "compare")

    def __init__(self, default: Any, default_factory: Any, repr: bool, compare: bool) -> None:
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare


if TYPE_CHECKING:  # the type checker's: made at run time, they were typing's
    @overload
    def field(*, default: T, repr: bool = True, compare: bool = True) -> T: ...
    @overload
    def field(*, default_factory: Callable[[], T], repr: bool = True, compare: bool = True
              ) -> T: ...
    @overload
    def field(*, repr: bool = True, compare: bool = True) -> Any: ...
def field(*, default: Any = _MISSING, default_factory: Any = _MISSING, repr: bool = True,
          compare: bool = True) -> Any:
    """A record field's default, or the factory of a fresh default for each record, and
    whether the repr shows it and equality and hashing compare it (as `dataclasses.field`)."""
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return _FieldSpec(default, default_factory, repr, compare)


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    spec = cls.__record__[1]
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
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record__[2])
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _compared(self) == _compared(other)


def _compared(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in self.__record__[3])


def _hash(self: Any) -> int:
    return hash(_compared(self))


def _setattr(self: Any, name: str, value: Any) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot delete field {name!r}")


class _DataclassFields:
    """A record's `__dataclass_fields__`, made by `dataclasses` on first use: the class's
    fields as `dataclasses.field`s, processed as `@dataclass` processes them (it then
    replaces this with its own)."""

    def __get__(self, instance: Any, owner: Any) -> Any:
        import dataclasses

        def given(value: Any) -> Any:
            return dataclasses.MISSING if value is _MISSING else value

        for name, default, factory, shown, compared in owner.__record__[0]:
            setattr(owner, name, dataclasses.field(
                default=given(default), default_factory=given(factory), repr=shown,
                compare=compared))
        # Fields only: every method is the record's own.
        dataclasses.dataclass(owner, init=False, repr=False, eq=False)
        return owner.__dict__["__dataclass_fields__"]


_DATACLASS_FIELDS = _DataclassFields()  # it keeps nothing of its own: one for every record
_METHODS = (("__init__", _init), ("__repr__", _repr), ("__eq__", _eq), ("__hash__", _hash),
            ("__setattr__", _setattr), ("__delattr__", _delattr))


def _from_dataclasses_field(cls: type, name: str, given: Any, missing: Any) -> _FieldSpec:
    """The `_FieldSpec` of a `dataclasses.field` GIVEN to field NAME of CLS, which must say
    no more than `field` can."""
    if not given.init or given.metadata or given.hash is not None or \
            getattr(given, "kw_only", missing) not in (missing, False):
        raise TypeError(f"{cls.__qualname__}.{name}: a record's fields are all set by "
                        "__init__, positionally or by name (no init=False, hash, metadata "
                        "or kw_only)")
    return _FieldSpec(_MISSING if given.default is missing else given.default,
                      _MISSING if given.default_factory is missing else given.default_factory,
                      given.repr, given.compare)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[T]) -> type[T]:
    """CLS as a frozen dataclass whose methods are shared, not compiled for it."""
    made: Any = cls
    namespace = cls.__dict__
    for base in cls.__mro__[1:]:
        if "__record__" in base.__dict__:
            raise TypeError(f"{cls.__qualname__}: a record derives from no other record")
    # A `dataclasses.field` is taken as well (only once something loaded dataclasses can
    # a class hold one).
    loaded = sys.modules.get("dataclasses")
    fields: list[tuple[str, Any, Any, bool, bool]] = []
    init: list[tuple[str, Any, Any]] = []
    shown: list[str] = []
    compared: list[str] = []
    defaulted = False
    for name in namespace.get("__annotations__", ()):
        value = namespace.get(name, _MISSING)
        if loaded is not None and isinstance(value, loaded.Field):
            value = _from_dataclasses_field(cls, name, value, loaded.MISSING)
        if value.__class__ is _FieldSpec:
            default, factory = value.default, value.default_factory
            spec = (name, default, factory, value.repr, value.compare)
            if default is _MISSING:
                delattr(made, name)  # as dataclasses does: no class attribute
            else:
                setattr(made, name, default)
        else:
            default, factory = value, _MISSING
            spec = (name, value, _MISSING, True, True)
        if default is not _MISSING and type(default).__hash__ is None:
            raise ValueError(f"mutable default {type(default)} for field {name} is not "
                             "allowed: use default_factory")
        if default is _MISSING and factory is _MISSING:
            if defaulted:
                raise TypeError(f"non-default argument {name!r} follows default argument")
        else:
            defaulted = True
        fields.append(spec)
        init.append((name, default, factory))
        if spec[3]:
            shown.append(name)
        if spec[4]:  # as dataclasses does (field.hash None: as compare): hash what is compared
            compared.append(name)
    # One attribute: each set on a class costs as much as a field (issue 37). The fields;
    # what __init__ takes; what the repr shows; what equality and hashing compare.
    made.__record__ = (tuple(fields), tuple(init), tuple(shown), tuple(compared))
    made.__dataclass_fields__ = _DATACLASS_FIELDS
    if not cls.__doc__:  # as dataclasses writes it: the signature, here without types
        made.__doc__ = f"{cls.__name__}({', '.join(spec[0] for spec in fields)})"
    for name, function in _METHODS:
        if name not in namespace:  # one the class defines is kept, as dataclasses does
            setattr(made, name, function)
    return made


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record OBJ with CHANGES (as `dataclasses.replace`)."""
    for name, _, _ in type(obj).__record__[1]:  # type: ignore[attr-defined]
        if name not in changes:
            changes[name] = getattr(obj, name)
    return type(obj)(**changes)
