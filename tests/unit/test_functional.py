"""functional's stand-ins for functools and contextlib (what `verify`'s path uses, without
importing either) against the standard library's own: the same values, the same
exceptions raised or suppressed, in every way a block and its generator can end."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any, Callable

import pytest

from aipcc_build import functional


class Mine(Exception):
    pass


class Other(Exception):
    pass


# Each generator a context is made of, by what it does with what the block raises.
def plain() -> Iterator[int]:
    yield 1


def cleans_up(log: list[str]) -> Iterator[int]:
    try:
        yield 1
    finally:
        log.append("cleaned")


def swallows() -> Iterator[int]:
    try:  # noqa: SIM105 (the generator's own handling is what is compared)
        yield 1
    except Mine:
        pass


def replaces() -> Iterator[int]:
    try:
        yield 1
    except Mine as exc:
        raise Other("instead") from exc


def reraises() -> Iterator[int]:
    try:
        yield 1
    except BaseException:
        raise


def yields_none() -> Iterator[int]:
    return
    yield 1  # a generator that ends at once


def yields_twice() -> Iterator[int]:
    yield 1
    yield 2


def yields_after_an_exception() -> Iterator[int]:
    try:
        yield 1
    except Mine:
        yield 2


GENERATORS: dict[str, Callable[[list[str]], Iterator[int]]] = {
    "plain": lambda log: plain(), "cleans up": cleans_up, "swallows": lambda log: swallows(),
    "replaces": lambda log: replaces(), "reraises": lambda log: reraises(),
    "yields none": lambda log: yields_none(), "yields twice": lambda log: yields_twice(),
    "yields after an exception": lambda log: yields_after_an_exception(),
}
# What each block raises (None: it ends normally).
BLOCKS: dict[str, Callable[[], BaseException | None]] = {
    "nothing": lambda: None, "Mine": lambda: Mine("m"), "Other": lambda: Other("o"),
    "StopIteration": lambda: StopIteration("s"), "RuntimeError": lambda: RuntimeError("r"),
    "KeyboardInterrupt": lambda: KeyboardInterrupt(),
}


def outcome(make: Callable[[Callable[..., Iterator[int]]], Callable[..., Any]],
            generator: str, block: str) -> tuple[Any, ...]:
    log: list[str] = []
    context = make(GENERATORS[generator])
    raised = BLOCKS[block]()
    entered = None
    try:
        with context(log) as value:
            entered = value
            if raised is not None:
                raise raised
    except BaseException as exc:  # noqa: BLE001 (every ending compared)
        return (entered, tuple(log), type(exc), exc is raised,
                type(exc.__cause__), exc.__cause__ is raised)
    return entered, tuple(log), None


@pytest.mark.parametrize("block", sorted(BLOCKS))
@pytest.mark.parametrize("generator", sorted(GENERATORS))
def test_contextmanager_ends_as_contextlibs_does(generator: str, block: str) -> None:
    assert outcome(functional.contextmanager, generator, block) == \
        outcome(contextlib.contextmanager, generator, block)


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_suppress_suppresses_what_contextlibs_does(block: str) -> None:
    def ending(suppress: Callable[..., Any]) -> Any:
        raised = BLOCKS[block]()
        try:
            with suppress(Mine, LookupError):
                if raised is not None:
                    raise raised
        except BaseException as exc:  # noqa: BLE001
            return type(exc), exc is raised
        return None

    assert ending(functional.suppress) == ending(contextlib.suppress)
    with functional.suppress(LookupError):
        raise KeyError("a subclass")


def test_cache_computes_once_per_arguments_and_keeps_no_failure() -> None:
    calls: list[tuple[Any, ...]] = []

    def compute(*args: Any) -> Any:
        calls.append(args)
        if args == ("fail",):
            raise ValueError("no")
        return object()

    cached = functional.cache(compute)
    assert cached() is cached() and cached(1) is cached(1) and cached(1) is not cached(2)
    with pytest.raises(ValueError):
        cached("fail")
    with pytest.raises(ValueError):
        cached("fail")
    assert calls == [(), (1,), (2,), ("fail",), ("fail",)]
    assert cached.__name__ == "compute" and cached.__wrapped__ is compute  # type: ignore[attr-defined]


def test_partial_is_functools_own() -> None:
    assert functional.partial is functools.partial
