"""A plugin for the kit's tests: emu, with a collective backend that genuinely has no reduce-scatter.

``emunors`` is emuccl's class rebuilt without its reduce-scatter methods (``reduce_scatter``,
``reduce_scatter_single``/``_reduce_scatter_base`` and their coalesced forms): every other collective works, and
``dist.reduce_scatter_tensor`` falls through to torch's own ``ProcessGroup``, which has no backend to run it. The
conformance kit's multi-rank live mode must fail ``live ranks reduce_scatter_tensor`` for it, with torch's error.
The ranks load this module by name (the kit passes its ``sys.path`` on); it is not installed.
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from ezpz import hookimpl

BACKEND = "emunors"
DROPPED = ("reduce_scatter", "reduce_scatter_single", "_reduce_scatter_base", "reduce_scatter_single_coalesced",
           "reduce_scatter_tensor_coalesced")


def _backend_class() -> type:
    from ezpz_example_emu.collectives import EmuCollectives

    def __init__(self: Any, store: Any, rank: int, size: int, timeout: Any) -> None:  # emuccl's, with another prefix
        dist.ProcessGroup.__init__(self, rank, size)
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore(f"{BACKEND}/", store), rank, size, timeout)
        self._name = ""
        self._refused = frozenset()  # emuccl's EMUCCL_REFUSE_REDUCE_OPS: nothing refused here

    kept = {k: v for k, v in vars(EmuCollectives).items()
            if k not in DROPPED and k not in ("__init__", "__dict__", "__weakref__")}
    kept.update(__init__=__init__, getBackendName=lambda self: BACKEND)
    return type("EmuWithoutReduceScatter", (dist.ProcessGroup,), kept)


def _register() -> None:
    if getattr(dist.Backend, BACKEND.upper(), None) is None:
        cls = _backend_class()
        dist.Backend.register_backend(BACKEND, lambda store, rank, size, timeout: cls(store, rank, size, timeout),
                                      devices=["cpu", "emu"])


@hookimpl
def ezpz_probe_devices(build: Any, environ: Any) -> Any:
    from ezpz_example_emu import plugin

    return plugin.ezpz_probe_devices(build=build, environ=environ)


@hookimpl
def ezpz_select_backend(device: Any, build: Any, launch: Any, requested: Any) -> Any:
    from ezpz.decisions import BackendChoice
    from ezpz.plugin_kit import facts_if_ours
    from ezpz_example_emu.plugin import FACTS

    if facts_if_ours(device, FACTS) is None:
        return None
    return BackendChoice(name=BACKEND, reason="emuccl without its reduce-scatter (a conformance-kit test)")


@hookimpl
def ezpz_amp_policy(device: Any, build: Any, requested: str) -> Any:
    from ezpz_example_emu import plugin

    return plugin.ezpz_amp_policy(device=device, build=build, requested=requested)


@hookimpl
def ezpz_before_init(plan: Any) -> Any:
    from ezpz.decisions import LifecycleAction
    from ezpz.plugin_kit import facts_if_ours
    from ezpz_example_emu import device
    from ezpz_example_emu.plugin import FACTS

    if facts_if_ours(plan.device.candidate, FACTS) is None:
        return None
    device.register()
    _register()
    return LifecycleAction(reason=f"registered emu and {BACKEND} (no reduce-scatter)")
