"""attrs records, mappings and sequences as plain JSON types, for the files and reports ezpz writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["jsonable"]


def jsonable(value: object) -> Any:
    """``value`` as plain JSON types: an attrs record's compared or shown fields, mappings, sequences (anything else
    as ``str``)."""
    kind = type(value)
    if attrs.has(kind):
        return {f.name: jsonable(getattr(value, f.name)) for f in attrs.fields(kind) if f.eq or f.repr}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return str(value)
