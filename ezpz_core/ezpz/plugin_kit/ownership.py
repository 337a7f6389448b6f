"""Which device is yours: a plugin's later hooks answer only for the device its own probe offered."""

from __future__ import annotations

import sys
from typing import Any, TypeVar, overload

__all__ = ["facts_if_ours"]

T = TypeVar("T")


@overload
def facts_if_ours(device: object, record: type[T]) -> T | None: ...


@overload
def facts_if_ours(device: object, record: str) -> Any | None: ...


def facts_if_ours(device: object, record: type[Any] | str) -> Any | None:
    """``device.facts`` when your probe made them (an instance of ``record``), else None.

    :param device: The :class:`~ezpz.facts.DeviceCandidate` a hook was given (``device``, or
        ``plan.device.candidate`` in ``ezpz_before_init``).
    :param record: Your facts class, or its path ``"package.module:ClassName"``. With the path, the
        module is never imported to ask: if it is not loaded yet, your probe made no facts, so a device
        offered by another plugin costs yours no import. Call this first in every hook after the probe::

            facts = facts_if_ours(device, "ezpz_cuda.facts:CudaFacts")
            if facts is None:
                return None  # not our device: the plugin that offered it answers
    """
    facts = getattr(device, "facts", None)
    if isinstance(record, str):
        module_name, sep, name = record.partition(":")
        if not sep or not module_name or not name:
            raise ValueError(f"facts_if_ours: record {record!r} is not 'package.module:ClassName'")
        module = sys.modules.get(module_name)
        if module is None:
            return None
        cls = getattr(module, name, None)
        if not isinstance(cls, type):
            raise ValueError(f"facts_if_ours: {module_name} has no class {name!r} (record {record!r})")
        return facts if isinstance(facts, cls) else None
    return facts if isinstance(facts, record) else None
