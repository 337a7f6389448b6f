"""Device meshes for the original ezpz's names: ``init_device_mesh_safe`` and the TP/PP/CP layout of ``setup_torch``.

The original built tensor-, pipeline- and context-parallel process groups by
reshaping the ranks to ``(dp, pp, cp, tp)`` with the tensor-parallel index
varying fastest. :func:`build_parallel_mesh` builds the same layout as one
``torch.distributed`` DeviceMesh with those dimension names, so
``mesh["tp"].get_group()`` is the original's tensor-parallel group.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ezpz.errors import ConfigError, UnavailableError
from ezpz.primitives.torch_private import backend_for_device, flatten_mesh

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


@contextlib.contextmanager
def _unbound_default_group() -> Iterator[None]:
    """Let mesh code use ``new_group`` when the default group is device-bound but its backend cannot split.

    torch prefers ``split_group`` for a device-bound default group; a backend
    without splitting support (xccl today) then raises. This checks the
    backend's own ``supports_splitting`` capability, not a vendor name, and
    restores the binding afterwards.
    """
    import torch.distributed as dist

    group, saved = None, None
    if dist.is_available() and dist.is_initialized():
        default = dist.group.WORLD
        bound = getattr(default, "bound_device_id", None)
        if bound is not None:
            backend = backend_for_device(default, bound)  # None: this torch cannot say; build as torch would
            splits = backend is None or bool(getattr(backend, "supports_splitting", True))
            if not splits:
                group, saved = default, bound
                group.bound_device_id = None
    try:
        yield
    finally:
        if group is not None:
            group.bound_device_id = saved


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
