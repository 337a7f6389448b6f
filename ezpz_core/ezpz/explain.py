"""The decision trace: what ``Runtime.explain()`` and ``ezpz doctor`` show."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from attrs import field

from ezpz._convert import as_tuple
from ezpz.frozen_records import frozen

from ezpz.decisions import Decision

__all__ = ["Explanation"]


@frozen(kw_only=True)
class Explanation:
    """Every decision with its reason and rejected alternatives, plus plugin status."""

    decisions: tuple[Decision, ...] = field(converter=as_tuple)
    plugins: tuple[Mapping[str, Any], ...] = field(default=(), converter=as_tuple)

    def __getitem__(self, topic: str) -> Decision:
        for d in self.decisions:
            if d.topic == topic:
                return d
        raise KeyError(topic)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON, secrets scrubbed (:mod:`ezpz.redact`)."""
        from ezpz.redact import scrub_data

        return scrub_data({
            "decisions": [attrs.asdict(d, value_serializer=_jsonable) for d in self.decisions],
            "plugins": [dict(p) for p in self.plugins],
        })

    def __str__(self) -> str:
        """The trace as text, secrets scrubbed (:mod:`ezpz.redact`)."""
        from ezpz.redact import scrub

        return scrub(self._text())

    def _text(self) -> str:
        lines: list[str] = []
        for d in self.decisions:
            lines.append(f"{d.topic}: {d.chosen}")
            lines.append(f"    why: {d.reason}")
            for k, v in d.details.items():
                lines.append(f"    {k}: {v}")
            for alt in d.alternatives:
                who = f" [{alt.plugin}]" if alt.plugin else ""
                lines.append(f"    not {alt.name}{who}: {alt.reason}")
        for p in self.plugins:
            if p.get("status") == "failed":
                lines.append(f"plugin {p['name']}: FAILED at {p.get('stage')}: {p.get('error')}")
        return "\n".join(lines)


def _jsonable(_inst: Any, _field: Any, value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if attrs.has(type(value)):
        return attrs.asdict(value, value_serializer=_jsonable)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(None, None, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(None, None, v) for v in value]
    return str(value)
