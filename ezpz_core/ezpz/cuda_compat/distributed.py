"""``init_process_group('nccl')`` -> the group ``setup()`` made; ``ReduceOp.AVG`` where the backend lacks it; DDP.

``setup()`` already created the process group with the backend the plugins chose (world size > 1): the
script's ``init_process_group`` adopts it instead of making a second one, and its
``destroy_process_group`` leaves it to ``teardown()`` at exit. A single-process script that makes a group
anyway gets the chosen backend. ``all_reduce(op=ReduceOp.AVG)`` on a backend without AVG (gloo) reduces
with SUM and divides by the group's size. ``DistributedDataParallel(device_ids=[...])`` gets this rank's device (so DDP moves
the forward's inputs there, as on CUDA), or none on the CPU, where DDP takes none.
"""

from __future__ import annotations

from typing import Any

from ezpz.cuda_compat.context import Compat
from ezpz.cuda_compat.patching import scoped
from ezpz.cuda_compat.scope import Site

__all__ = ["install"]


def install(c: Compat) -> None:
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        return
    import torch.nn.parallel as parallel

    scope, patches, rt = c.scope, c.patches, c.rt
    backend = rt.backend
    init = dist.init_process_group

    def init_group(site: Site, backend_asked: Any = None, *args: Any, **kwargs: Any) -> Any:
        asked = kwargs.pop("backend", backend_asked)
        if dist.is_initialized():
            site.note(f"init_process_group({asked!r})",
                      f"the group setup() made ({dist.get_backend()}, {dist.get_world_size()} ranks), adopted",
                      "same" if asked in (None, backend) else "different")
            return None
        chosen = backend if asked is None or "nccl" in str(asked) else asked
        asked_id = kwargs.get("device_id")
        if asked_id is not None and (c.devices.asks_cuda(asked_id) or str(asked_id).split(":")[0] == c.devices.type):
            bound = c.devices.device(asked_id) if c.devices.asks_cuda(asked_id) else torch.device(asked_id)
            if bound.index is None or bound.type == "cpu":
                kwargs.pop("device_id")
                site.note(f"init_process_group(device_id={str(asked_id)!r})",
                          f"no device_id: {bound.type} has no device index to bind the group to", "none")
            else:
                kwargs["device_id"] = bound
                site.note(f"init_process_group(device_id={str(asked_id)!r})", f"device_id={str(bound)!r}", "same")
        site.note(f"init_process_group({asked!r})", f"init_process_group({chosen!r})",
                  "same" if chosen == asked else "different")
        return init(chosen, *args, **kwargs)

    destroy_original = dist.destroy_process_group

    def destroy(site: Site, group: Any = None) -> None:
        if group is None and rt.process_group:
            site.note("destroy_process_group()", "left to ezpz's teardown() at exit (setup() made the group)", "same")
            return None
        return destroy_original(group)

    patches.replace(dist, "init_process_group", scoped(scope, init, init_group))
    patches.replace(dist, "destroy_process_group", scoped(scope, destroy_original, destroy))

    missing = set(c.answers.missing_reduce_ops)
    if "AVG" in missing:
        all_reduce = dist.all_reduce

        def asks_avg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
            op = args[1] if len(args) > 1 else kwargs.get("op")
            return op is not None and op == dist.ReduceOp.AVG

        def averaged(site: Site, tensor: Any, op: Any = None, group: Any = None, async_op: bool = False) -> Any:
            all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
            tensor.div_(dist.get_world_size(group))
            site.note("all_reduce(op=ReduceOp.AVG)", f"all_reduce(op=SUM) then / world size: {backend} has no AVG",
                      "different")
            return _Done() if async_op else None

        patches.replace(dist, "all_reduce", scoped(scope, all_reduce, averaged, asks_avg))

    ddp = parallel.DistributedDataParallel
    ddp_init = ddp.__init__

    def asks_devices(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        return bool(kwargs.get("device_ids") or kwargs.get("output_device") is not None or len(args) > 2)

    def ddp_devices(site: Site, this: Any, module: Any, device_ids: Any = None, output_device: Any = None,
                    *args: Any, **kwargs: Any) -> None:
        asked = f"DistributedDataParallel(device_ids={device_ids!r})"
        held = {p.device for p in module.parameters()}
        target = held.pop() if len(held) == 1 else torch.device("cpu")
        if target.type != "cpu" and target.index is not None:
            try:  # as device_ids=[i] on CUDA: DDP moves the forward's inputs to the module's device
                ddp_init(this, module, [target], target, *args, **kwargs)
            except (ValueError, RuntimeError, AssertionError) as refused:
                site.note(asked, f"DistributedDataParallel(device_ids=None): DDP refused [{str(target)!r}] "
                                 f"({type(refused).__name__}: {refused}); forward inputs are not moved", "different")
            else:
                site.note(asked, f"DistributedDataParallel(device_ids=[{str(target)!r}]): the module's device; "
                                 "DDP moves the forward's inputs there, as on CUDA", "same")
                return None
        else:
            site.note(asked, f"DistributedDataParallel(device_ids=None): the module's own device ({c.target}); "
                             "DDP takes device_ids only for one accelerator device", "same")
        ddp_init(this, module, None, None, *args, **kwargs)
        return None

    patches.replace(ddp, "__init__", scoped(scope, ddp_init, ddp_devices, asks_devices))


class _Done:
    """The finished work an ``async_op=True`` averaged all-reduce hands back (it ran synchronously)."""

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True
