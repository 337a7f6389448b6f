"""The runtime a training script uses: device, ranks, precision and profiling helpers."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from attr import field

from ezpz.decisions import AmpPolicy, ProfilingSupport, SetupPlan
from ezpz.decisions import Explanation
from ezpz.primitives.frozen_records import frozen
from ezpz.primitives.torch_private import profiler_enabled
from ezpz.runtime.state import RuntimeState
from ezpz.steps.boundary import StepMarker

if TYPE_CHECKING:  # the exchange (with statistics, decimal, fractions) loads only when setup() makes one: world > 1
    from pathlib import Path

    import torch
    from torch.distributed.device_mesh import DeviceMesh

    from ezpz.checkpoints.background import BackgroundSaves
    from ezpz.steps.clock import StepClock
    from ezpz.steps.preemption import Preemption
    from ezpz.steps.straggler_exchange import StragglerWatch

__all__ = ["Runtime", "RuntimeState"]

_M = TypeVar("_M", bound="torch.nn.Module")
_P = ParamSpec("_P")
_R = TypeVar("_R")

_NULL = contextlib.nullcontext()


class _Range:
    """Vendor range marker plus a torch ``record_function`` when the torch profiler is on.

    With straggler detection on (``watch``), the section's wall time goes to it too. With the optimizer
    step hook on (``marker``), a step boundary due inside the range runs when the range closes: torch_xla
    refuses to end a graph inside its own trace scope.
    """

    __slots__ = ("_name", "_push", "_pop", "_record", "_watch", "_t0", "_marker")

    def __init__(self, name: str, push: Any, pop: Any, watch: StragglerWatch | None = None,
                 marker: StepMarker | None = None) -> None:
        self._name, self._push, self._pop, self._watch = name, push, pop, watch
        self._record: Any = None  # a torch.autograd.profiler.record_function while open
        self._marker = marker

    def __enter__(self) -> _Range:
        import torch

        if self._watch is not None:
            self._t0 = time.perf_counter()

        if self._push is not None:
            self._push(self._name)
        if self._marker is not None:
            self._marker.enter_range()
        if profiler_enabled():
            self._record = torch.autograd.profiler.record_function(self._name)
            self._record.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._record is not None:
            self._record.__exit__(*exc)
            self._record = None
        if self._pop is not None:
            self._pop()
        if self._marker is not None:
            self._marker.exit_range()
        if self._watch is not None:
            self._watch.section(self._name, time.perf_counter() - self._t0)


@frozen(kw_only=True)
class Runtime:
    """What ``ezpz.hooks.setup()`` returns: what ``setup()`` decided, frozen; one per process.

    What changes as the script runs (the step clock, the preemption state, the
    step boundary, the meshes built) is in :attr:`state`, a
    :class:`~ezpz.runtime.state.RuntimeState` of its own.

    Rank fields come from the launcher; ``device`` is a ``torch.device`` with
    its index for per-rank accelerators; ``amp`` and ``profiling`` are the
    plugin decisions behind :meth:`autocast`, :meth:`grad_scaler`,
    :meth:`range`, :meth:`profiler` and :meth:`memory_stats`. :meth:`step`
    ends a training step (the device's step boundary, then the step's time).
    """

    device: torch.device
    device_type: str
    vendor: str
    backend: str
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    num_nodes: int
    amp: AmpPolicy
    profiling: ProfilingSupport
    plan: SetupPlan = field(repr=False)
    explanation: Explanation = field(repr=False)
    process_group: bool = False
    attempt: int = 0
    """Which attempt of the job this is (0 = first): ``EZPZ_ATTEMPT`` + ``TORCHELASTIC_RESTART_COUNT``."""
    owns_process_group: bool = True  # False when setup() adopted a group another framework made (explain())
    _autocast_kwargs: Mapping[str, Any] | None = field(init=False, repr=False, eq=False)
    state: RuntimeState = field(repr=False, eq=False)
    """What changes as the script runs: the step clock, the preemption state, the step boundary, the meshes."""

    @state.default
    def _make_state(self) -> RuntimeState:
        return RuntimeState(boundary=StepMarker(self.plan.step))

    @property
    def step_clock(self) -> StepClock:
        """The steps :meth:`step` has ended and the wall time of the recent ones (``state.step_clock``)."""
        return self.state.step_clock

    @property
    def preemption(self) -> Preemption:
        """After a SIGTERM: the step every rank stops after, :attr:`preempted` (``state.preemption``)."""
        return self.state.preemption

    @property
    def boundary(self) -> StepMarker:
        """The device's step boundary (``state.boundary``; :mod:`ezpz.steps.boundary`)."""
        return self.state.boundary

    @property
    def stragglers(self) -> StragglerWatch | None:
        """Straggler detection (``EZPZ_STRAGGLER_EVERY``), or None when off or single-process (``state.stragglers``)."""
        return self.state.stragglers

    @_autocast_kwargs.default
    def _make_autocast_kwargs(self) -> Mapping[str, Any] | None:
        if not self.amp.autocast:
            return None
        return MappingProxyType({"device_type": self.device_type, "dtype": self.amp.torch_dtype})


    @classmethod
    def from_plan(
        cls, plan: SetupPlan, explanation: Explanation, *, process_group: bool = False, device: Any = None,
        owns_process_group: bool = True, backend: str | None = None, attempt: int = 0,
        stragglers: StragglerWatch | None = None, optimizer_hook: bool = False,
    ) -> Runtime:
        """The runtime for ``plan``, every field read from it: the one place a ``Runtime`` is built.

        :param explanation: The decision trace ``explain()`` returns.
        :param process_group: Whether ``setup()`` created the process group.
        :param device: The ``torch.device`` to hand out; default ``torch.device(plan.device.torch_device)``.
        :param owns_process_group: False when ``setup()`` adopted a group another framework made.
        :param backend: The adopted group's backend; default the plan's.
        :param attempt: Which attempt of the job this is (``SetupSettings.attempt``).
        :param stragglers: The straggler exchange :meth:`step` runs every N steps (:mod:`ezpz.steps.straggler_exchange`).
        :param optimizer_hook: Whether a lazy device's boundary also runs after ``optimizer.step()``
            (``EZPZ_STEP_HOOK``; ``setup()`` installs the hook, ``teardown()`` removes it).
        """
        if device is None:
            import torch

            device = torch.device(plan.device.torch_device)
        launch, candidate = plan.launch, plan.device.candidate
        return cls(
            device=device, device_type=candidate.device_type, vendor=candidate.vendor,
            backend=backend if backend is not None else plan.backend.name,
            rank=launch.rank, local_rank=launch.local_rank, world_size=launch.world_size,
            local_world_size=launch.local_world_size, node_rank=launch.node_rank, num_nodes=launch.num_nodes,
            amp=plan.amp, profiling=plan.profiling, plan=plan, explanation=explanation, process_group=process_group,
            owns_process_group=owns_process_group, attempt=attempt,
            state=RuntimeState(boundary=StepMarker(plan.step, optimizer_hook=optimizer_hook), stragglers=stragglers),
        )

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def step(self) -> int:
        """End one training step: call it once per step, after ``optimizer.step()``.

        Runs the device's step boundary, which its plugin names
        (``explain()["step"]``): on a lazy device (XLA) the step's graph runs
        here, unless the optimizer hook already ran it for this step (then
        once, never twice); on eager devices there is nothing to flush. Then the step's wall
        time goes to :attr:`step_clock`; every ``EZPZ_STRAGGLER_EVERY`` steps
        the ranks compare their times (:mod:`ezpz.steps.straggler_exchange`: one small
        gather to rank 0 and a broadcast back, so every rank must call this every step). After a SIGTERM,
        the ranks agree here on the step they all stop after (:attr:`preempted`). A background checkpoint
        save whose write ended with a failure raises it here (a :class:`~ezpz.errors.CheckpointError`).
        Returns how many
        steps have ended.
        """
        boundary = self.boundary
        if boundary.mark is not None:
            boundary.at_step()
        count = self.step_clock.tick()
        watch = self.stragglers
        if watch is not None and watch.due(count):
            watch.report(count, self.step_clock.recent())
        if self.preemption.requested:
            self.preemption.at_boundary(count)
        pending = self.state.background
        if pending is not None:
            pending.check(count)  # a background save's failure, once its write has ended
        return count

    @property
    def preempted(self) -> bool:
        """True once a SIGTERM arrived and this is the step every rank stops after: save a checkpoint, leave the loop.

        ``teardown()`` then exits with status 143 (128 + SIGTERM). A script that
        goes on instead is ended at its next :meth:`step`, on every rank alike.
        """
        return self.preemption.reached

    def save(self, obj: Any, f: Any, **kwargs: Any) -> None:
        """``torch.save(obj, f)`` that works on every device: what a script saves (state dicts on :attr:`device`).

        On a lazy device the plugin brings every tensor in ``obj`` to the host in one transfer first
        (``explain()["step"]``; on XLA one graph run for all of them instead of one per tensor), so the file
        holds CPU tensors; on eager devices it is ``torch.save`` itself. Keyword arguments go to ``torch.save``.
        A state dict holding sharded tensors (an FSDP2 model's) is refused, naming :meth:`save_checkpoint`:
        ``torch.save`` would write this rank's shard alone.
        """
        from ezpz.checkpoints.refusal import refuse_sharded

        refuse_sharded(obj)
        to_host = self.plan.step.to_host if self.plan.step is not None else None
        if to_host is not None:
            obj = to_host(obj)
        import torch

        torch.save(obj, f, **kwargs)

    def save_checkpoint(self, directory: str | os.PathLike[str], *, background: bool = False, **state: Any) -> Path:
        """Save ``state`` as a sharded checkpoint at ``directory``; every rank calls it, with the same names.

        ``state`` holds modules (plain, DDP, FSDP2), optimizers (with the module they optimize),
        objects with ``state_dict``/``load_state_dict`` (schedulers, grad scalers) and plain values
        (``step=10``). Written through ``torch.distributed.checkpoint`` (each rank its shard) into a
        hidden sibling, whose completion marker is written last before it is renamed to ``directory``:
        a directory with that name is complete. Name directories with
        :func:`ezpz.checkpoints.checkpoint_name` (``step-000010``) so :meth:`latest_checkpoint` finds
        them. ``directory`` must be on a file system every rank sees. Collectives run under the process
        group's timeout (``EZPZ_TIMEOUT``). Returns the checkpoint's path. ``directory`` must be free, an empty
        directory or an ezpz checkpoint (replaced atomically); anything else is refused with a
        :class:`~ezpz.errors.CheckpointError` before anything is written. See ``docs/checkpoints.md``.

        ``background=True`` returns once the tensors are copied to host memory and writes in a thread
        (:mod:`ezpz.checkpoints.background`); the directory appears complete only after every rank's files
        are on disk. The next save, a load, ``teardown()`` and the interpreter's exit wait for it; its
        failure is raised on every rank at the next :meth:`step` after it ended, or at those. A save waits
        for a background one in flight before it starts.
        """
        from ezpz.checkpoints.sharded import save_checkpoint

        if not isinstance(background, bool):
            from ezpz.errors import CheckpointError

            raise CheckpointError(name="rt.save_checkpoint(background)", value=background, expected="True or False",
                                  fix="pass background=True to write in a thread, or leave it out")
        pending = self.background_saves() if background else self.state.background
        if pending is not None and not background:
            pending.wait()  # a synchronous save after a background one: that one completes (or fails) first
        return save_checkpoint(directory, state, pending if background else None)

    def background_saves(self) -> BackgroundSaves:
        """This rank's background checkpoint writer (``state.background``), made at the first background save."""
        from ezpz.checkpoints.background import BackgroundSaves

        pending = self.state.background
        if pending is None:
            clock = self.step_clock
            pending = self.state.background = BackgroundSaves(self.plan.timeout_s, lambda: clock.count)
        return pending

    def load_checkpoint(self, directory: str | os.PathLike[str], **state: Any) -> dict[str, Any]:
        """Restore the modules, optimizers and stateful objects in ``state`` in place; return the plain values.

        Pass each under the name it was saved with; the world size may differ from the one that saved
        (shards are re-cut for this one). Every failure (a missing, incomplete or damaged ``directory``, a
        shape mismatch, a file that is not plain values) is a :class:`~ezpz.errors.CheckpointError` on every
        rank, its cause in the first line; nothing in the files is executed.
        """
        from ezpz.checkpoints.sharded import load_checkpoint

        if self.state.background is not None:
            self.state.background.wait()  # a background save in flight completes first: it may be this directory
        return load_checkpoint(directory, state)

    @staticmethod
    def latest_checkpoint(parent: str | os.PathLike[str]) -> Path | None:
        """The complete checkpoint under ``parent`` with the highest step (``step-000020``), or None.

        The same as :func:`ezpz.checkpoints.latest_checkpoint`, which needs no torch.
        """
        from ezpz.checkpoints.layout import latest_checkpoint

        return latest_checkpoint(parent)

    def mesh(self, **dims: int) -> DeviceMesh:
        """A ``torch.distributed`` DeviceMesh on this device: ``rt.mesh()`` one dimension over every rank,
        ``rt.mesh(dp=2, tp=2)`` named dimensions whose sizes multiply to the world size (else a
        :class:`~ezpz.errors.ConfigError` naming them, their product and the world size).

        Built once per ``dims`` and kept. Its groups are made as the device's plugin says its backend
        needs (``explain()["sharding"]``: ``new_group`` where the backend cannot ``split_group``).
        Needs the process group (several ranks).
        """
        from ezpz.sharding.mesh import build_mesh, mesh_shape, refuse_where_unsupported

        shape, names = mesh_shape(dims, self.world_size)  # checked first: a bad size is named, never a cache miss
        key = tuple(dims.items())
        meshes = self.state.meshes
        found = meshes.get(key)
        if found is not None:
            return found
        support = self.plan.mesh
        refuse_where_unsupported(support, who="rt.mesh()", what="a DeviceMesh", device=str(self.device))
        found = build_mesh(self.device_type, shape, names, split_group=support.split_group if support else None)
        meshes[key] = found
        return found

    def shard(self, model: _M, mesh: DeviceMesh | None = None, **fsdp_options: Any) -> _M:
        """FSDP2: ``fully_shard`` on each child module with parameters (inside ``ModuleList``/``ModuleDict``
        too), then on ``model``; returns ``model``, sharded over ``mesh`` (default :meth:`mesh`, 1-D).

        Parameters are gathered in the precision policy's autocast dtype (bf16 or fp16) and gradients
        reduced in fp32 (``MixedPrecisionPolicy``; its reason in ``explain()["sharding"]``); fp32 policies
        leave both as stored. With fp16 use :meth:`grad_scaler`: its unscale agrees on overflow over the
        mesh. Where the backend lacks ``AVG`` or ``PREMUL_SUM`` (XCCL, oneCCL; gloo's ``PREMUL_SUM``), gradients
        are reduced with ``SUM`` and divided once after, as DDP's. Keyword arguments go to every ``fully_shard``
        call and win (``mp_policy=``, ``reshard_after_forward=``, ...). One process: ``model`` on
        :attr:`device`, unsharded. Where FSDP2 cannot run (XLA, a torch without it for this device) raises
        :class:`~ezpz.errors.UnavailableError` naming the alternative. Create the optimizer afterwards.
        """
        from ezpz.runtime.arguments import check_shard_arguments
        from ezpz.sharding.fsdp import fsdp2_for, shard_model
        from ezpz.sharding.precision import shard_precision

        check_shard_arguments(model, mesh)
        module = fsdp2_for(self.device_type, self.device_type, self.plan.mesh)
        import torch.distributed as dist

        if not (self.distributed and dist.is_initialized()):
            if any(p.is_meta for p in model.parameters()):
                return model
            return model.to(self.device)
        return shard_model(model, mesh if mesh is not None else self.mesh(), module,
                           shard_precision(self.amp, self.device_type), self.plan.mesh, **fsdp_options)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """``torch.autocast`` with the policy's dtype, or a no-op when the policy is fp32."""
        kwargs = self._autocast_kwargs
        if kwargs is None:
            return _NULL
        import torch

        return torch.autocast(**kwargs)

    def grad_scaler(self, **kwargs: Any) -> torch.amp.GradScaler:
        """A ``torch.amp.GradScaler``, enabled only where the policy needs one (fp16)."""
        import torch

        kwargs.setdefault("enabled", self.amp.grad_scaler)
        return torch.amp.GradScaler(self.device_type, **kwargs)

    def range(self, name: str) -> contextlib.AbstractContextManager[Any]:
        """A named range: vendor marker (NVTX/roctx/ITT) and, under the torch profiler, a record."""
        push, pop, watch = self.profiling.range_push, self.profiling.range_pop, self.stragglers
        if push is None and watch is None and not profiler_enabled():
            return _NULL
        marker = self.boundary if self.boundary.installed else None
        return _Range(name, push, pop, watch, marker)

    def profiler(self, **kwargs: Any) -> torch.profiler.profile:
        """``torch.profiler.profile`` with this device's activities (overridable via ``activities=``)."""
        import torch

        if "activities" not in kwargs:
            kwargs["activities"] = [
                getattr(torch.profiler.ProfilerActivity, a)
                for a in self.profiling.activities
                if hasattr(torch.profiler.ProfilerActivity, a)
            ]
        return torch.profiler.profile(**kwargs)

    def memory_stats(self) -> Mapping[str, float]:
        """Device memory statistics from the vendor plugin, plus this process's peak RSS."""
        stats: dict[str, float] = {}
        if self.profiling.memory_stats is not None:
            stats.update(self.profiling.memory_stats(self.device))
        import resource  # only when asked: not on the setup path

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        stats["host_peak_rss_bytes"] = float(peak if sys.platform == "darwin" else peak * 1024)
        return stats

    def synchronize(self) -> None:
        """Wait for this device's queued work: the plugin's ``wait`` (``explain()["step"]``), else
        ``torch.get_device_module(device).synchronize()``; a no-op on CPU."""
        wait = self.plan.step.wait if self.plan.step is not None else None
        if wait is not None:
            wait()
            return
        from ezpz.primitives.device_module import device_module

        sync = getattr(device_module(self.device_type), "synchronize", None)
        if sync is not None:
            sync()

    def barrier(self) -> None:
        """Block until every rank arrives (no-op for a single process)."""
        if self.process_group:
            import torch.distributed as dist

            dist.barrier()

    def compile(self, model: Callable[_P, _R], **overrides: Any) -> Callable[_P, _R]:
        """``torch.compile`` with this device's policy (``explain()["compile"]``); ``model`` itself when it is none.

        Keyword arguments go to ``torch.compile`` and win over the policy
        (``backend=``, ``mode=``, ``fullgraph=``, ``dynamic=`` ...).
        """
        from ezpz.compiling import compile_model, no_compile_answer

        policy = self.plan.compile or no_compile_answer(self.device_type)
        return compile_model(model, policy, **overrides)

    def deepspeed_config(self, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A DeepSpeed config whose ``bf16``/``fp16`` sections follow this device's AMP policy.

        Everything ``base`` sets is kept; a precision section that asks for a
        dtype this device cannot do raises, naming the key. See ``docs/deepspeed.md``.
        """
        from ezpz.runtime.deepspeed import deepspeed_config

        return deepspeed_config(self.plan, base)

    def explain(self) -> Explanation:
        """Every candidate considered, chosen or rejected, with its reason. ``str()`` it to read it."""
        return self.explanation
