"""``rt.shard``'s argument check: a model and a mesh of the types it needs, named when they are not.

``rt.mesh`` sizes are checked by :func:`ezpz.sharding.mesh.mesh_shape`, checkpoint paths by
:mod:`ezpz.checkpoints.sharded`; each refusal names the value and what is allowed.
"""

from __future__ import annotations

from ezpz.errors import ConfigError

__all__ = ["check_shard_arguments"]


def _shown(value: object) -> object:
    """``value`` itself when its repr is short, else its type: an error line stays one readable line."""
    return value if len(repr(value)) <= 80 else f"a {type(value).__module__}.{type(value).__qualname__}"


def check_shard_arguments(model: object, mesh: object) -> None:
    """Refuse a ``model`` that is not a ``torch.nn.Module`` and a ``mesh`` that is neither None nor a DeviceMesh."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise ConfigError(name="rt.shard(model)", value=_shown(model), expected="a torch.nn.Module (the model to shard)",
                          fix="pass the model object itself, e.g. model = rt.shard(MyModel())")
    if mesh is None:
        return
    from torch.distributed.device_mesh import DeviceMesh

    if not isinstance(mesh, DeviceMesh):
        raise ConfigError(name="rt.shard(model, mesh)", value=_shown(mesh),
                          expected="None (one dimension over every rank) or a DeviceMesh from rt.mesh()",
                          fix="pass mesh=rt.mesh(...) or leave it out")
