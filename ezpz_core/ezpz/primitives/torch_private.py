"""Every private torch name ezpz uses, each behind a guard with a named fallback for a torch that lacks it.

torch promises nothing about names with a leading underscore: any release may
rename or drop one. ezpz touches such a name only where no public API does the
job, only through a guard with a fallback (here, or in the one module that
needs it: a vendor's plugin, the torch-build probe), and :data:`PRIVATE_NAMES`
lists each one with where it is used, why, what ezpz does without it, and on
which torch releases it was checked.
``tests/test_torch_private.py`` holds the code to this list (a private name
used anywhere else fails it) and checks each guard and fallback on the torch it
runs under; docs/compat.md shows the list.

No torch import here: each guard imports torch when it is called, which is only
after the caller has imported it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["CHECKED_ON", "GLOO_DEFAULT_THREADS", "PRIVATE_NAMES", "PrivateName", "backend_for_device", "flatten_mesh",
           "fsdp2", "gloo_threads", "profiler_enabled", "tls_stash"]

CHECKED_ON = ("2.4.1", "2.13.0", "2.15.0")
"""The torch releases each name's presence was checked on: the oldest the core supports, CI's pin, the newest."""

GLOO_DEFAULT_THREADS = 2
"""``ProcessGroupGloo``'s worker threads when nothing else is said (``Options`` default, torch 2.4 to 2.15)."""


class PrivateName:
    """One private torch name: where ezpz uses it, why, and what ezpz does on a torch without it.

    A plain class (no attrs, no NamedTuple): this module loads with the runtime, and those build code per class.
    """

    __slots__ = ("absent_in", "builds", "fallback", "name", "where", "why")

    def __init__(self, name: str, where: tuple[str, ...], why: str, fallback: str,
                 absent_in: tuple[str, ...] = (), builds: str = "") -> None:
        self.name = name  #: the full name, as torch spells it
        self.where = where  #: the files (from the repository root) that touch it: the guard, or the one user
        self.why = why  #: what it gives that no public API does
        self.fallback = fallback  #: what ezpz does on a torch without it
        self.absent_in = absent_in  #: releases of CHECKED_ON that lack it
        self.builds = builds  #: only in these builds (empty: every build)

    @property
    def attr(self) -> str:
        """The private attribute itself, as code spells it (``_get_backend``)."""
        return self.name.rsplit(".", 1)[1]

    def __repr__(self) -> str:
        return f"PrivateName({self.name!r})"


_HERE = "ezpz_core/ezpz/primitives/torch_private.py"

PRIVATE_NAMES: tuple[PrivateName, ...] = (
    PrivateName(
        "torch.nn.Module._parameters", ("ezpz_core/ezpz/cuda_compat/tensors.py",),
        "python -m ezpz.cuda_compat finds the parameters a model shares between modules before Module.to and "
        "puts the one object back in each owner after it, where the device's move made one per module (XLA)",
        "without it the re-tie cannot run: weights tied across modules (nanoGPT's wte/lm_head) train apart on "
        "such a device, and the losses differ from CUDA's"),
    PrivateName(
        "torch.utils._device._device_constructors", ("ezpz_core/ezpz/cuda_compat/indirect.py",),
        "python -m ezpz.cuda_compat builds torch's cached list of factory functions (the ones `with "
        "torch.device(...)` and set_default_device act on) from torch's own factories before it replaces them, "
        "and replaces torch's DeviceContext, so a default CUDA device from the user's code reaches the chosen one",
        "without it the list is not pre-built; a torch that has no such list has no such cache to go stale"),
    PrivateName(
        "torch.testing._internal", ("ezpz_core/ezpz/testing/torch_db_samples.py",),
        "check_plugin(ops=True) runs torch's own test databases (op_db, module_db) on a plugin's device: the "
        "samples torch's own device tests use",
        "the databases part of the kit is reported as not run, naming the missing module (torch builds without "
        "its test package)"),
    PrivateName(
        "torch.autograd.profiler._is_profiler_enabled", (_HERE,),
        "whether a torch profiler is recording, so Runtime.range() opens a record_function only then and is a "
        "no-op otherwise (torch has no public 'is a profiler running')",
        "ranges always open a record_function, which torch ignores while no profiler runs (a few microseconds "
        "per range)"),
    PrivateName(
        "torch._C._stash_obj_in_tls", (_HERE,),
        "carries a marker object in a gloo collective's thread-local state, so teardown() sees every gloo worker "
        "thread drop its last collective before the interpreter finalizes (ezpz.primitives.gloo_quiesce)",
        "the quiesce step is skipped and says so (QuiesceReport.attempted False); teardown() goes on with "
        "destroy_process_group() alone, and a group that outlives it may abort at exit (docs/portable-script.md)"),
    PrivateName(
        "torch._C._remove_obj_from_tls", (_HERE,),
        "takes the marker back out of this thread's state after each marker collective (ezpz.primitives.gloo_quiesce)",
        "as without _stash_obj_in_tls: the quiesce step is skipped and says so", absent_in=("2.4.1",)),
    PrivateName(
        "torch.distributed.ProcessGroup._get_backend", (_HERE,),
        "the backend object of a group for one device: whether it is gloo (and its worker count) for "
        "ezpz.primitives.gloo_quiesce, and whether it supports_splitting for rt.mesh() and init_device_mesh_safe "
        "(where the device's plugin leaves it to the backend: ezpz.sharding.mesh)",
        "gloo is recognised by the public torch.distributed.get_backend(group) name, with gloo's default worker "
        "count; a mesh is built the way torch builds it (splitting assumed supported)"),
    PrivateName(
        "torch.distributed.ProcessGroupGloo.options._threads", (_HERE,),
        "how many worker threads a gloo backend runs, each of which must be seen past its last collective",
        f"gloo's default, {GLOO_DEFAULT_THREADS} threads (a group made with more is reported as not fully seen)"),
    PrivateName(
        "torch.distributed.device_mesh.DeviceMesh._flatten", (_HERE,),
        "the original ezpz's flatten_device_mesh_safe(submesh, name) is this call (HSDP's flattened dp dimension)",
        "flatten_device_mesh_safe raises UnavailableError naming this torch; pass the 2-D submesh to fully_shard "
        "(HSDP) instead, or use a torch that has it", absent_in=("2.4.1",)),
    PrivateName(
        "torch.distributed._composable.fsdp", (_HERE,),
        "FSDP2 (fully_shard, MixedPrecisionPolicy) for rt.shard() and the original ezpz's wrap_model(use_fsdp=True) "
        "on a torch from before its public torch.distributed.fsdp home (2.6); the public module is tried first",
        "rt.shard() and wrap_model(use_fsdp=True) raise UnavailableError naming this torch (also on the CPU with "
        "this older FSDP2, which creates CUDA streams); DDP works on every torch"),
    PrivateName(
        "torch.xpu._is_compiled", ("ezpz_core/ezpz/probes/torch_build.py",),
        "whether torch was built with XPU, read without starting the XPU runtime (is_available() starts it)",
        "XPU is taken as not built (TorchBuild.xpu_built False); the XPU plugin then says torch has no XPU"),
    PrivateName(
        "torch._C._cuda_getArchFlags", ("plugins/ezpz-cuda/ezpz_cuda/probe.py",),
        "the CUDA architectures torch was compiled for, read without touching the driver (ezpz-cuda's probe)",
        "the public torch.cuda.get_arch_list(), which asks the driver whether CUDA is available first",
        builds="CUDA builds"),
)
"""Every private torch name ezpz (core and the plugins in this repository) uses."""


def profiler_enabled() -> bool:
    """Whether a torch profiler is recording; True where this torch cannot say (see :data:`PRIVATE_NAMES`)."""
    import torch

    return bool(getattr(torch.autograd.profiler, "_is_profiler_enabled", True))


def tls_stash() -> tuple[Callable[[str, object], None], Callable[[str], None]] | None:
    """torch's thread-local object stash (put, take out), or None where this torch lacks either half."""
    import torch

    put = getattr(torch._C, "_stash_obj_in_tls", None)
    take = getattr(torch._C, "_remove_obj_from_tls", None)
    return (put, take) if put is not None and take is not None else None


def backend_for_device(group: Any, device: Any) -> Any | None:
    """The group's backend object for ``device``, or None where this torch (or the group) cannot say."""
    get = getattr(group, "_get_backend", None)
    if get is None:
        return None
    try:
        return get(device)
    except (RuntimeError, ValueError):  # no backend for that device
        return None


def gloo_threads(backend: Any) -> int:
    """How many worker threads a gloo backend runs; :data:`GLOO_DEFAULT_THREADS` where this torch cannot say."""
    try:
        return int(backend.options._threads)
    except (AttributeError, TypeError, ValueError):
        return GLOO_DEFAULT_THREADS


def flatten_mesh(submesh: Any) -> Callable[[str], Any] | None:
    """``submesh._flatten`` (flattening a sub-mesh into one named dimension), or None where this torch lacks it."""
    return getattr(submesh, "_flatten", None)


def fsdp2() -> Any | None:
    """The module holding FSDP2's ``fully_shard`` and ``MixedPrecisionPolicy``, or None where this torch has none.

    ``torch.distributed.fsdp`` from torch 2.6; before, the private ``torch.distributed._composable.fsdp``.
    """
    import importlib

    finders: tuple[Callable[[], ModuleType], ...] = (
        lambda: importlib.import_module("torch.distributed.fsdp"),
        lambda: importlib.import_module("torch.distributed._composable.fsdp"))
    for find in finders:
        try:
            module = find()
        except ImportError:
            continue
        if hasattr(module, "fully_shard") and hasattr(module, "MixedPrecisionPolicy"):
            return module
    return None
