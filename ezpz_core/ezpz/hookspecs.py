"""Hook specifications: the questions the core asks and plugins answer.

Implement a hook by decorating a function named exactly like the spec with
:data:`ezpz.hookimpl` in your plugin module, accepting any subset of the
spec's parameters. The core calls each plugin's implementation on its own, so
a plugin that raises or returns the wrong type is quarantined without taking
the others down. Raise :class:`ezpz.errors.ConfigError` (or a subclass) to
reject a user's request; that propagates to the user instead of quarantining.

Hooks marked *first result* stop at the first plugin that returns non-None;
plugins whose device is not the one in question return None. Built-in
plugins are ``trylast`` so that any installed plugin can answer first.

The specs below are in the order ``setup()`` calls them (docs/architecture.md,
"What setup() does"). :data:`RETURNS` states what each returns, once: the typed
calls (:mod:`ezpz.plugin_host.calls`) and the conformance check
(:mod:`ezpz.testing`) read it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ezpz.primitives.markers import hookspec

if TYPE_CHECKING:
    from ezpz.compiling import CompilePolicy
    from ezpz.cuda_answers import CudaAnswers
    from ezpz.decisions import (AmpPolicy, BackendChoice, LifecycleAction, MeshSupport, ProfilingSupport, SetupPlan,
                                StepBoundary)
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild
    from ezpz.failures.signatures import FailureSignature
    from ezpz.runtime import Runtime

__all__ = [
    "RETURNS",
    "ezpz_detect_launch_env",
    "ezpz_probe_devices",
    "ezpz_select_backend",
    "ezpz_amp_policy",
    "ezpz_profiling",
    "ezpz_compile_policy",
    "ezpz_step_boundary",
    "ezpz_mesh_support",
    "ezpz_before_init",
    "ezpz_after_setup",
    "ezpz_failure_signatures",
    "ezpz_cuda_answers",
]

#: Every hook, in the order ``setup()`` calls it -> the record it returns besides None, as
#: ``"module:Name"`` so that reading this module imports no record (None: the return value is ignored).
RETURNS: Mapping[str, str | None] = {
    "ezpz_detect_launch_env": "ezpz.facts:LaunchEnv",
    "ezpz_probe_devices": "ezpz.facts:ProbeReport",
    "ezpz_select_backend": "ezpz.decisions:BackendChoice",
    "ezpz_amp_policy": "ezpz.decisions:AmpPolicy",
    "ezpz_profiling": "ezpz.decisions:ProfilingSupport",
    "ezpz_compile_policy": "ezpz.compiling:CompilePolicy",
    "ezpz_step_boundary": "ezpz.decisions:StepBoundary",
    "ezpz_mesh_support": "ezpz.decisions:MeshSupport",
    "ezpz_before_init": "ezpz.decisions:LifecycleAction",
    "ezpz_after_setup": None,
    "ezpz_failure_signatures": "builtins:list",  # of ezpz.failures.signatures.FailureSignature
    "ezpz_cuda_answers": "ezpz.cuda_answers:CudaAnswers",  # asked by python -m ezpz.cuda_compat, not by setup()
}


def return_type(hook: str) -> type | None:
    """The record class ``hook`` returns besides None (imported now), or None when its return value is ignored."""
    if hook not in _RETURN_TYPES:
        path = RETURNS[hook]
        module, _, name = (path or "").partition(":")
        _RETURN_TYPES[hook] = getattr(importlib.import_module(module), name) if path else None
    return _RETURN_TYPES[hook]


_RETURN_TYPES: dict[str, type | None] = {}


@hookspec(firstresult=True)
def ezpz_detect_launch_env(environ: Mapping[str, str]) -> LaunchEnv | None:
    """Describe this process's place in the job from the launcher's variables.

    First result. Raise :class:`ezpz.errors.LaunchEnvError` naming the
    variable when the launcher's values are inconsistent. The built-in plugin
    knows torchrun, Open MPI, MPICH/Hydra, Cray PALS, PMIx, Slurm and single
    process; a site plugin can answer first for its own launcher.

    :param environ: A read-only snapshot of the process environment; writing raises
        :class:`ezpz.startup.environ.EnvironWriteError` and quarantines the plugin.
    :return: A :class:`~ezpz.facts.LaunchEnv`, or None. Leave ``master_addr``/
        ``master_port`` as None to have the core derive them
        (:func:`ezpz.launch_env.resolve_rendezvous`).

    .. versionadded:: 1.0
    """


@hookspec
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport | None:
    """Report the devices this plugin can offer, and those it looked for and rejected.

    Collecting: every plugin is asked. Probe without creating a device context
    where the platform allows, so forked data-loader workers stay safe.

    :param build: The installed torch's build facts.
    :param environ: A read-only snapshot of the process environment; writing raises
        :class:`ezpz.startup.environ.EnvironWriteError` and quarantines the plugin.
    :return: A :class:`~ezpz.facts.ProbeReport` whose candidates carry a
        priority and reason and whose rejections say why ("torch built without
        XPU"), or None when the plugin has nothing to say.

    .. versionadded:: 1.0
    """


@hookspec(firstresult=True)
def ezpz_select_backend(
    device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None
) -> BackendChoice | None:
    """Choose the collective backend for ``device``.

    First result. Answer only for a device your plugin offered (check
    ``isinstance(device.facts, YourFacts)``); build the ordered options and
    call :func:`ezpz.policies.choose_backend` so that overrides behave alike.

    :param device: The chosen device candidate.
    :param build: The installed torch's build facts.
    :param launch: The launch environment (world size, nodes).
    :param requested: ``EZPZ_BACKEND``/``TORCH_BACKEND``/``setup(backend=)``, or None.
    :return: A :class:`~ezpz.decisions.BackendChoice` with reason and the
        alternatives tried, or None.

    .. versionadded:: 1.0
    """


@hookspec(firstresult=True)
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    """Decide mixed precision for ``device``: dtype, autocast, grad scaler, TF32.

    First result. Use :func:`ezpz.policies.choose_precision`; a requested
    precision the device cannot do must raise, naming the device.

    :param device: The chosen device candidate.
    :param build: The installed torch's build facts.
    :param requested: ``"auto"``, ``"bf16"``, ``"fp16"`` or ``"fp32"``.
    :return: An :class:`~ezpz.decisions.AmpPolicy`, or None.

    .. versionadded:: 1.0
    """


@hookspec(firstresult=True)
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    """Say how to profile ``device``: profiler activities, range marker, memory stats.

    First result.

    :param device: The chosen device candidate.
    :param build: The installed torch's build facts.
    :return: A :class:`~ezpz.decisions.ProfilingSupport`, or None.

    .. versionadded:: 1.0
    """


@hookspec(firstresult=True)
def ezpz_compile_policy(device: DeviceCandidate, build: TorchBuild) -> CompilePolicy | None:
    """Say how ``torch.compile`` should run on ``device``: backend, mode, options, and why.

    First result. Answer only for a device your plugin offered. List the
    backends in your order of preference as :class:`~ezpz.compiling.CompileOption`
    records (``inductor``, ``aot_eager``; each available or not, with the
    reason) and call :func:`ezpz.compiling.choose_compile`, so the rejected
    ones are kept for ``ezpz doctor``. Decide from recorded facts (compute
    capability, torch version, a compiler found); import vendor modules only
    inside the hook. The core applies ``EZPZ_COMPILE``/``setup(compile=)``
    afterwards and raises, naming the device, when a requested backend is
    unavailable. Without any answer the core does not compile.

    :param device: The chosen device candidate.
    :param build: The installed torch's build facts.
    :return: A :class:`~ezpz.compiling.CompilePolicy`, or None.

    .. versionadded:: 1.0
    """


@hookspec(firstresult=True)
def ezpz_step_boundary(device: DeviceCandidate, build: TorchBuild) -> StepBoundary | None:
    """Say what ends a training step on ``device``: the call :meth:`ezpz.runtime.Runtime.step` makes.

    First result. Answer only for a device your plugin offered, and only when
    the device is lazy: XLA builds a graph until ``torch_xla.sync()``, Gaudi's
    lazy mode until ``mark_step()``. Eager devices need no answer; without one
    ``Runtime.step()`` only counts and times the step. Import the vendor
    module inside the hook and hand back its function as ``mark``; it runs on
    every step, so it must be the call itself, not a wrapper that probes.

    :param device: The chosen device candidate.
    :param build: The installed torch's build facts.
    :return: A :class:`~ezpz.decisions.StepBoundary` (``name``, ``reason``,
        ``mark``; optionally ``wait``, and ``compiles``, ``graph_text`` and
        ``to_host`` for naming a graph that recompiles every step and for
        ``rt.save()``), or None. The core also runs ``mark`` after every
        ``optimizer.step()`` unless ``EZPZ_STEP_HOOK=0`` (once per step).

    .. versionadded:: 1.0
    """


@hookspec(firstresult=True)
def ezpz_mesh_support(device: DeviceCandidate, build: TorchBuild, backend: str) -> MeshSupport | None:
    """Say how ``backend`` builds a ``DeviceMesh``'s groups on ``device``, and whether FSDP2 runs there.

    First result. Answer only for a device your plugin offered. :meth:`ezpz.runtime.Runtime.mesh` and
    :meth:`~ezpz.runtime.Runtime.shard` act on the answer; without one they do what torch does. Say,
    from recorded facts with their ``sources``:

    - ``split_group=False`` when the backend cannot split a group (torch's ``DeviceMesh`` calls
      ``split_group`` for a device-bound default group; the mesh's groups are then made with ``new_group``);
    - ``eager_init`` when the backend wants (True) or must not have (False) the default group bound to the
      rank's device at creation (``init_process_group(device_id=...)``);
    - ``mesh_unavailable``/``fsdp2_unavailable`` with the ``alternative`` where the device cannot run a
      ``torch.distributed`` mesh or FSDP2 at all (XLA: torch_xla's SPMD); ``rt.shard`` refuses by name.

    A PrivateUse1 backend (a ``ProcessGroup`` of the plugin's own) must provide what mesh and FSDP2 use:
    a group name torch can resolve (``ProcessGroup name not set`` otherwise), ``new_group`` (or
    ``split_group``), and the collectives ``all_gather_into_tensor``, ``reduce_scatter_tensor``,
    ``all_reduce`` and ``broadcast`` on device tensors.

    :param device: The chosen device candidate.
    :param build: The installed torch's build facts.
    :param backend: The name of the collective backend chosen for it (``plan.backend.name``).
    :return: A :class:`~ezpz.decisions.MeshSupport`, or None.

    .. versionadded:: 1.1
    """


@hookspec
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """Prepare for process-group creation (vendor imports, environment defaults).

    Collecting. Called once per ``setup()`` after every decision is made and
    before ``torch.distributed.init_process_group``. Do the work only where
    ``plan`` needs it (for example import the oneCCL bindings only when the
    chosen backend is ``ccl``) and say what you did.

    :param plan: Every decision taken for this process.
    :return: A :class:`~ezpz.decisions.LifecycleAction` saying what was done
        and any ``env_defaults`` to set (user-set values win; a value a launcher
        exported on its own, such as torchrun's ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1``,
        is not the user's: see :mod:`ezpz.launch_env.worker_env`), or None.

    .. versionadded:: 1.0
    """


@hookspec
def ezpz_after_setup(runtime: Runtime) -> None:
    """Observe the finished runtime (site logging, extra checks).

    Collecting. Return value ignored.

    :param runtime: The :class:`~ezpz.runtime.Runtime` ``setup()`` returns.

    .. versionadded:: 1.0
    """


@hookspec
def ezpz_failure_signatures() -> list[FailureSignature] | None:
    """Texts that mean a known kind of failure in this plugin's stack (collective library, driver, scheduler).

    Collecting: every plugin's list is used, so a third-party accelerator plugin
    adds its own next to the vendor plugins'. Called once per ``setup()``. The
    core classifies a failed rank from its own knowledge first (exception types,
    the store's roll call) and matches these patterns against the exception's
    text only when that did not decide; ``ezpz launch`` also matches them
    against the log lines of ranks killed before they could write a record.
    Each :class:`~ezpz.failures.signatures.FailureSignature` has a regular
    expression, the kind it means (``lost_peer``, ``timeout``, ``oom``,
    ``signal``, ``code_error``), a reason, whether it blames the host it
    appeared on, and the source where the text is documented.

    :return: A list of :class:`~ezpz.failures.signatures.FailureSignature`, or None.

    .. versionadded:: 1.0
    """


@hookspec(firstresult=True)
def ezpz_cuda_answers(device: DeviceCandidate, build: TorchBuild, backend: str) -> CudaAnswers | None:
    """Say what ``device`` answers when a script written for CUDA asks (``python -m ezpz.cuda_compat``).

    First result. Not called by ``setup()``: the CUDA-compat front asks it once, after ``setup()``, when it
    runs a CUDA-only script on the device ezpz chose. Answer only for a device your plugin offered, and only
    where your device differs from what its torch module (``torch.get_device_module``) says: no compute
    capability, no streams, events or pinned memory, no CUDA graphs, a collective backend without
    ``ReduceOp.AVG``. Where ``torch.cuda`` itself drives your device, return ``redirect=False``: nothing
    is redirected and the run is the plain one. Decide from recorded facts; import nothing heavy.

    :param device: The chosen device candidate.
    :param build: The installed torch's build facts.
    :param backend: The name of the collective backend the process group runs (``runtime.backend``: the one
        ``setup()`` chose, ``plan.backend.name``, unless it adopted a group made with another).
    :return: A :class:`~ezpz.cuda_answers.CudaAnswers` with its reason, or None (then the device's torch
        module answers).

    .. versionadded:: 1.1
    """
