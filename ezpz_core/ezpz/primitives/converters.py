"""attrs converters as plain Python functions.

attrs inspects each converter's signature when it builds a class; for builtins
like ``tuple`` that means parsing a text signature (~0.5 ms each), which added
up to tens of milliseconds across ezpz's records. These are equivalent and cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def as_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


def as_dict(value: Mapping[Any, Any]) -> dict[Any, Any]:
    return dict(value)


def as_frozenset(value: Iterable[Any]) -> frozenset[Any]:
    return frozenset(value)
