"""The original ezpz's helpers (``setup_torch``, ``get_rank``, ``wrap_model``, ...), thin over ezpz's runtime.

Scripts written for the original ezpz keep working unchanged::

    import ezpz
    rank = ezpz.setup_torch()
    device = ezpz.get_torch_device()          # "cuda", "xpu", "cpu", ... (a string, as before)
    model = ezpz.wrap_model(model)            # DDP (see below)
    ezpz.barrier()
    ezpz.cleanup()

Every name here is reachable as ``ezpz.<name>`` (``ezpz/__init__.py``
forwards each name in :data:`__all__` lazily). Devices, backends and rank
layout come from :func:`ezpz.hooks.setup` and its plugins, so the answers
are the same ones ``ezpz doctor`` explains. Before ``setup_torch()``, the
rank getters read the launcher's variables and the device/backend getters
plan without side effects, as the original's getters did.

Differences from the original, on purpose:

* ``wrap_model`` uses DDP unless ``use_fsdp=True`` (the original defaulted
  to FSDP2). FSDP2 (``torch.distributed.fsdp.fully_shard``) is one argument
  away and works on every device, CPU included.
* ``setup_torch(seed=s)`` seeds rank ``r`` with ``s + r`` (the original's
  ``s*(rank+1)*(local_rank+1)`` gave equal seeds to ranks on different
  nodes, and the same seed to every rank for ``s=0``).
* ``setup_torch(port=p)`` sets ``MASTER_PORT`` when the launcher did not
  (the original accepted and ignored it); the timeout defaults to
  ``TORCH_DDP_TIMEOUT``, else ``EZPZ_TIMEOUT``, else 300 s (was 3600 s).
* ``barrier`` always uses ``torch.distributed`` (the original tried MPI
  first, which under torchrun synchronised nothing).
* ``TORCH_DEVICE``/``TORCH_BACKEND`` are honoured but checked: a device or
  backend that is not available here is an error that says what is.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from ezpz import hooks
from ezpz.errors import ConfigError, SetupError

if TYPE_CHECKING:
    import torch

    from ezpz.decisions import SetupPlan
    from ezpz.facts import LaunchEnv

__all__ = [
    "barrier",
    "cleanup",
    "get_local_rank",
    "get_node_index",
    "get_gpus_per_node",
    "get_num_nodes",
    "get_rank",
    "get_torch_backend",
    "get_torch_device",
    "get_torch_device_type",
    "get_world_size",
    "seed_everything",
    "setup_torch",
    "synchronize",
    "wrap_model",
]

_FRAMEWORKS = frozenset({"ddp", "fsdp"})  # older ezpz's setup_torch(backend="DDP") named a framework
_UNSUPPORTED_FRAMEWORKS = ("deepspeed", "ds", "horovod", "hvd")
_PARALLEL_SIZES = ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size")
_DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16", "half": "float16",
           "fp32": "float32", "float32": "float32"}
_state: dict[str, Any] = {"master_port": None, "plan": None, "plan_key": None, "mesh": None}


# -- what the getters read -----------------------------------------------------------------------


class _Layout(NamedTuple):
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    num_nodes: int


#: The original ezpz's per-value variable chains, read only when the launch plugins find no complete
#: launcher environment (``RANK`` alone, say): its getters returned values there, so these do too.
_PARTIAL_RANK = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
_PARTIAL_WORLD = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")
_PARTIAL_LOCAL = ("LOCAL_RANK", "PALS_LOCAL_RANKID", "PMIX_LOCAL_RANK", "PMI_LOCAL_RANK",
                  "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MPICH_LOCALRANKID", "SLURM_LOCAL_ID")


def _first_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        raw = os.environ.get(name, "").strip()
        if raw:
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(name=name, value=raw, expected="a non-negative integer",
                                  fix=f"unset {name} or set it to this process's number") from None
    return default


def _partial_layout() -> _Layout:
    """What the original's getters read from an incomplete launcher environment (setup_torch still refuses it)."""
    rank, world = _first_int(_PARTIAL_RANK, 0), _first_int(_PARTIAL_WORLD, 1)
    local = _first_int(_PARTIAL_LOCAL, 0 if world <= 1 else rank % world)
    return _Layout(rank, local, world, world, 0, 1)


def _launch() -> LaunchEnv:
    """The runtime's launch layout, or the launcher's variables read now (no setup)."""
    rt = hooks.get_runtime()
    if rt is not None:
        return rt.plan.launch
    from ezpz.plugin_host.calls import Hooks
    from ezpz.startup.environ import snapshot
    from ezpz.facts import LaunchEnv

    found = Hooks(hooks.get_plugin_host()).detect_launch_env(snapshot(os.environ))
    return found[1] if found else LaunchEnv(launcher="single", reason="no launch-environment plugin answered")


def _layout() -> _Layout:
    """Rank layout for the getters: the plan's, or the original's per-variable reading of a partial environment."""
    from ezpz.errors import LaunchEnvError

    try:
        env = _launch()
    except LaunchEnvError:
        return _partial_layout()
    return _Layout(env.rank, env.local_rank, env.world_size, env.local_world_size, env.node_rank, env.num_nodes)


def _plan() -> SetupPlan:
    """What setup() would decide now; cached while the environment is unchanged.

    With a partial launcher environment (``RANK`` alone) the device and
    backend are planned as for one process, so the getters still answer as
    the original's did; ``setup_torch()`` itself still refuses that environment.
    """
    from ezpz.errors import LaunchEnvError

    key = (id(hooks.get_plugin_host()), tuple(sorted(os.environ.items())))
    if _state["plan_key"] != key:
        try:
            found = hooks.plan()[0]
        except LaunchEnvError:
            partial = set(_PARTIAL_RANK + _PARTIAL_WORLD + _PARTIAL_LOCAL)
            found = hooks.plan(environ={k: v for k, v in os.environ.items() if k not in partial})[0]
        _state["plan"], _state["plan_key"] = found, key
    return _state["plan"]


# -- lifecycle -------------------------------------------------------------------------------------


def _collective(backend: str | None) -> str | None:
    if backend is None:
        return None
    name = str(backend).strip().lower()
    if name in _FRAMEWORKS:
        return None
    if name in _UNSUPPORTED_FRAMEWORKS:
        raise ConfigError(
            name="setup_torch(backend=...)", value=backend,
            expected="a torch.distributed backend (nccl, gloo, xccl, ...) or 'DDP'",
            fix="DeepSpeed and Horovod are not part of ezpz's compatibility layer; call deepspeed.init_distributed() "
            "or hvd.init() yourself after ezpz.setup_torch()",
        )
    return name


def setup_torch(
    backend: str | int | None = None, port: str | int | None = None, seed: int | None = None,
    timeout: str | int | float | None = None, **kwargs: Any,
) -> int:
    """Set up this process through :func:`ezpz.hooks.setup` and return its global rank, as the original did.

    :param backend: A collective backend (``"nccl"``, ``"gloo"``, ``"xccl"``);
        ``"DDP"`` (older ezpz's framework name) or None lets the plugins choose.
        An integer here starts the newer signature ``setup_torch(port, seed, timeout, verbose)``.
    :param port: ``MASTER_PORT`` to use when the launcher set none.
    :param seed: Seed every RNG with ``seed + rank`` (see :func:`seed_everything`).
    :param timeout: Seconds to wait for every rank (default ``TORCH_DDP_TIMEOUT``,
        else ``EZPZ_TIMEOUT``, else 300).
    :param kwargs: ``device=`` and ``precision=`` go to ``setup()``; ``verbose``
        is accepted and ignored; ``device_id=`` is this process's device
        ordinal (ignored on devices without ordinals, such as the CPU);
        ``tensor_parallel_size``/``pipeline_parallel_size``/``context_parallel_size``
        build a device mesh (see :func:`ezpz.distributed.get_device_mesh`).
    """
    if isinstance(backend, int) or (isinstance(backend, str) and backend.strip().isdigit()):
        # v0.26 order: setup_torch(port, seed, timeout, verbose)
        backend, port, seed, timeout = None, backend, port, seed
    collective = _collective(backend)
    device, precision = kwargs.pop("device", None), kwargs.pop("precision", None)
    device_id = kwargs.pop("device_id", None)
    kwargs.pop("verbose", None)
    sizes = {name: 1 if (v := kwargs.pop(name, 1)) is None else v for name in _PARALLEL_SIZES}
    for name in [k for k in kwargs if k.endswith("_parallel_backend")]:
        if kwargs.pop(name) is not None:
            raise ConfigError(name=f"setup_torch({name}=...)", value="set", expected="None",
                              fix="per-group backends are not supported: every mesh dimension uses the chosen "
                              "backend; drop the argument")
    if kwargs:
        raise TypeError(f"setup_torch() got unexpected keyword argument(s): {', '.join(sorted(kwargs))}")
    if device_id is not None and device is None:
        device = _device_for_id(device_id)
    explicit = any(v is not None for v in (collective, timeout, device, precision))
    timeout_from = "setup_torch(timeout=...)"
    if timeout is None and os.environ.get("TORCH_DDP_TIMEOUT", "").strip() and not os.environ.get("EZPZ_TIMEOUT"):
        timeout, timeout_from = os.environ["TORCH_DDP_TIMEOUT"], "TORCH_DDP_TIMEOUT"
    if timeout is not None:  # checked here so the error names where it came from (1 s .. 7 days, as EZPZ_TIMEOUT)
        from ezpz.inputs.settings import TIMEOUT_RANGE_S, seconds_in_range

        timeout = seconds_in_range(timeout, timeout_from, TIMEOUT_RANGE_S,
                                   fix=f"set {timeout_from} to a number of seconds from 1 to 604800, e.g. 300")
    if port is not None and not os.environ.get("MASTER_PORT"):
        os.environ["MASTER_PORT"] = str(int(port))
        _state["master_port"] = os.environ["MASTER_PORT"]
    from ezpz.original.meshes import check_parallel_sizes

    check_parallel_sizes(sizes, _layout().world_size)
    rt = hooks.get_runtime()
    if rt is None or explicit:
        rt = hooks.setup(device=device, backend=collective, precision=precision,
                         timeout=timeout)
    _state["plan_key"] = None
    if any(v > 1 for v in sizes.values()):
        from ezpz.original.meshes import build_parallel_mesh

        _state["mesh"] = build_parallel_mesh(rt, sizes)
    if seed is not None:
        seed_everything(int(seed) + rt.rank)
    return rt.rank


def _device_for_id(device_id: Any) -> str | None:
    """``setup_torch(device_id=n)``: this process's device ``type:n``; None where devices have no ordinal (CPU)."""
    try:
        index = int(device_id.index if hasattr(device_id, "index") else device_id)
    except (TypeError, ValueError):
        raise ConfigError(name="setup_torch(device_id=...)", value=device_id, expected="a device ordinal (0, 1, ...)",
                          fix="pass the index of this process's device, or leave it out to use the local rank") from None
    if index < 0:
        raise ConfigError(name="setup_torch(device_id=...)", value=device_id, expected="a device ordinal >= 0",
                          fix="pass the index of this process's device")
    plan = _plan()
    if plan.device.index is None:
        return None
    return f"{plan.device.candidate.device_type}:{index}"


def cleanup() -> None:
    """Tear down: destroy the process group (also one created outside ezpz) and forget the runtime."""
    hooks.teardown()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    if _state["master_port"] is not None and os.environ.get("MASTER_PORT") == _state["master_port"]:
        del os.environ["MASTER_PORT"]
    _state.update(master_port=None, plan=None, plan_key=None, mesh=None)


# -- rank layout -------------------------------------------------------------------------------------


def get_rank() -> int:
    """Global rank (from the runtime, or the launcher's variables before setup)."""
    return _layout().rank


def get_local_rank() -> int:
    """Rank within this node."""
    return _layout().local_rank


def get_world_size(*, total: bool = False, in_use: bool = False) -> int:
    """Number of processes in the job.

    ``in_use=True``: the process group's size when one exists (the original
    asked MPI), else the launcher's. ``total=True``: devices available to the
    job, ``max(get_gpus_per_node(), 1) * get_num_nodes()``.
    """
    if total:
        return max(get_gpus_per_node(), 1) * get_num_nodes()
    if in_use:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_world_size()
    return _layout().world_size


def get_num_nodes(hostfile: str | os.PathLike[str] | None = None) -> int:
    """Number of nodes in the job; with ``hostfile``, the distinct hosts listed in that file."""
    if hostfile is not None:
        from ezpz.inputs.hostlist import hosts_from_file

        hosts = hosts_from_file(hostfile, "get_num_nodes(hostfile=...)", required=False) if Path(hostfile).is_file() else ()
        if hosts:
            return len({h.split(".")[0] for h in hosts})
    return _layout().num_nodes


def get_node_index() -> int:
    """Index of this process's node."""
    return _layout().node_rank


def get_gpus_per_node() -> int:
    """Ranks per node when launched (the launcher's local world size), else the chosen device type's count."""
    layout = _layout()
    if layout.world_size > 1:
        return layout.local_world_size
    rt = hooks.get_runtime()
    return (rt.plan if rt is not None else _plan()).device.candidate.count


# -- device and backend ------------------------------------------------------------------------------


def get_torch_device_type(device_type: str | None = None) -> str:
    """The device type string (``"cuda"``, ``"xpu"``, ``"mps"``, ``"cpu"``, or a plugin's), or ``device_type`` if given."""
    if device_type is not None:
        return device_type.strip().lower().split(":", 1)[0]
    rt = hooks.get_runtime()
    return rt.device_type if rt is not None else _plan().device.candidate.device_type


def get_torch_device(*, device_type: str | None = None, as_torch_device: bool | None = None) -> str | torch.device:
    """The device as the original returned it: the type string (``"cuda"``), or ``TORCH_DEVICE`` as given.

    No ``:index`` is added: ``setup_torch()`` already made this rank's device
    current, so ``"cuda"`` means it. ``as_torch_device=True`` wraps the same
    value in a ``torch.device``. For the indexed device use
    ``ezpz.hooks.get_runtime().device``.
    """
    kind = get_torch_device_type(device_type)
    value = kind
    env = os.environ.get("TORCH_DEVICE", "").strip().lower()
    if device_type is None and env and env.split(":", 1)[0] == kind:
        value = env
    if as_torch_device:
        import torch

        return torch.device(value)
    return value


def get_torch_backend() -> str:
    """The collective backend name (``"nccl"``, ``"xccl"``, ``"gloo"``, ...)."""
    rt = hooks.get_runtime()
    return rt.backend if rt is not None else _plan().backend.name


# -- synchronisation ---------------------------------------------------------------------------------


def synchronize(device: Any = None) -> None:
    """Wait for queued work on this rank's device (or ``device``); a no-op on CPU."""
    rt = hooks.get_runtime()
    if rt is not None and device is None:
        rt.synchronize()
        return
    import torch

    if device is None or isinstance(device, int):
        kind = get_torch_device_type()
    else:
        kind = torch.device(device).type
    module = getattr(torch, kind, None) if kind != "cpu" else None
    sync = getattr(module, "synchronize", None)
    if sync is None:
        return
    if device is None:
        sync()
    else:
        sync(device)


def barrier(group: Any = None, implementation: str | None = None) -> None:
    """Block until every rank arrives (``torch.distributed.barrier``); a no-op without a process group.

    ``implementation`` is accepted for compatibility and ignored: ezpz has no MPI barrier.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier(group=group)


# -- models and seeds ----------------------------------------------------------------------------------


def _torch_dtype(dtype: Any) -> Any:
    import torch

    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    name = _DTYPES.get(str(dtype).strip().lower())
    if name is None:
        raise ConfigError(name="wrap_model(dtype=...)", value=dtype, expected=f"one of {', '.join(_DTYPES)} or a torch.dtype",
                          fix="pass dtype='bf16', 'fp16' or 'fp32'")
    return getattr(torch, name)


def wrap_model(
    model: Any, use_fsdp: bool = False, dtype: Any = None, device_mesh: Any = None,
    reshard_after_forward: bool | int = True, device_id: Any = None,
) -> Any:
    """Wrap ``model`` for data-parallel training; returned unchanged when the world size is 1.

    DDP by default (the original defaulted to FSDP2). ``use_fsdp=True``
    applies FSDP2 (``fully_shard``) to each child with parameters and then
    the root, on a 1-D mesh over all ranks unless ``device_mesh`` is given;
    ``dtype`` (``"bf16"``, ``torch.bfloat16``, ...) is the FSDP2 parameter
    dtype, with gradients reduced in fp32. The model is moved to this rank's
    device first, or to ordinal ``device_id`` of the same device type.
    """
    if get_world_size() <= 1:
        return model
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        raise SetupError("wrap_model() needs the process group: call ezpz.setup_torch() first")
    rt = hooks.get_runtime()
    device = rt.device if rt is not None else torch.device(get_torch_device_type())
    if device_id is not None and device.type != "cpu":
        device = torch.device(device.type, int(getattr(device_id, "index", device_id)))
    model = model.to(device)
    if not use_fsdp:
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type != "cpu" and device.index is not None else None
        return DistributedDataParallel(model, device_ids=ids)
    from ezpz.sharding.fsdp import fsdp2_for, shard_model
    from ezpz.sharding.precision import ShardPrecision

    module = fsdp2_for(device.type, str(device), rt.plan.mesh if rt is not None else None, who="wrap_model(use_fsdp=True)")
    if device_mesh is None:
        if rt is not None:
            device_mesh = rt.mesh()
        else:
            from ezpz.original.meshes import init_device_mesh_safe

            device_mesh = init_device_mesh_safe(device.type, (dist.get_world_size(),))
    param_dtype = _torch_dtype(dtype)
    name = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(param_dtype)
    precision = ShardPrecision(param_dtype=name, reduce_dtype="fp32" if name else None, grad_scaler=False,
                               reason=f"wrap_model(dtype={dtype!r})")
    options = ({"mp_policy": module.MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)}
               if param_dtype is not None and name is None else {})  # fp32, fp64: as asked
    return shard_model(model, device_mesh, module, precision, reshard_after_forward=reshard_after_forward, **options)


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy (when installed), torch (every device) and ``PYTHONHASHSEED``."""
    import torch

    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    try:
        import numpy as np
    except ImportError:
        pass
    else:
        np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
