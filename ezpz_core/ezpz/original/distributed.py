"""``ezpz.distributed``: the original ezpz's module of the same name, over ``ezpz.hooks.setup()``.

Scripts that call ``ezpz.distributed.get_rank()``, ``get_dist_info()``,
``setup_torch()``, ``wrap_model()``, ``init_device_mesh_safe()`` ... keep
working. Every answer comes from the setup plan (``ezpz doctor`` explains
it); nothing here detects devices or launchers on its own. Names of the
original's module that belong to experiment tracking or one site's machines
(``setup_wandb``, ``tplot``, ...) raise an ``AttributeError`` that says
so and points at the migration page. This project's own process-group code
lives in :mod:`ezpz.startup.process_group`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ezpz import hooks
from ezpz.primitives.device_module import device_module
from ezpz.original.compat import (
    _layout,
    _plan,
    _state,
    _torch_dtype,
    barrier,
    cleanup,
    get_gpus_per_node,
    get_local_rank,
    get_node_index,
    get_num_nodes,
    get_rank,
    get_torch_backend,
    get_torch_device,
    get_torch_device_type,
    get_world_size,
    seed_everything,
    setup_torch,
    synchronize,
    wrap_model,
)
from ezpz.original.hostfile import (
    get_hostfile_with_fallback,
    get_hostname,
    get_nodes_from_hostfile,
    write_hostfile_from_list_of_hosts,
    write_localhost_to_hostfile,
)
from ezpz.original.meshes import flatten_device_mesh_safe, init_device_mesh_safe
from ezpz.original.timing import timeitlogit

from ezpz.original.scheduler import get_machine

__all__ = [
    "FSDP_SHARDING_STRATEGIES",
    "TORCH_DTYPES_MAP",
    "all_reduce",
    "barrier",
    "broadcast",
    "cleanup",
    "flatten_device_mesh_safe",
    "get_cpus_per_node",
    "get_device_mesh",
    "get_device_properties",
    "get_dist_info",
    "get_gpus_per_node",
    "get_hostfile_with_fallback",
    "get_hostname",
    "get_local_rank",
    "get_node_index",
    "get_nodes_from_hostfile",
    "get_num_nodes",
    "get_rank",
    "get_torch_backend",
    "get_torch_device",
    "get_torch_device_type",
    "get_world_size",
    "get_world_size_in_use",
    "get_world_size_total",
    "init_device_mesh_safe",
    "log_dict_as_bulleted_list",
    "print_dist_setup",
    "query_environment",
    "resolve_fsdp_strategy",
    "seed_everything",
    "setup_torch",
    "synchronize",
    "timeitlogit",
    "wrap_model",
    "wrap_model_for_ddp",
    "wrap_model_for_fsdp",
    "wrap_model_for_fsdp2",
    "write_hostfile_from_list_of_hosts",
    "write_localhost_to_hostfile",
    "get_machine",
]

_DTYPE_NAMES = ("bf16", "bfloat16", "fp16", "float16", "half", "fp32", "float32")


def __getattr__(name: str) -> Any:
    """``TORCH_DTYPES_MAP`` built on first use (no torch import at module import); the original's other names."""
    if name == "TORCH_DTYPES_MAP":
        value = {n: _torch_dtype(n) for n in _DTYPE_NAMES}
        globals()[name] = value
        return value
    from ezpz.original.migration import missing_attribute

    raise missing_attribute("ezpz.distributed", name)  # its public name, not where it lives


# -- sizes and places ----------------------------------------------------------------------------------------


def get_world_size_total() -> int:
    """Devices available to the job: ``max(get_gpus_per_node(), 1) * get_num_nodes()``."""
    return get_world_size(total=True)


def get_world_size_in_use() -> int:
    """Ranks taking part: the process group's size when one exists, else the launcher's world size."""
    return get_world_size(in_use=True)


def get_cpus_per_node() -> int:
    """CPUs on this node (``os.cpu_count()``)."""
    return os.cpu_count() or 1


def get_device_properties(device: int | None = None) -> dict[str, Any]:
    """``{"name", "total_memory"}`` of device ordinal ``device`` (default: the local rank's); -1 where unknown."""
    import torch

    kind = get_torch_device_type()
    module = device_module(kind)
    props_of = getattr(module, "get_device_properties", None)
    if props_of is None:
        return {"name": kind, "total_memory": -1}
    props = props_of(get_local_rank() if device is None else device)
    return {"name": getattr(props, "name", kind), "total_memory": getattr(props, "total_memory", -1)}


def get_device_mesh() -> Any:
    """The ``(dp, pp, cp, tp)`` DeviceMesh that ``setup_torch(tensor_parallel_size=...)`` built, or None."""
    return _state["mesh"]


def query_environment() -> dict[str, int]:
    """``{"world_size", "rank", "local_rank"}``."""
    layout = _layout()
    return {"world_size": layout.world_size, "rank": layout.rank, "local_rank": layout.local_rank}


def get_dist_info(verbose: bool | None = None, hostfile: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The original's summary of where this process runs, with the same keys, from the setup plan.

    ``SCHEDULER`` names the launcher ezpz detected (``torchrun``,
    ``openmpi``, ``slurm``, ``single``, ...); ``MACHINE`` is :func:`get_machine` (the host name when no machine matches);
    ``TORCHCOMMS`` is always False. Unlike the original, no ``./hostfile`` is
    written when none exists. ``verbose=True`` also logs it (rank 0).
    """
    rt = hooks.get_runtime()
    launch = rt.plan.launch if rt is not None else None
    if launch is None:
        try:
            launch = _plan().launch
        except Exception:  # partial launcher environment: the getters still answer (see ezpz.compat)
            launch = None
    found = get_hostfile_with_fallback(hostfile)
    hosts = (get_nodes_from_hostfile(found) if found is not None else list(launch.hosts) if launch else []) or [
        get_hostname()]
    gpus = get_gpus_per_node()
    num_nodes = get_num_nodes(found) if found is not None else get_num_nodes()
    device = get_torch_device()
    info: dict[str, Any] = {
        "DEVICE": device,
        "DEVICE_ID": f"{device}:{get_local_rank()}",
        "DISTRIBUTED_BACKEND": get_torch_backend(),
        "TORCHCOMMS": False,
        "GPUS_PER_NODE": gpus,
        "HOSTS": str(hosts),
        "HOSTFILE": found.resolve().as_posix() if found is not None else "",
        "HOSTNAME": get_hostname(),
        "LOCAL_RANK": get_local_rank(),
        "MACHINE": get_machine(),
        "NUM_NODES": num_nodes,
        "NGPUS": num_nodes * gpus,
        "NGPUS_AVAILABLE": get_world_size_total(),
        "NODE_ID": get_node_index(),
        "RANK": get_rank(),
        "SCHEDULER": launch.launcher if launch is not None else "unknown",
        "WORLD_SIZE_TOTAL": get_world_size_total(),
        "WORLD_SIZE_IN_USE": get_world_size_in_use(),
        "world_size": get_world_size(),
        "EZPZ_RUN_COMMAND": os.environ.get("EZPZ_RUN_COMMAND", sys.argv[0] if sys.argv else ""),
    }
    if verbose:
        from ezpz.original.log import get_logger

        get_logger("ezpz.distributed").info("DistInfo=%s", json.dumps(info, indent=4, sort_keys=True))
    return info


def print_dist_setup(hostfile: str | os.PathLike[str] | None = None, display: bool = True) -> str:
    """One line naming this rank's host, device, node, local rank and rank; logged when ``display``."""
    del hostfile  # the layout comes from the plan
    layout = _layout()
    world = get_world_size(in_use=True)
    per_node = max(get_gpus_per_node(), 1)
    text = (f"['{get_hostname()}'][device='{get_torch_device_type()}']"
            f"[node={layout.node_rank}/{max(layout.num_nodes - 1, 0)}]"
            f"[local_rank={layout.local_rank}/{per_node - 1}][rank={layout.rank}/{world - 1}]")
    if display:
        from ezpz.original.log import get_logger

        get_logger("ezpz.distributed").info("%s", text)
    return text


def log_dict_as_bulleted_list(d: dict[Any, Any], name: str | None = None) -> None:
    """Log ``d`` as ``[name]:`` followed by ``  - key=value`` lines."""
    from ezpz.original.log import get_logger

    lines = [f"[{name or 'dict'}]:", *(f"  - {k}={v}" for k, v in d.items())]
    get_logger("ezpz.distributed").info("\n\n%s\n", "\n".join(lines))


# -- collectives ---------------------------------------------------------------------------------------------


def _group_ready() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def broadcast(obj: Any, root: int = 0) -> Any:
    """Send a picklable ``obj`` from rank ``root`` to every rank (``obj`` itself without a process group)."""
    if not _group_ready():
        return obj
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=root)
    return box[0]


def all_reduce(obj: Any, op: Any = None, implementation: str | None = None) -> Any:
    """Reduce a number over every rank (sum by default) and return it; ``obj`` itself without a process group.

    ``implementation`` is accepted for compatibility: ``"torch"`` and the
    original's default ``"mpi"`` both use ``torch.distributed`` here.
    """
    if implementation is not None and implementation.lower() not in {"mpi", "torch", "pytorch", "pt"}:
        from ezpz.errors import ConfigError

        raise ConfigError(name="all_reduce(implementation=...)", value=implementation,
                          expected="'torch' (or 'mpi', served by torch.distributed)", fix="drop the argument")
    if not _group_ready():
        return obj
    import torch
    import torch.distributed as dist

    rt = hooks.get_runtime()
    device = rt.device if rt is not None else torch.device("cpu")
    tensor = torch.tensor(obj, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op is None else op)
    return tensor.item()


# -- model wrapping ----------------------------------------------------------------------------------------------

#: The examples' ``--fsdp-sharding-strategy`` names -> ``wrap_model(reshard_after_forward=...)``
#: (``"hybrid"``: reshard within a node; ``None``: do not shard, use DDP).
FSDP_SHARDING_STRATEGIES: dict[str, bool | str | None] = {
    "full-shard": True, "shard-grad-op": False, "no-shard": None, "hybrid-shard": "hybrid",
}


def resolve_fsdp_strategy(strategy: str) -> bool | int | None:
    """A sharding-strategy name as ``reshard_after_forward``: True, False, ranks per node (hybrid), or None (DDP)."""
    if strategy not in FSDP_SHARDING_STRATEGIES:
        from ezpz.errors import ConfigError

        raise ConfigError(name="resolve_fsdp_strategy(strategy)", value=strategy,
                          expected=f"one of {', '.join(FSDP_SHARDING_STRATEGIES)}", fix="pick one of those names")
    value = FSDP_SHARDING_STRATEGIES[strategy]
    return get_gpus_per_node() if value == "hybrid" else value  # type: ignore[return-value]



def wrap_model_for_ddp(model: Any) -> Any:
    """``DistributedDataParallel`` on this rank's device (what ``wrap_model(model)`` does)."""
    return wrap_model(model, use_fsdp=False)


def wrap_model_for_fsdp2(model: Any, dtype: str = "bfloat16", device_mesh: Any = None, **kwargs: Any) -> Any:
    """FSDP2 (``fully_shard`` per child, then the root) with ``dtype`` parameters; kwargs as ``wrap_model``'s."""
    return wrap_model(model, use_fsdp=True, dtype=dtype, device_mesh=device_mesh, **kwargs)


def wrap_model_for_fsdp(model: Any, dtype: str = "bfloat16", device_id: int | None = None, **kwargs: Any) -> Any:
    """FSDP1 (``FullyShardedDataParallel``) with ``dtype`` mixed precision; kwargs go to its constructor."""
    if get_world_size() <= 1:
        return model
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision

    param = _torch_dtype(dtype)
    rt = hooks.get_runtime()
    kind = rt.device_type if rt is not None else get_torch_device_type()
    if kind == "cpu":
        from ezpz.errors import UnavailableError

        raise UnavailableError(name="wrap_model_for_fsdp(device)", value=kind, expected="an accelerator device",
                               fix="torch's FSDP1 refuses the CPU: use ezpz.wrap_model_for_fsdp2 (FSDP2 works on "
                               "the CPU) or ezpz.wrap_model_for_ddp")
    if device_id is None and rt is not None and rt.device.index is not None:
        device_id = rt.device.index
    kwargs.setdefault("mixed_precision", MixedPrecision(param_dtype=param, reduce_dtype=torch.float32,
                                                        buffer_dtype=torch.float32))
    return FullyShardedDataParallel(model, device_id=device_id, **kwargs)
