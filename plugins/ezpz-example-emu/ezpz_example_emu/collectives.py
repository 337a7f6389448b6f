"""``emuccl``: a torch.distributed backend for ``emu`` tensors, staging every collective through gloo.

Registered with ``torch.distributed.Backend.register_backend("emuccl", ...,
devices=["cpu", "emu"])``, so ``init_process_group("emuccl")`` gives a default
group whose collectives take ``emu`` tensors (and CPU tensors, for the host-side
collectives ezpz and DDP run), and ``new_group``/``init_device_mesh("emu", ...)``
give sub-groups of it. Each collective hands gloo the CPU aliases of the
``emu`` tensors (:func:`ezpz_example_emu.device.to_cpu_alias`: the same memory,
no copy), waits for it, and returns a completed work. A real vendor's backend
(NCCL, HCCL, oneCCL) is a C++ ``c10d::Backend`` whose collectives run on the
device's interconnect and return asynchronous work tied to the device's streams.

What torch 2.13 asks of a backend written in Python (``torch._C._distributed_c10d.Backend``
has no Python constructor, so it is a ``ProcessGroup`` subclass, which torch
uses in place of the group it would have built):

* a name: torch keeps a group's name in the C++ backends registered on it, and
  a Python group has none, so ``_set_group_name`` (called by torch when it
  registers the group) would be lost and ``group_name`` would raise
  ``ProcessGroup name not set`` (``DeviceMesh`` names every group it uses). The
  group keeps the name itself, as torch's own Python test group does;
* every collective under the names torch calls: the list forms
  (``allreduce``, ``allgather``, ``broadcast``, ...), the single-tensor forms
  FSDP2 and DTensor use (``all_gather_single``/``_allgather_base``,
  ``reduce_scatter_single``/``_reduce_scatter_base``, ``all_to_all_single``/
  ``alltoall_base``) and their coalesced forms; ``send``/``recv``; ``barrier``.

``EMUCCL_REFUSE_REDUCE_OPS`` (e.g. ``AVG,PREMUL_SUM``) makes every reducing collective raise for those
``ReduceOp`` names, as oneCCL/XCCL does ("Cannot use ReduceOp.PREMUL_SUM with XCCL", "average operation is
not supported for the scheduler path"): the backend of a device whose library lacks them, to test against.
gloo underneath already raises for ``PREMUL_SUM`` on every torch version.
"""

from __future__ import annotations

import datetime
import os
import threading
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d  # AllgatherOptions: not re-exported by torch.distributed

from ezpz_example_emu.device import DEVICE_TYPE, to_cpu_alias

__all__ = ["BACKEND", "REFUSE_VAR", "EmuCollectives", "refused_reduce_ops", "register_backend"]

BACKEND = "emuccl"
REFUSE_VAR = "EMUCCL_REFUSE_REDUCE_OPS"
"""Comma-separated ``ReduceOp`` names emuccl refuses (raises for), as a vendor library without them would."""
_lock = threading.Lock()
_registered = False


def _host(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [_one(t) for t in tensors]


def _one(tensor: torch.Tensor) -> torch.Tensor:
    return to_cpu_alias(tensor) if tensor.device.type == DEVICE_TYPE else tensor


def _done(result: Any) -> Any:
    future: torch.futures.Future[Any] = torch.futures.Future()
    future.set_result(result)
    return torch._C._distributed_c10d._create_work_from_future(future)


def refused_reduce_ops(environ: Mapping[str, str]) -> frozenset[str]:
    """The ``ReduceOp`` names ``EMUCCL_REFUSE_REDUCE_OPS`` lists (upper-cased); a name torch lacks raises ValueError."""
    names = frozenset(n.strip().upper() for n in environ.get(REFUSE_VAR, "").split(",") if n.strip())
    known = {op.name for op in dist.ReduceOp.RedOpType.__members__.values()}
    unknown = sorted(names - known)
    if unknown:
        raise ValueError(f"{REFUSE_VAR}={environ[REFUSE_VAR]!r}: {unknown} are not ReduceOp names; expected a "
                         f"comma-separated list of {sorted(known)}, e.g. {REFUSE_VAR}=AVG,PREMUL_SUM")
    return names


def _options(kind: Any, given: Any) -> Any:
    """A fresh ``kind`` options object with ``given``'s reduction (one per collective of a coalesced call)."""
    opts = kind()
    if given is not None and hasattr(given, "reduceOp"):
        opts.reduceOp = given.reduceOp
    return opts


class EmuCollectives(dist.ProcessGroup):  # type: ignore[misc]
    """The ``emuccl`` backend of one group: gloo underneath, on the CPU aliases of ``emu`` tensors."""

    def __init__(self, store: Any, rank: int, size: int, timeout: datetime.timedelta) -> None:
        super().__init__(rank, size)
        self._gloo: Any = dist.ProcessGroupGloo(dist.PrefixStore(f"{BACKEND}/", store), rank, size, timeout)
        self._name = ""
        self._refused = refused_reduce_ops(os.environ)  # read once, as a vendor library reads its settings

    def _reducing(self, opts: Any) -> None:
        """Raise for a reduction this backend refuses (``EMUCCL_REFUSE_REDUCE_OPS``), before any rank sends."""
        op = getattr(getattr(opts, "reduceOp", None), "op", None)
        if op is not None and op.name in self._refused:
            raise RuntimeError(f"{BACKEND}: Cannot use ReduceOp.{op.name} with {BACKEND} ({REFUSE_VAR}="
                               f"{','.join(sorted(self._refused))}, as oneCCL/XCCL refuses it): reduce with SUM")

    @property
    def gloo(self) -> Any:
        """The gloo group underneath (ezpz quiesces its worker threads at teardown)."""
        return self._gloo

    def getBackendName(self) -> str:
        return BACKEND

    # -- the name torch gives the group (kept here: a Python group has no C++ backend to keep it) -------------

    def _set_group_name(self, name: str) -> None:
        self._name = name

    @property
    def group_name(self) -> str:
        if not self._name:
            raise RuntimeError(f"this {BACKEND} group has no name yet: torch names a group when it registers it")
        return self._name

    # -- all-reduce, broadcast, reduce -------------------------------------------------------------------------

    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        self._reducing(opts)
        self._gloo.allreduce(_host(tensors), opts or dist.AllreduceOptions()).wait()
        return _done(tensors)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        self._reducing(opts)
        for t in tensors:
            self._gloo.allreduce([_one(t)], _options(dist.AllreduceOptions, opts)).wait()
        return _done(tensors)

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        self._gloo.broadcast(_host(tensors), opts or dist.BroadcastOptions()).wait()
        return _done(tensors)

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        self._reducing(opts)
        self._gloo.reduce(_host(tensors), opts or dist.ReduceOptions()).wait()
        return _done(tensors)

    # -- all-gather: a list per rank, or one tensor holding every rank's piece (FSDP2's) -----------------------

    def allgather(self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor],
                  opts: Any = None) -> Any:
        outs = [_host(o) for o in output_tensors]
        self._gloo.allgather(outs, _host(input_tensors), opts or _c10d.AllgatherOptions()).wait()
        return _done(output_tensors)

    def allgather_coalesced(self, output_lists: list[list[torch.Tensor]], input_list: list[torch.Tensor],
                            opts: Any = None) -> Any:
        for outs, t in zip(output_lists, input_list):
            self._gloo.allgather([_host(outs)], [_one(t)], _c10d.AllgatherOptions()).wait()
        return _done(output_lists)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> Any:
        self._gloo._allgather_base(_one(output), _one(input), opts or _c10d.AllgatherOptions()).wait()
        return _done([output])

    _allgather_base = all_gather_single  # the name C++ callers (DTensor's functional collectives) use

    def all_gather_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                    opts: Any = None) -> Any:
        for o, i in zip(outputs, inputs):
            self._gloo._allgather_base(_one(o), _one(i), _c10d.AllgatherOptions()).wait()
        return _done(outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

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

    # -- reduce-scatter: a list per rank, or one tensor holding every rank's piece (FSDP2's gradients) ---------

    def reduce_scatter(self, output_tensors: list[torch.Tensor], input_tensors: list[list[torch.Tensor]],
                       opts: Any = None) -> Any:
        self._reducing(opts)
        ins = [_host(i) for i in input_tensors]
        self._gloo.reduce_scatter(_host(output_tensors), ins, opts or dist.ReduceScatterOptions()).wait()
        return _done(output_tensors)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> Any:
        self._reducing(opts)
        self._gloo._reduce_scatter_base(_one(output), _one(input), opts or dist.ReduceScatterOptions()).wait()
        return _done([output])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                        opts: Any = None) -> Any:
        self._reducing(opts)
        for o, i in zip(outputs, inputs):
            self._gloo._reduce_scatter_base(_one(o), _one(i), _options(dist.ReduceScatterOptions, opts)).wait()
        return _done(outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # -- all-to-all ------------------------------------------------------------------------------------------

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: list[int],
                          input_split_sizes: list[int], opts: Any = None) -> Any:
        self._gloo.alltoall_base(_one(output), _one(input), output_split_sizes, input_split_sizes,
                                 opts or dist.AllToAllOptions()).wait()
        return _done([output])

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors: list[torch.Tensor], input_tensors: list[torch.Tensor],
                 opts: Any = None) -> Any:
        """One tensor per peer each way, as one ``alltoall_base`` over their concatenations (gloo has no list form)."""
        flat_in = torch.cat([_one(t).reshape(-1) for t in input_tensors])
        flat_out = torch.empty(sum(t.numel() for t in output_tensors), dtype=flat_in.dtype)
        self._gloo.alltoall_base(flat_out, flat_in, [t.numel() for t in output_tensors],
                                 [t.numel() for t in input_tensors], dist.AllToAllOptions()).wait()
        for t, piece in zip(output_tensors, flat_out.split([t.numel() for t in output_tensors])):
            _one(t).copy_(piece.view(t.shape))
        return _done(output_tensors)

    # -- point to point, barrier -----------------------------------------------------------------------------

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
