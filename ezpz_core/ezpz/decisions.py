"""Decisions: what was chosen, why, and every alternative that was not; the trace ``rt.explain()`` and ``ezpz doctor`` show."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attr
from attr import field

from ezpz.primitives.converters import as_dict, as_frozenset, as_tuple
from ezpz.primitives.frozen_records import frozen

from ezpz.facts import Alternative, DeviceCandidate, LaunchEnv, TorchBuild

__all__ = [
    "AmpPolicy",
    "BackendChoice",
    "BackendOption",
    "Decision",
    "DeviceChoice",
    "Explanation",
    "LifecycleAction",
    "MeshSupport",
    "PRECISIONS",
    "PrecisionOption",
    "REDUCE_OPS",
    "ProfilingSupport",
    "SetupPlan",
    "StepBoundary",
]

Precision = Literal["bf16", "fp16", "fp32"]
PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp32")
"""Every :data:`Precision` name: what a :class:`PrecisionOption` or :class:`AmpPolicy` dtype may be."""
_TORCH_DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _explained(instance: object, attribute: attr.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be a non-empty explanation")


@frozen(kw_only=True)
class DeviceChoice:
    """The device this rank uses: the winning candidate and its index."""

    candidate: DeviceCandidate
    index: int | None
    reason: str = field(validator=_explained)
    alternatives: tuple[Alternative, ...] = field(default=(), converter=as_tuple)

    @property
    def torch_device(self) -> str:
        t = self.candidate.device_type
        return t if self.index is None else f"{t}:{self.index}"


@frozen(kw_only=True)
class BackendOption:
    """One collective backend a plugin could use for its device, in preference order."""

    name: str
    available: bool
    reason: str = field(validator=_explained)


@frozen(kw_only=True)
class BackendChoice:
    """The collective backend chosen, why, and the options tried before or beside it."""

    name: str
    reason: str = field(validator=_explained)
    alternatives: tuple[Alternative, ...] = field(default=(), converter=as_tuple)


#: How :attr:`AmpPolicy.alternatives` reasons start, so the per-dtype support can be read back (and the trace
#: reads "not fp16: supported, not chosen: ..." for a dtype the device has that the policy did not pick).
SUPPORTED, UNSUPPORTED = "supported, not chosen: ", "unsupported: "


@frozen(kw_only=True)
class PrecisionOption:
    """One low-precision dtype and whether the device supports it."""

    dtype: Precision = field(validator=attr.validators.in_(PRECISIONS))
    supported: bool
    reason: str = field(validator=_explained)
    grad_scaler: bool = False


@frozen(kw_only=True)
class AmpPolicy:
    """Mixed precision for this device: autocast dtype, scaler and TF32, with reasons."""

    dtype: Precision = field(validator=attr.validators.in_(PRECISIONS))
    autocast: bool
    grad_scaler: bool
    tf32: bool
    reason: str = field(validator=_explained)
    tf32_reason: str = "TF32 does not apply to this device"
    alternatives: tuple[Alternative, ...] = field(default=(), converter=as_tuple)

    @property
    def torch_dtype(self) -> Any:
        import torch

        return getattr(torch, _TORCH_DTYPE_NAMES[self.dtype])

    def why_unsupported(self, dtype: str, device: str) -> str | None:
        """None when the plugin said ``device`` supports ``dtype``, else its reason why not.

        Read from :attr:`alternatives`, which :func:`ezpz.policies.choose_precision`
        fills with every option the plugin listed (``supported: ...``/``unsupported: ...``).
        """
        if dtype == self.dtype or dtype == "fp32":
            return None
        for alt in self.alternatives:
            if alt.name == dtype:
                if alt.reason.startswith(SUPPORTED):
                    return None
                return alt.reason.removeprefix(UNSUPPORTED)
        return f"the device plugin did not list {dtype} among {device}'s precisions"


@frozen(kw_only=True)
class ProfilingSupport:
    """How to profile this device.

    ``activities`` are ``torch.profiler.ProfilerActivity`` member names
    (``"CPU"``, ``"CUDA"``, ``"XPU"``). ``range_push``/``range_pop`` are the
    vendor range marker (NVTX, roctx, ITT) or None. ``memory_stats`` returns
    a flat mapping of numbers for a ``torch.device``. ``new_event`` makes a
    device event that can time work on the device's queue
    (``torch.cuda.Event(enable_timing=True)``), named by ``timer`` with
    ``timer_reason``; None (the default) means the wall clock times steps.
    """

    activities: tuple[str, ...] = field(converter=as_tuple)
    reason: str = field(validator=_explained)
    marker: str | None = None
    range_push: Callable[[str], Any] | None = field(default=None, eq=False)
    range_pop: Callable[[], Any] | None = field(default=None, eq=False)
    memory_stats: Callable[[Any], Mapping[str, float]] | None = field(default=None, eq=False)
    new_event: Callable[[], Any] | None = field(default=None, eq=False)
    timer: str = "wall clock"
    timer_reason: str = "time.perf_counter: no device timer from the plugin"


@frozen(kw_only=True)
class StepBoundary:
    """What ends a training step on this device: the call :meth:`ezpz.runtime.Runtime.step` makes.

    Lazy devices (XLA, Gaudi's lazy mode) build a graph until told that a step
    is over; ``mark`` is that call (``torch_xla.sync``, ``mark_step``) and
    ``name`` says what it is for the trace. Eager devices (CUDA, ROCm, XPU,
    MPS, CPU) run every op as it comes: ``mark`` is None, ``name`` ``"none"``.
    """

    name: str
    reason: str = field(validator=_explained)
    mark: Callable[[], Any] | None = field(default=None, eq=False)
    wait: Callable[[], Any] | None = field(default=None, eq=False)
    """What waits for the device's queued work (``Runtime.synchronize()``) where torch has no device module
    for it (``torch.get_device_module('xla')`` raises): ``torch_xla.core.xla_model.wait_device_ops``."""
    compiles: Callable[[], tuple[int, float]] | None = field(default=None, eq=False)
    """How many graphs this process has compiled so far, and their total compile seconds (torch_xla's
    ``CompileTime`` metric): read after each boundary to name a graph that compiles anew every step
    (:mod:`ezpz.steps.recompiles`). None where the device cannot tell."""
    graph_text: Callable[[Sequence[Any]], Sequence[str]] | None = field(default=None, eq=False)
    """The pending graph of these tensors (the step about to run) as lines, one per instruction, with names
    that do not depend on the step (XLA: HLO text): where two steps' graphs differ line by line is the value
    the step bakes in and recompiles for (``constant(0.5)`` then ``constant(0.25)``)."""
    to_host: Callable[[Any], Any] | None = field(default=None, eq=False)
    """``obj`` (nested dicts, lists, tuples) with every device tensor in it brought to the host in one transfer,
    for :meth:`ezpz.runtime.Runtime.save`; None: ``torch.save`` takes the tensors as they are."""

    @classmethod
    def eager(cls, device: str) -> StepBoundary:
        """The answer for a device nobody marks steps on: nothing to flush."""
        return cls(name="none", reason=f"no plugin marks steps on {device}: it runs eagerly, nothing to flush")


#: ``torch.distributed.ReduceOp``'s names, as ``MeshSupport.unsupported_reduce_ops`` holds them.
REDUCE_OPS = frozenset({"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"})


def _reduce_ops(instance: object, attribute: attr.Attribute[frozenset[str]], value: frozenset[str]) -> None:
    unknown = sorted(value - REDUCE_OPS)
    if unknown:
        raise ValueError(f"{type(instance).__name__}.{attribute.name}: {unknown} are not ReduceOp names; "
                         f"expected some of {sorted(REDUCE_OPS)} (upper case, as ReduceOp.AVG.name)")
    if value and not getattr(instance, "reduce_ops_reason", "").strip():
        raise ValueError(f"{type(instance).__name__}.{attribute.name}={sorted(value)} needs reduce_ops_reason: "
                         "say which backend lacks them, since which version, and what it raises")


@frozen(kw_only=True)
class MeshSupport:
    """How this device's collective backend builds a ``DeviceMesh``'s groups, and whether FSDP2 runs on it.

    What :meth:`ezpz.runtime.Runtime.mesh` and :meth:`~ezpz.runtime.Runtime.shard` do on this device, from
    the plugin that offered it (``ezpz_mesh_support``); every field has a default that is torch's own behaviour.
    """

    reason: str = field(validator=_explained)
    split_group: bool | None = None
    """False: the backend cannot ``split_group`` (torch uses it for a device-bound default group), so mesh groups
    are made with ``new_group``; True: it can; None: ask the backend's ``supports_splitting``, as torch does."""
    eager_init: bool | None = None
    """Whether the default group is bound to this rank's device at creation (``init_process_group(device_id=)``:
    eager init, which ``split_group`` needs); None: the core's default (bound for a per-rank device whose
    backend is not gloo)."""
    mesh_unavailable: str = ""
    """Why a ``torch.distributed`` DeviceMesh cannot be built on this device; empty: it can."""
    fsdp2_unavailable: str = ""
    """Why FSDP2 (``fully_shard``) cannot run on this device; empty: it can (where this torch has FSDP2)."""
    alternative: str = ""
    """What to use instead where a mesh or FSDP2 is unavailable (named in the refusal)."""
    unsupported_reduce_ops: frozenset[str] = field(factory=frozenset, converter=as_frozenset,
                                                   validator=_reduce_ops)
    """``torch.distributed.ReduceOp`` names (``"AVG"``, ``"PREMUL_SUM"``) this backend's collectives refuse;
    :meth:`~ezpz.runtime.Runtime.shard` then forces FSDP2's reductions to ``SUM`` and divides after them."""
    reduce_ops_reason: str = ""
    """Why those reduce operations are lacking (the backend, the version, the error it raises); required with them."""
    sources: tuple[str, ...] = field(default=(), converter=as_tuple)
    """Where the facts above are documented (issues, release notes, vendor docs)."""

    @classmethod
    def default(cls, device: str) -> MeshSupport:
        """The answer for a device no plugin described: torch's own mesh construction and FSDP2."""
        return cls(reason=f"no plugin described device meshes for {device}: torch's own way")


@frozen(kw_only=True)
class LifecycleAction:
    """What a lifecycle hook did or wants done, said for the trace.

    ``env_defaults`` are set by the core with ``setdefault`` semantics (a value
    the user set always wins; a launcher's own default, such as torchrun's
    ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1``, does not) just before the process group is created.
    ``then``, when given, is called once those variables are set, before the
    device is made current and the process group is created: for a device
    runtime that reads its variables when it is imported (torch_xla reads
    ``PJRT_DEVICE``), so the plugin imports it there and not in the hook.
    """

    reason: str = field(validator=_explained)
    env_defaults: Mapping[str, str] = field(factory=dict, converter=as_dict, hash=False)
    plugin: str = ""
    then: Callable[[], Any] | None = field(default=None, eq=False, hash=False,
                                           validator=attr.validators.optional(attr.validators.is_callable()))

    def also(self, reason: str, env_defaults: Mapping[str, str]) -> LifecycleAction:
        """This action plus ``reason`` and ``env_defaults`` (a plugin saying two things in one answer)."""
        return LifecycleAction(reason=f"{self.reason}; {reason}", plugin=self.plugin, then=self.then,
                               env_defaults={**self.env_defaults, **env_defaults})


@frozen(kw_only=True)
class SetupPlan:
    """Everything decided before the process group is created."""

    build: TorchBuild
    launch: LaunchEnv
    device: DeviceChoice
    backend: BackendChoice
    amp: AmpPolicy
    profiling: ProfilingSupport
    timeout_s: float
    compile: Any = None  # ezpz.compiling.CompilePolicy; None only in plans built by hand
    threads: Any = None  # ezpz.startup.threads.ThreadsChoice: intra-op CPU threads for this rank
    step: StepBoundary | None = None  # what Runtime.step() calls; None only in plans built by hand (eager)
    mesh: MeshSupport | None = None  # what Runtime.mesh()/shard() do; None only in plans built by hand (torch's way)


@frozen(kw_only=True)
class Decision:
    """One line of the trace that ``explain()`` and ``ezpz doctor`` print."""

    topic: str
    chosen: str
    reason: str
    alternatives: tuple[Alternative, ...] = field(default=(), converter=as_tuple)
    details: Mapping[str, Any] = field(factory=dict, converter=as_dict, hash=False)


@frozen(kw_only=True)
class Explanation:
    """Every decision with its reason and rejected alternatives, plus plugin status."""

    decisions: tuple[Decision, ...] = field(converter=as_tuple)
    plugins: tuple[Mapping[str, Any], ...] = field(default=(), converter=as_tuple)

    def __getitem__(self, topic: str) -> Decision:
        for d in self.decisions:
            if d.topic == topic:
                return d
        raise KeyError(topic)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON, secrets scrubbed (:mod:`ezpz.primitives.redact`)."""
        from ezpz.primitives.redact import scrub_data

        scrubbed: dict[str, Any] = scrub_data({
            "decisions": [attr.asdict(d, value_serializer=_jsonable, retain_collection_types=True)
                          for d in self.decisions],
            "plugins": [dict(p) for p in self.plugins],
        })
        return scrubbed

    def __str__(self) -> str:
        """The trace as text, secrets scrubbed (:mod:`ezpz.primitives.redact`)."""
        from ezpz.primitives.redact import scrub

        return scrub(self._text())

    def _text(self) -> str:
        lines: list[str] = []
        for d in self.decisions:
            lines.append(f"{d.topic}: {d.chosen}")
            lines.append(f"    why: {d.reason}")
            for k, v in d.details.items():
                lines.append(f"    {k}: {v}")
            for alt in d.alternatives:
                who = f" [{alt.plugin}]" if alt.plugin else ""
                lines.append(f"    not {alt.name}{who}: {alt.reason}")
        for p in self.plugins:
            if p.get("status") == "failed":
                lines.append(f"plugin {p['name']}: FAILED at {p.get('stage')}: {p.get('error')}")
        return "\n".join(lines)


def _jsonable(_inst: Any, _field: Any, value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if attr.has(type(value)):
        return attr.asdict(value, value_serializer=_jsonable, retain_collection_types=True)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(None, None, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(None, None, v) for v in value]
    return str(value)
