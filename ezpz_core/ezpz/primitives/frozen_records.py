"""``frozen``: attrs' frozen record classes, with ``__repr__``, ``__eq__`` and ``__hash__`` shared, not compiled per class.

attrs writes and compiles a ``__repr__``, ``__eq__`` and ``__hash__`` for every
class it decorates: about 0.3 ms per class, half of what building one costs,
and ``setup()`` builds two dozen record classes in every process. This
decorator is :func:`attrs.frozen` with those three methods taken from here
instead: one set of functions that read the class's fields, and answer as
attrs' own would (the same ``Name(field=value, ...)`` text, field by field
equality between instances of the same class, a hash of the compared fields).
A field's ``repr=False``, ``repr=<callable>``, ``eq=False`` and ``hash=False`` are
honoured. Everything else (slots, immutability, validators, converters,
``attrs.evolve``/``asdict``) is attrs' unchanged.

The core imports attrs' classic ``attr`` namespace, not ``attrs``: the same
functions (``attr.frozen``, ``attr.field``, ``attr.evolve``...), but
``import attrs`` loads six more modules (its re-exporting submodules), about 40
file-metadata calls in every process (docs/performance.md). Where the two
differ, ``asdict``, the core passes ``retain_collection_types=True``, as
``attrs.asdict`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attr

__all__ = ["frozen"]

C = TypeVar("C", bound=type)


def _repr(self: Any) -> str:
    cls = self.__class__
    parts = []
    for name, show in cls._ezpz_repr_fields:
        value = getattr(self, name)
        parts.append(f"{name}={show(value) if show is not None else repr(value)}")
    return f"{cls.__qualname__.rsplit('>.', 1)[-1]}({', '.join(parts)})"


def _eq(self: Any, other: object) -> object:  # a bool, or NotImplemented for another class
    cls = self.__class__
    fields = cls._ezpz_eq_fields  # read before the identity test narrows cls for a type checker
    if other.__class__ is not cls:
        return NotImplemented
    return all(getattr(self, n) == getattr(other, n) for n in fields)


def _ne(self: Any, other: object) -> object:
    result = _eq(self, other)
    return result if result is NotImplemented else not result


def _hash(self: Any) -> int:
    cls = self.__class__
    return hash((cls.__qualname__, *(getattr(self, n) for n in cls._ezpz_hash_fields)))


def _share_methods(record: C) -> C:
    fields = attr.fields(record)
    cls: Any = record  # the class gains attributes and methods here that its type does not declare
    cls._ezpz_repr_fields = tuple((a.name, a.repr if callable(a.repr) else None) for a in fields if a.repr)
    cls._ezpz_eq_fields = tuple(a.name for a in fields if a.eq)
    cls._ezpz_hash_fields = tuple(a.name for a in fields if (a.eq if a.hash is None else a.hash))
    cls.__repr__, cls.__eq__, cls.__ne__, cls.__hash__ = _repr, _eq, _ne, _hash
    return record


if TYPE_CHECKING:
    # Type checkers see attrs' own decorator, which their attrs support understands (fields, keyword-only
    # __init__, converters): plugin authors type-check the records they build against the installed core.
    from attr import frozen as frozen
else:
    def frozen(maybe_cls: Any = None, **kwargs: Any) -> Any:
        """:func:`attrs.frozen` (same arguments), with the shared ``__repr__``/``__eq__``/``__hash__``.

        A class that asks attrs for something else (``repr=False``, ``eq=False``,
        ``order=True``, its own ``__repr__``...) is left to attrs entirely.
        """
        own = not kwargs.keys() & {"repr", "eq", "order", "hash", "unsafe_hash", "cache_hash"}

        def wrap(cls: C) -> C:
            mine = own and not {"__repr__", "__eq__", "__hash__"} & vars(cls).keys()
            if not mine:
                return attr.frozen(cls, **kwargs)
            return _share_methods(attr.frozen(cls, repr=False, eq=False, **kwargs))

        return wrap if maybe_cls is None else wrap(maybe_cls)
