"""What each rank of the kit's multi-rank live mode checks: the collectives, DDP, device meshes, FSDP2, DCP.

Every check takes the live runtime (``setup()`` on the plugin's device, with
its backend, on one of several ranks) and a scratch directory every rank
sees, and returns what it saw, raises
:class:`NotApplicable` naming why it cannot apply here (a skip), or raises
(an ``AssertionError`` saying what is wrong, or whatever the device or the
backend raised: a failure, its exception text the detail). Every rank runs
every check in the same order: a collective that one rank cannot run is one
that no rank can, so a failure does not leave a peer waiting (and the group's
timeout bounds one that does). Tensors live on the plugin's device
(``rt.device``); models run in fp32, outside autocast, so DDP's and FSDP2's
losses can be compared exactly. Nothing here knows a device type.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ezpz.testing.hookimpls import one_line

if TYPE_CHECKING:
    from ezpz.runtime import Runtime

__all__ = ["RANK_CHECKS", "NotApplicable"]


class NotApplicable(Exception):  # noqa: N818  (a skip, not an error)
    """The check cannot apply here; the message says why (reported as skipped, never as passed)."""


# -- helpers --------------------------------------------------------------------------------------------------


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def _same(got: Any, want: Any, what: str) -> None:
    import torch

    assert got.device == want.device or got.device.type == want.device.type, f"{what}: the result is on {got.device}"
    assert torch.equal(got.cpu(), want.cpu()), f"{what}: got {got.cpu().tolist()}, expected {want.cpu().tolist()}"


def _collective(name: str, legacy: str | None = None) -> Callable[..., Any]:
    """``torch.distributed.<name>`` (or ``legacy``: torch 2.13 renamed the single-tensor ones), raising
    AssertionError that names the collective and the backend when the backend cannot run it."""
    dist = _dist()
    fn = getattr(dist, name, None) or getattr(dist, legacy or name)
    shown = legacy or name

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001  the backend's own words, with the collective's name
            tensor = next((a for a in args if hasattr(a, "device")), None)
            on = f" on {tensor.device} tensors" if tensor is not None else ""
            raise AssertionError(f"torch.distributed.{shown}{on} failed with backend {dist.get_backend()}: "
                                 f"{type(err).__name__}: {one_line(err)}") from err

    return call


def _device_module(rt: Runtime) -> Any:
    """The device's torch module, which DeviceMesh and FSDP2 use; NotApplicable where torch has none (XLA)."""
    import torch

    try:
        return torch.get_device_module(rt.device_type)
    except (RuntimeError, AttributeError) as err:
        raise NotApplicable(f"torch has no device module for {rt.device_type!r} ({err}): DeviceMesh and FSDP2 "
                            "find the device's current index and streams there") from None


def _fsdp2(rt: Runtime) -> Any:
    from ezpz.primitives.torch_private import fsdp2

    _device_module(rt)
    module = fsdp2()
    if module is None:
        import torch

        raise NotApplicable(f"torch {torch.__version__} has no FSDP2 (torch.distributed.fsdp.fully_shard)")
    return module


def _model(rt: Runtime) -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to(rt.device)


def _batch(rt: Runtime, step: int, rank: int) -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(6, 8, generator=g).to(rt.device), torch.randn(6, 4, generator=g).to(rt.device)


def _train(model: Any, rt: Runtime, steps: int) -> list[float]:
    """``steps`` of SGD on this rank's batches, fp32; the loss averaged over ranks at each step."""
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        x, y = _batch(rt, step, rt.rank)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        _dist().all_reduce(mean)
        losses.append(float(mean.cpu()) / rt.world_size)
    return losses


def _shard(rt: Runtime, mesh: Any) -> Any:
    fully_shard = _fsdp2(rt).fully_shard
    model = _model(rt)
    for layer in model:
        if any(True for _ in layer.parameters()):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _mesh(rt: Runtime, shape: tuple[int, ...], names: tuple[str, ...]) -> Any:
    _device_module(rt)
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(rt.device_type, shape, mesh_dim_names=names)


# -- the collectives FSDP2 and DDP use, on device tensors --------------------------------------------------------


def all_reduce(rt: Runtime, scratch: str) -> str:
    import torch

    t = torch.full((4,), float(rt.rank + 1), device=rt.device)
    _collective("all_reduce")(t)
    total = rt.world_size * (rt.world_size + 1) / 2
    _same(t, torch.full((4,), total, device=rt.device), "all_reduce (sum)")
    return f"sum over {rt.world_size} ranks on {t.device}"


def all_gather_into_tensor(rt: Runtime, scratch: str) -> str:
    import torch

    mine = torch.arange(3, dtype=torch.float32, device=rt.device) + 10 * rt.rank
    out = torch.empty(3 * rt.world_size, dtype=torch.float32, device=rt.device)
    _collective("all_gather_single", "all_gather_into_tensor")(out, mine)
    want = torch.cat([torch.arange(3, dtype=torch.float32) + 10 * r for r in range(rt.world_size)])
    _same(out, want.to(rt.device), "all_gather_into_tensor")
    return f"every rank's piece, in rank order, in one tensor on {out.device}"


def reduce_scatter_tensor(rt: Runtime, scratch: str) -> str:
    import torch

    full = torch.arange(2 * rt.world_size, dtype=torch.float32, device=rt.device) * (rt.rank + 1)
    out = torch.empty(2, dtype=torch.float32, device=rt.device)
    _collective("reduce_scatter_single", "reduce_scatter_tensor")(out, full)
    scale = rt.world_size * (rt.world_size + 1) / 2
    want = torch.arange(2 * rt.rank, 2 * rt.rank + 2, dtype=torch.float32) * scale
    _same(out, want.to(rt.device), "reduce_scatter_tensor (sum)")
    return f"each rank gets its piece of the sum, on {out.device}"


def broadcast(rt: Runtime, scratch: str) -> str:
    import torch

    last = rt.world_size - 1
    t = torch.full((3,), float(rt.rank), device=rt.device)
    _collective("broadcast")(t, src=last)
    _same(t, torch.full((3,), float(last), device=rt.device), f"broadcast from rank {last}")
    return f"rank {last}'s tensor on every rank, on {t.device}"


def all_to_all_single(rt: Runtime, scratch: str) -> str:
    import torch

    n = rt.world_size
    mine = torch.tensor([10.0 * rt.rank + peer for peer in range(n)], device=rt.device)
    out = torch.empty(n, device=rt.device)
    _collective("all_to_all_single")(out, mine)
    _same(out, torch.tensor([10.0 * peer + rt.rank for peer in range(n)], device=rt.device), "all_to_all_single")
    return f"piece j of every rank to rank j, on {out.device}"


def send_recv(rt: Runtime, scratch: str) -> str:
    import torch

    send, recv = _collective("send"), _collective("recv")
    peer = rt.rank ^ 1  # pairs (0, 1), (2, 3), ...
    if peer >= rt.world_size:
        return f"rank {rt.rank} has no partner"
    t = torch.arange(4, dtype=torch.float32, device=rt.device) + 100 * rt.rank
    back = torch.empty(4, dtype=torch.float32, device=rt.device)
    if rt.rank % 2 == 0:
        send(t, dst=peer)
        recv(back, src=peer)
    else:
        recv(back, src=peer)
        send(t, dst=peer)
    _same(back, torch.arange(4, dtype=torch.float32, device=rt.device) + 100 * peer, f"recv from rank {peer}")
    return f"a tensor each way between ranks {min(rt.rank, peer)} and {max(rt.rank, peer)}, on {back.device}"


_BARRIER_DELAY_S = 0.5


def barrier(rt: Runtime, scratch: str) -> str:
    if rt.rank == rt.world_size - 1:
        time.sleep(_BARRIER_DELAY_S)
    start = time.monotonic()
    _collective("barrier")()
    waited = time.monotonic() - start
    if rt.rank == 0:
        assert waited >= _BARRIER_DELAY_S * 0.8, (
            f"barrier() returned after {waited:.3f} s on rank 0 while the last rank arrived {_BARRIER_DELAY_S} s late")
    return f"rank 0 waited {waited:.2f} s for the last rank" if rt.rank == 0 else "returned"


# -- DDP, meshes, FSDP2, a sharded checkpoint --------------------------------------------------------------------


def ddp_step(rt: Runtime, scratch: str) -> str:
    import torch

    dist = _dist()
    ids = [rt.device.index] if rt.device.index is not None else None
    model = torch.nn.parallel.DistributedDataParallel(_model(rt), device_ids=ids)
    _train(model, rt, 1)
    mine = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    first = mine.clone()
    dist.broadcast(first, src=0)
    assert torch.equal(mine.cpu(), first.cpu()), "after one DDP step the parameters differ between ranks"
    ref = _model(rt)  # the same step on one process: the mean of the per-rank losses over every rank's batch
    batches = [_batch(rt, 0, r) for r in range(rt.world_size)]
    loss: Any = sum(torch.nn.functional.mse_loss(ref(x), y) for x, y in batches) / rt.world_size
    loss.backward()
    torch.optim.SGD(ref.parameters(), lr=0.1).step()
    want = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])
    assert torch.allclose(mine.cpu(), want.cpu(), rtol=1e-3, atol=1e-5), (
        "the DDP step differs from the same step on one process over every rank's batch "
        f"(max difference {float((mine.cpu() - want.cpu()).abs().max()):.3g})")
    return "parameters equal on every rank, and to one process's step over every rank's batch"


def mesh_1d(rt: Runtime, scratch: str) -> str:
    import torch

    mesh = _mesh(rt, (rt.world_size,), ("all",))
    group = mesh.get_group()
    assert group.group_name, "the mesh's group has no name"
    t = torch.ones(2, device=rt.device)
    _dist().all_reduce(t, group=group)
    _same(t, torch.full((2,), float(rt.world_size), device=rt.device), "all_reduce over the mesh's group")
    return f"init_device_mesh({rt.device_type!r}, ({rt.world_size},)): its group {group.group_name!r} reduces"


def mesh_2d(rt: Runtime, scratch: str) -> str:
    import torch

    shape = (rt.world_size, 1) if rt.world_size < 4 else (2, rt.world_size // 2)
    mesh = _mesh(rt, shape, ("dp", "tp"))
    coordinate = mesh.get_coordinate()
    said = []
    for dim, name in enumerate(("dp", "tp")):
        group = mesh[name].get_group()
        assert group.group_name, f"the {name!r} dimension's group has no name"
        t = torch.full((2,), float(rt.rank), device=rt.device)
        _dist().all_reduce(t, group=group)
        members = mesh.mesh.swapdims(dim, -1).reshape(-1, shape[dim])
        row = next(r for r in members.tolist() if rt.rank in r)
        _same(t, torch.full((2,), float(sum(row)), device=rt.device), f"all_reduce over dimension {name!r}")
        said.append(f"{name}={shape[dim]}")
    return (f"init_device_mesh({rt.device_type!r}, {shape}): rank {rt.rank} at {coordinate}; each dimension's group "
            f"reduces ({', '.join(said)})")


_STEPS = 3


def fsdp2_step(rt: Runtime, scratch: str) -> str:
    import torch

    mesh = _mesh(rt, (rt.world_size,), ("shard",))
    sharded = _shard(rt, mesh)
    ids = [rt.device.index] if rt.device.index is not None else None
    fsdp = _train(sharded, rt, _STEPS)
    ddp = _train(torch.nn.parallel.DistributedDataParallel(_model(rt), device_ids=ids), rt, _STEPS)
    worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(fsdp, ddp))
    assert worst < 1e-4, f"FSDP2's losses {fsdp} differ from DDP's {ddp} (relative {worst:.2e}, fp32)"
    local = {p.to_local().device.type for p in sharded.parameters()}
    assert local == {rt.device_type}, f"FSDP2's shards are on {sorted(local)}"
    return f"fully_shard over {rt.world_size} ranks: {_STEPS} fp32 steps, losses equal DDP's (relative {worst:.1e})"


def sharded_checkpoint(rt: Runtime, scratch: str) -> str:
    import torch

    _fsdp2(rt)
    try:
        import torch.distributed.checkpoint as dcp
    except ImportError as err:
        raise NotApplicable(f"this torch has no torch.distributed.checkpoint ({err})") from None
    directory = f"{scratch}/checkpoint"
    mesh = _mesh(rt, (rt.world_size,), ("shard",))
    model = _shard(rt, mesh)
    _train(model, rt, 1)  # weights no longer the initial ones
    dcp.save({"model": model.state_dict()}, checkpoint_id=directory)
    fresh = _shard(rt, mesh)
    state = {"model": fresh.state_dict()}
    dcp.load(state, checkpoint_id=directory)
    fresh.load_state_dict(state["model"])
    saved = [p.full_tensor().cpu() for p in model.parameters()]
    loaded = [p.full_tensor().cpu() for p in fresh.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(saved, loaded)), "the loaded weights differ from the saved ones"
    on = {p.to_local().device.type for p in fresh.parameters()}
    assert on == {rt.device_type}, f"the loaded shards are on {sorted(on)}"
    return f"torch.distributed.checkpoint: an FSDP2 model's shards saved by {rt.world_size} ranks, loaded into a " \
           f"fresh one on {rt.device_type}, equal"


#: The checks each rank runs, in order: (result name, check). Each takes the runtime and a scratch directory that
#: every rank sees (the sharded checkpoint is written there).
RANK_CHECKS: tuple[tuple[str, Callable[[Runtime, str], str]], ...] = (
    ("live ranks all_reduce", all_reduce),
    ("live ranks all_gather_into_tensor", all_gather_into_tensor),
    ("live ranks reduce_scatter_tensor", reduce_scatter_tensor),
    ("live ranks broadcast", broadcast),
    ("live ranks all_to_all_single", all_to_all_single),
    ("live ranks send/recv", send_recv),
    ("live ranks barrier", barrier),
    ("live ranks DDP step", ddp_step),
    ("live ranks 1-D mesh", mesh_1d),
    ("live ranks 2-D mesh", mesh_2d),
    ("live ranks FSDP2 step", fsdp2_step),
    ("live ranks sharded checkpoint", sharded_checkpoint),
)
