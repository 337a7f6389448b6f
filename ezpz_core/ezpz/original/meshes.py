"""Device meshes for the original ezpz's names: ``init_device_mesh_safe`` and the TP/PP/CP layout of ``setup_torch``.

The original built tensor-, pipeline- and context-parallel process groups by
reshaping the ranks to ``(dp, pp, cp, tp)`` with the tensor-parallel index
varying fastest. :func:`build_parallel_mesh` builds the same layout as one
``torch.distributed`` DeviceMesh with those dimension names, so
``mesh["tp"].get_group()`` is the original's tensor-parallel group.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ezpz.errors import ConfigError, UnavailableError
from ezpz.primitives.torch_private import flatten_mesh

if TYPE_CHECKING:
    from ezpz.runtime import Runtime

__all__ = ["build_parallel_mesh", "check_parallel_sizes", "flatten_device_mesh_safe", "init_device_mesh_safe"]

MESH_DIMS = ("dp", "pp", "cp", "tp")
_SIZE_ORDER = ("pipeline_parallel_size", "context_parallel_size", "tensor_parallel_size")


def check_parallel_sizes(sizes: Mapping[str, Any], world_size: int) -> None:
    """Each size a positive integer, and their product dividing the world size."""
    product = 1
    for name in _SIZE_ORDER:
        size = sizes.get(name, 1)
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ConfigError(name=f"setup_torch({name}=...)", value=size, expected="a positive integer",
                              fix=f"pass {name}=1 (off) or the number of ranks in each group")
        product *= size
    if world_size % product:
        worst = next(n for n in reversed(_SIZE_ORDER) if sizes.get(n, 1) > 1)
        raise ConfigError(
            name=f"setup_torch({worst}=...)", value=sizes[worst],
            expected=f"sizes whose product ({product}) divides the world size ({world_size})",
            fix="launch a multiple of tensor*pipeline*context ranks, or lower the sizes",
        )


def build_parallel_mesh(runtime: Runtime, sizes: Mapping[str, int]) -> Any:
    """A 4-D mesh ``(dp, pp, cp, tp)`` over every rank, tp fastest, as the original's group layout."""
    pp, cp, tp = (sizes.get(n, 1) for n in _SIZE_ORDER)
    dp = runtime.world_size // (pp * cp * tp)
    return init_device_mesh_safe(runtime.device_type, (dp, pp, cp, tp), mesh_dim_names=MESH_DIMS)


def _unbound_default_group() -> contextlib.AbstractContextManager[None]:
    """:func:`ezpz.sharding.mesh.unbound_default_group` with the device plugin's answer, when setup() ran."""
    from ezpz import hooks
    from ezpz.sharding.mesh import unbound_default_group

    rt = hooks.get_runtime()
    support = rt.plan.mesh if rt is not None else None
    return unbound_default_group(support.split_group if support is not None else None)


def init_device_mesh_safe(device_type: str, mesh_shape: tuple[int, ...], *,
                          mesh_dim_names: tuple[str, ...] | None = None) -> Any:
    """``torch.distributed.device_mesh.init_device_mesh``, also on backends that cannot split groups."""
    from torch.distributed.device_mesh import init_device_mesh

    with _unbound_default_group():
        return init_device_mesh(device_type, tuple(mesh_shape), mesh_dim_names=mesh_dim_names)


def flatten_device_mesh_safe(submesh: Any, mesh_dim_name: str, *, device_type: str | None = None) -> Any:
    """``submesh._flatten(mesh_dim_name)`` (HSDP's flattened dp dimension), also on backends that cannot split."""
    del device_type  # the capability check does not need it; kept for the original's signature
    flatten = flatten_mesh(submesh)
    if flatten is None:
        import torch

        raise UnavailableError(
            name="flatten_device_mesh_safe(submesh)", value=f"torch {torch.__version__}",
            expected="a torch whose DeviceMesh has _flatten (torch 2.4.1 has none)",
            fix="pass the 2-D submesh to fully_shard (HSDP) as it is, or use a newer torch")
    with _unbound_default_group():
        return flatten(mesh_dim_name)
