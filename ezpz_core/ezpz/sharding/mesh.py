"""Device meshes on the chosen device, built as its plugin says the backend needs (``ezpz_mesh_support``).

torch's ``DeviceMesh`` makes each dimension's groups with ``split_group`` when the default group is bound
to a device (eager init); a backend that cannot split then raises. Where the plugin says so
(``MeshSupport.split_group`` False), or the backend says it cannot (``supports_splitting``, when the plugin
leaves it to torch), the binding is lifted while the mesh is built, so torch takes ``new_group``, and put
back after. The original ezpz's ``init_device_mesh_safe`` is this module too (:mod:`ezpz.original.meshes`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ezpz.errors import ConfigError, UnavailableError
from ezpz.primitives.torch_private import backend_for_device

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

__all__ = ["build_mesh", "mesh_shape", "unbound_default_group"]


def mesh_shape(dims: Mapping[str, Any], world_size: int, who: str = "rt.mesh") -> tuple[tuple[int, ...], tuple[str, ...] | None]:
    """``(shape, names)`` for ``dims`` (``{}``: one dimension over every rank, unnamed); their product is the world."""
    if not dims:
        return (world_size,), None
    for name, size in dims.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(name=f"{who}({name}=...)", value=size, expected="a positive number of ranks",
                              fix=f"pass each dimension's size as an integer, e.g. {who}(dp=2, tp=2)")
    product = 1
    for size in dims.values():
        product *= size
    if product != world_size:
        said = " x ".join(f"{n}={s}" for n, s in dims.items())
        raise ConfigError(
            name=f"{who}({', '.join(f'{n}={s}' for n, s in dims.items())})", value=f"{said} = {product} ranks",
            expected=f"dimensions whose product is the world size, {world_size}",
            fix=f"choose sizes that multiply to {world_size}, or launch {product} ranks")
    return tuple(dims.values()), tuple(dims)


@contextlib.contextmanager
def unbound_default_group(split_group: bool | None = None) -> Iterator[None]:
    """While it is open, mesh code makes groups with ``new_group`` if the backend cannot split.

    ``split_group``: the plugin's answer (:attr:`ezpz.decisions.MeshSupport.split_group`); None asks the
    default group's backend for the bound device (``supports_splitting``), and builds as torch would when
    this torch cannot say.
    """
    import torch.distributed as dist

    group, saved = None, None
    if dist.is_available() and dist.is_initialized():
        default = dist.group.WORLD
        bound = getattr(default, "bound_device_id", None)
        if default is not None and bound is not None:
            splits = split_group
            if splits is None:
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


def build_mesh(device_type: str, shape: tuple[int, ...], names: tuple[str, ...] | None, *,
               split_group: bool | None = None) -> DeviceMesh:
    """``init_device_mesh(device_type, shape, mesh_dim_names=names)`` inside :func:`unbound_default_group`."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise UnavailableError(
            name="rt.mesh()", value="no process group (one process)",
            expected="a process group: setup() makes one when the launcher starts several ranks",
            fix="launch several ranks (torchrun, mpiexec, ezpz launch), or skip the mesh when not rt.distributed "
                "(rt.shard() returns the model unsharded then)")
    from torch.distributed.device_mesh import init_device_mesh

    with unbound_default_group(split_group):
        return init_device_mesh(device_type, shape, mesh_dim_names=names)
