"""``emuccl``: a torch.distributed backend for ``emu`` tensors, staging every collective through gloo.

Registered with ``torch.distributed.Backend.register_backend("emuccl", ...,
devices=["cpu", "emu"])``, so ``init_process_group("emuccl")`` gives a default
group whose collectives take ``emu`` tensors (and CPU tensors, for the host-side
collectives ezpz and DDP run). Each collective hands gloo the CPU aliases of the
``emu`` tensors (:func:`ezpz_example_emu.device.to_cpu_alias`: the same memory,
no copy), waits for it, and returns a completed work. A real vendor's backend
(NCCL, HCCL, oneCCL) is a C++ ``c10d::Backend`` whose collectives run on the
device's interconnect and return asynchronous work tied to the device's streams.
"""

from __future__ import annotations

import datetime
import threading
from typing import Any

import torch
import torch.distributed as dist

from ezpz_example_emu.device import DEVICE_TYPE, to_cpu_alias

__all__ = ["BACKEND", "EmuCollectives", "register_backend"]

BACKEND = "emuccl"
_lock = threading.Lock()
_registered = False


def _host(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [to_cpu_alias(t) if t.device.type == DEVICE_TYPE else t for t in tensors]


def _done(result: Any) -> Any:
    future: torch.futures.Future[Any] = torch.futures.Future()
    future.set_result(result)
    return torch._C._distributed_c10d._create_work_from_future(future)


class EmuCollectives(dist.ProcessGroup):  # type: ignore[misc]
    """The ``emuccl`` backend of one group: gloo underneath, on the CPU aliases of ``emu`` tensors."""

    def __init__(self, store: Any, rank: int, size: int, timeout: datetime.timedelta) -> None:
        super().__init__(rank, size)
        self._gloo: Any = dist.ProcessGroupGloo(dist.PrefixStore(f"{BACKEND}/", store), rank, size, timeout)

    @property
    def gloo(self) -> Any:
        """The gloo group underneath (ezpz quiesces its worker threads at teardown)."""
        return self._gloo

    def getBackendName(self) -> str:
        return BACKEND

    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        self._gloo.allreduce(_host(tensors), opts or dist.AllreduceOptions()).wait()
        return _done(tensors)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        for t in tensors:
            opt = dist.AllreduceOptions()
            if opts is not None:
                opt.reduceOp = opts.reduceOp
            self._gloo.allreduce([to_cpu_alias(t) if t.device.type == DEVICE_TYPE else t], opt).wait()
        return _done(tensors)

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        self._gloo.broadcast(_host(tensors), opts or dist.BroadcastOptions()).wait()
        return _done(tensors)

    def allgather(self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor],
                  opts: Any = None) -> Any:
        outs = [_host(o) for o in output_tensors]
        self._gloo.allgather(outs, _host(input_tensors), opts or dist.AllgatherOptions()).wait()
        return _done(output_tensors)

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> Any:
        self._gloo._allgather_base(_host([output])[0], _host([input])[0], opts or dist.AllgatherOptions()).wait()
        return _done([output])

    def allgather_into_tensor_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                        opts: Any = None) -> Any:
        for o, i in zip(outputs, inputs):
            self._gloo._allgather_base(_host([o])[0], _host([i])[0], dist.AllgatherOptions()).wait()
        return _done(outputs)

    def gather(self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor],
               opts: Any = None) -> Any:
        outs = [_host(o) for o in output_tensors]
        self._gloo.gather(outs, _host(input_tensors), opts or dist.GatherOptions()).wait()
        return _done(output_tensors)

    def scatter(self, output_tensors: list[torch.Tensor], input_tensors: list[list[torch.Tensor]],
                opts: Any = None) -> Any:
        ins = [_host(i) for i in input_tensors]
        self._gloo.scatter(_host(output_tensors), ins, opts or dist.ScatterOptions()).wait()
        return _done(output_tensors)

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        self._gloo.reduce(_host(tensors), opts or dist.ReduceOptions()).wait()
        return _done(tensors)

    def reduce_scatter(self, output_tensors: list[torch.Tensor], input_tensors: list[list[torch.Tensor]],
                       opts: Any = None) -> Any:
        ins = [_host(i) for i in input_tensors]
        self._gloo.reduce_scatter(_host(output_tensors), ins, opts or dist.ReduceScatterOptions()).wait()
        return _done(output_tensors)

    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: list[int],
                      input_split_sizes: list[int], opts: Any = None) -> Any:
        self._gloo.alltoall_base(_host([output])[0], _host([input])[0], output_split_sizes, input_split_sizes,
                                 opts or dist.AllToAllOptions()).wait()
        return _done([output])

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> Any:
        self._gloo.send(_host(tensors), dst, tag).wait()
        return _done(tensors)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> Any:
        self._gloo.recv(_host(tensors), src, tag).wait()
        return _done(tensors)

    def barrier(self, opts: Any = None) -> Any:
        self._gloo.barrier(opts or dist.BarrierOptions()).wait()
        return _done([])


def _create(store: Any, rank: int, size: int, timeout: datetime.timedelta) -> EmuCollectives:
    return EmuCollectives(store, rank, size, timeout)


def register_backend() -> str:
    """Make ``emuccl`` a torch.distributed backend for ``cpu`` and ``emu`` tensors (idempotent); its name."""
    global _registered
    with _lock:
        if not _registered:
            if getattr(dist.Backend, BACKEND.upper(), None) is None:
                dist.Backend.register_backend(BACKEND, _create, devices=["cpu", DEVICE_TYPE])
            _registered = True
    return BACKEND
