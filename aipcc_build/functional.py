"""What `functools` and `contextlib` give the modules a `verify` of one image loads (`cache`,
`partial`, `contextmanager`, `suppress`), without importing either: `functools` builds a
namedtuple as it loads (compiling its constructor: the parser's first start in a process)
and loads `collections`, with `keyword`, `operator` and `reprlib`; `contextlib` imports it.
Together, 13 M of the 90 M instructions of that check."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager
    from functools import partial
    from types import TracebackType
    from typing import Any, Callable, Optional, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])
    T = TypeVar("T")
else:
    # The class `functools.partial` is (functools imports it from here).
    from _functools import partial

__all__ = ["cache", "contextmanager", "partial", "suppress"]


def cache(function: F) -> F:
    """FUNCTION's result kept for each arguments (positional, hashable) for the life of the
    process, as `functools.cache` keeps them: a call that raises keeps nothing, and two
    threads calling at once may both compute it (the first result is kept)."""
    results: dict[Any, Any] = {}

    def cached(*args: Any) -> Any:
        try:
            return results[args]
        except KeyError:
            pass
        return results.setdefault(args, function(*args))

    _named_as(cached, function)
    return cached  # type: ignore[return-value]


def _named_as(wrapper: Any, function: Any) -> None:
    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(wrapper, name, getattr(function, name))
    wrapper.__wrapped__ = function


class _Generated:
    """The context of a generator that yields once (`contextmanager`)."""

    def __init__(self, generator: Any) -> None:  # a generator
        self._generator = generator

    def __enter__(self) -> Any:
        try:
            return next(self._generator)
        except StopIteration:
            raise RuntimeError("the context's generator did not yield") from None

    def __exit__(self, kind: Optional[type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> bool:
        if kind is None:
            try:
                next(self._generator)
            except StopIteration:
                return False
            raise RuntimeError("the context's generator yielded twice")
        if value is None:
            value = kind()
        try:
            self._generator.throw(value)
        except StopIteration as stopped:
            # The generator ended: it handled the exception (unless the exception was a
            # StopIteration of the block's own, which ends it too).
            return stopped is not value
        except RuntimeError as error:
            # A StopIteration thrown in comes back as the RuntimeError wrapping it.
            if error is value or isinstance(value, StopIteration) \
                    and error.__cause__ is value:
                value.__traceback__ = traceback
                return False
            raise
        except BaseException as error:
            if error is not value:
                raise  # another exception, raised by the generator's own handling
            value.__traceback__ = traceback
            return False  # the same exception: it goes on from the block
        raise RuntimeError("the context's generator yielded after an exception")


def contextmanager(function: Callable[..., Iterator[T]]
                   ) -> Callable[..., AbstractContextManager[T]]:
    """A context manager of each call of FUNCTION, a generator that yields once, as
    `contextlib.contextmanager` makes: what the block raises is raised at the yield."""

    def context(*args: Any, **kwargs: Any) -> _Generated:
        return _Generated(function(*args, **kwargs))

    _named_as(context, function)
    return context


class suppress:  # noqa: N801 (contextlib's name and use)
    """Within: the exceptions of KINDS (and their subclasses) end the block silently."""

    def __init__(self, *kinds: type[BaseException]) -> None:
        self._kinds = kinds

    def __enter__(self) -> None:
        pass

    def __exit__(self, kind: Optional[type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> bool:
        return kind is not None and issubclass(kind, self._kinds)
