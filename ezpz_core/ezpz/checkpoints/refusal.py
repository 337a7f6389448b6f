"""``Runtime.save``'s check: a state dict holding sharded tensors (DTensor, ShardedTensor) is refused.

``torch.save`` of an FSDP2 model's ``state_dict()`` writes this rank's shard alone, without a
word, and the file loads on no world size; ``save_checkpoint`` writes every shard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ezpz.errors import ConfigError

__all__ = ["refuse_sharded"]

_SHARDED = frozenset({"DTensor", "ShardedTensor"})  # torch.distributed's sharded tensor types, by class name
_MAX_DEPTH = 6  # state dicts nest a few levels (an optimizer's state under its name); deeper is not a state dict


def _first_sharded(obj: Any, where: str, depth: int) -> tuple[str, str] | None:
    kinds = {c.__name__ for c in type(obj).__mro__} & _SHARDED
    if kinds:
        return where, kinds.pop()
    if depth >= _MAX_DEPTH:
        return None
    if isinstance(obj, Mapping):
        items = ((f"{where}[{k!r}]", v) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(obj))
    else:
        return None
    for place, value in items:
        found = _first_sharded(value, place, depth + 1)
        if found is not None:
            return found
    return None


def refuse_sharded(obj: Any) -> None:
    """Raise :class:`~ezpz.errors.ConfigError` naming ``save_checkpoint`` when ``obj`` holds a sharded tensor."""
    found = _first_sharded(obj, "obj", 0)
    if found is None:
        return
    where, kind = found
    raise ConfigError(
        name="rt.save(obj, f)", value=f"{where} is a {kind} (one rank's shard of a sharded model)",
        expected="tensors whole on every rank (a plain or DDP model's state_dict())",
        fix="save a sharded (FSDP2) model with rt.save_checkpoint(directory, model=model, optim=optim, step=step), "
            "which writes every rank's shard and loads on any world size (rt.load_checkpoint)")
