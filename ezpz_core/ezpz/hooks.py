"""The user's entry point: :func:`setup`, :func:`teardown` and the plugin host.

Plugins are discovered when this module is first imported (by ``import ezpz``);
probing happens only in :func:`setup`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from typing import TYPE_CHECKING

from ezpz.primitives import logger as _log
from ezpz.errors import CheckpointError, ConfigError, SetupError, UnavailableError
from ezpz.plugin_host.host import PluginHost, load_plugins
from ezpz.inputs.settings import PluginSettings, SetupSettings

if TYPE_CHECKING:  # imported where used: `import ezpz` only discovers plugins
    from ezpz.decisions import SetupPlan
    from ezpz.decisions import Explanation
    from ezpz.facts import TorchBuild
    from ezpz.runtime import Runtime

__all__ = ["get_plugin_host", "get_runtime", "plan", "reload_plugins", "setup", "teardown", "using_plugin_host"]

def _load_host(environ: Mapping[str, str] | None = None) -> tuple[PluginHost, ConfigError | None]:
    """Discover plugins; a bad plugin-control variable loads only the built-ins and is raised by setup()/plan().

    Deferring the error keeps ``import ezpz`` (and so ``ezpz doctor``) working
    when, say, ``EZPZ_STRICT_PLUGINS=maybe``, while never running with settings
    the user did not mean.
    """
    try:
        return load_plugins(environ), None
    except ConfigError as err:
        host = PluginHost(PluginSettings(allow=frozenset()))
        host.discover()
        return host, err


_host, _host_error = _load_host()
_runtime: Runtime | None = None
_runtime_settings: SetupSettings | None = None
_applied_env: dict[str, str] = {}
_env_before: dict[str, str | None] = {}  # what setup() replaced (a launcher's own default), restored by teardown()
_undos: list[tuple[str, Callable[[], None]]] = []  # (plugin, LifecycleAction.undo) in setup() order; teardown() runs them


def get_plugin_host() -> PluginHost:
    """The process-wide plugin host (pluggy manager plus plugin records)."""
    return _host


def reload_plugins(environ: Mapping[str, str] | None = None) -> PluginHost:
    """Rediscover plugins (after changing ``EZPZ_PLUGINS`` etc.). Not allowed after setup()."""
    global _host, _host_error
    if _runtime is not None:
        raise SetupError("reload_plugins() after setup(): call ezpz.hooks.teardown() first")
    _host, _host_error = _load_host(environ)
    if _host_error is not None:
        raise _host_error
    return _host


@contextlib.contextmanager
def using_plugin_host(host: PluginHost) -> Iterator[PluginHost]:
    """Inside the block, :func:`setup` and :func:`plan` use ``host`` instead of the discovered plugins.

    For the conformance kit's live mode (:mod:`ezpz.testing.live`): a plugin under
    test goes through the real ``setup()`` without being installed. Enter and
    leave it with no live runtime (call :func:`teardown` inside the block).
    """
    global _host, _host_error
    if _runtime is not None:
        raise SetupError("using_plugin_host() after setup(): call ezpz.hooks.teardown() first")
    saved = _host, _host_error
    _host, _host_error = host, None
    try:
        yield host
    finally:
        _host, _host_error = saved


def get_runtime() -> Runtime | None:
    """The runtime from the last :func:`setup`, or None."""
    return _runtime


def _plugin_rows(host: PluginHost) -> tuple[dict[str, Any], ...]:
    return tuple(r._asdict() for r in host.records.values())


def plan(
    *, device: str | None = None, backend: str | None = None, precision: str | None = None,
    timeout: float | None = None, environ: Mapping[str, str] | None = None, build: TorchBuild | None = None,
    compile: str | None = None,
) -> tuple[SetupPlan, Explanation]:
    """Decide everything ``setup()`` would, with no side effects. ``ezpz doctor`` prints this.

    ``environ`` and ``build`` replace the process environment and the torch
    build probe, so tests can feed recorded facts through the real decision path.
    """
    from ezpz.plugin_host.calls import Hooks
    from ezpz.startup.planning import explain_plan, plan_setup
    from ezpz.probes.torch_build import probe_torch_build

    if _host_error is not None:
        raise _host_error
    env = os.environ if environ is None else environ
    settings = SetupSettings.resolve(env, device=device, backend=backend, precision=precision, timeout=timeout,
                                     compile=compile)
    hooks, the_build = Hooks(_host), build or probe_torch_build()
    the_plan = hooks.watched(lambda: plan_setup(hooks, settings, env, the_build))  # one hand-off for all hooks
    return the_plan, explain_plan(the_plan, settings, _plugin_rows(_host))


def setup(
    *, device: str | None = None, backend: str | None = None, precision: str | None = None,
    timeout: float | None = None, compile: str | None = None,
) -> Runtime:
    """Detect the launch environment, choose device, backend and precision, and start the process group.

    Keyword arguments override ``EZPZ_DEVICE``, ``EZPZ_BACKEND``,
    ``EZPZ_PRECISION``, ``EZPZ_TIMEOUT`` and ``EZPZ_COMPILE``. Calling ``setup()`` again returns
    the same runtime; calling it with different overrides raises.
    ``torch.distributed.init_process_group`` runs only when world size > 1; a group that already exists
    (Ray Train, Lightning, accelerate, DeepSpeed) is adopted after checking it, never initialised again.
    """
    global _runtime, _runtime_settings
    import attr

    from ezpz.plugin_host.calls import Hooks
    from ezpz.startup.environ import decide_env_defaults
    from ezpz.failures import capture as failures
    from ezpz.startup.planning import explain_plan, plan_setup
    from ezpz.probes.torch_build import probe_torch_build
    from ezpz.runtime import Runtime

    if _host_error is not None:
        raise _host_error
    env = os.environ
    settings = SetupSettings.resolve(env, device=device, backend=backend, precision=precision, timeout=timeout,
                                     compile=compile)
    if _runtime is not None:
        if settings != _runtime_settings:
            raise SetupError(
                f"setup() already ran with {_runtime_settings}; now asked for {settings}. "
                "Call ezpz.hooks.teardown() before setting up again with other options"
            )
        return _runtime
    hooks, build = Hooks(_host), probe_torch_build()
    the_plan = hooks.watched(lambda: plan_setup(hooks, settings, env, build))  # one hand-off for all its hooks
    _log.set_rank(the_plan.launch.rank, all_ranks=settings.log_all_ranks)
    failures.install_for_setup(the_plan, settings, hooks.failure_signatures)  # from here on, an abnormal end leaves a record
    _mark_started(the_plan, settings.failure_dir)  # `ezpz launch` counts the ranks that started and ended
    log = _log.get_logger("ezpz.setup")
    if the_plan.launch.ignored:  # stale RANK/WORLD_SIZE under a real launcher: said on every rank
        log.warning("launch_variables_ignored", launcher=the_plan.launch.launcher,
                    ignored=", ".join(the_plan.launch.ignored), why=the_plan.launch.sources.get("ignored", ""))

    actions = []
    env_changes: dict[str, dict[str, str]] = {}
    for plugin, action in hooks.before_init(the_plan):
        try:  # the user's values win; a launcher's own default (torchrun's) does not, and the trace says who set it
            changes = decide_env_defaults(action.env_defaults, os.environ, ours=_applied_env)
        except TypeError as err:  # a bad return value is the plugin's fault: quarantine it, like any other
            hooks.host.quarantine(plugin, err, stage="hook ezpz_before_init")
            continue
        notes = [c.note for c in changes if c.note]
        if notes:
            action = attr.evolve(action, reason=f"{action.reason}; {'; '.join(notes)}")
        actions.append((plugin, action))
        for change in changes:
            if change.applies:
                _env_before.setdefault(change.name, change.current)
                os.environ[change.name] = _applied_env[change.name] = change.proposed
        env_changes[plugin] = {c.name: c.detail for c in changes}
        log.info("lifecycle", plugin=plugin, action=action.reason, env_defaults=dict(action.env_defaults),
                 env_set=sorted(c.name for c in changes if c.applies),
                 env_kept=sorted(c.name for c in changes if not c.applies))
        if action.undo is not None:  # what the plugin changed in the process, taken back by teardown()
            _undos.append((plugin, action.undo))
        if action.then is not None:  # a device runtime that reads its variables on import: now they are set
            action.then()

    import torch

    _check_autocast(the_plan)
    if the_plan.threads is not None:
        from ezpz.startup.threads import apply_threads

        apply_threads(the_plan.threads)
    dev = the_plan.device
    if dev.index is not None:
        from ezpz.primitives.device_module import device_module

        module = device_module(dev.candidate.device_type)
        set_device = getattr(module, "set_device", None)
        if set_device is not None:
            set_device(dev.index)
    from ezpz.startup.process_group import init_process_group, probe_existing_group

    existing, adopted = probe_existing_group(), None
    if existing is not None:  # Ray, Lightning, accelerate, DeepSpeed or the user made it: check it, never re-init
        from ezpz.startup.adoption import adopt_group

        adopted = adopt_group(existing, the_plan)
        log.info("process_group_adopted", group=adopted.chosen)
    elif the_plan.launch.distributed:
        init_process_group(the_plan)
    if the_plan.amp.tf32:
        _enable_tf32(torch)

    explanation = explain_plan(the_plan, settings, _plugin_rows(_host))
    if actions:
        from ezpz.decisions import Decision

        explanation = attr.evolve(
            explanation,
            decisions=(*explanation.decisions, *(Decision(topic="lifecycle", chosen=p, reason=a.reason,
                                                          details=env_changes.get(p, {})) for p, a in actions)),
        )
    if adopted is not None:
        explanation = attr.evolve(explanation, decisions=(*explanation.decisions, adopted))
    launch = the_plan.launch
    process_group = launch.distributed or existing is not None
    runtime = Runtime.from_plan(the_plan, explanation, process_group=process_group,
                                owns_process_group=existing is None,
                                backend=existing.backend if existing is not None else None,
                                attempt=settings.attempt,
                                stragglers=_straggler_watch(settings, the_plan) if process_group else None,
                                optimizer_hook=settings.step_hook)
    _runtime, _runtime_settings = runtime, settings
    runtime.boundary.install()  # a lazy device's step boundary after every optimizer.step() (ezpz.steps.boundary)
    _watch_hangs(runtime, settings)
    from ezpz.steps import preemption

    preemption.install(runtime, grace_s=settings.preempt_grace_s, record=failures.record_event)
    failures.set_sigterm_gate(preemption)  # from the first rt.step() on, a SIGTERM stops at a step boundary
    log.info("setup_done", device=dev.torch_device, backend=runtime.backend, precision=runtime.amp.dtype,
             launcher=launch.launcher, world_size=launch.world_size, layout=launch.summary)
    hooks.after_setup(runtime)
    return runtime


def _watch_hangs(runtime: Runtime, settings: SetupSettings) -> None:
    """Start the hang watchdog on ``rt.step()``'s clock (:mod:`ezpz.steps.hang_watch`)."""
    from ezpz.steps import hang_watch
    from ezpz.launch_env.rendezvous import this_host
    from ezpz.inputs.settings import HangSettings

    launch = runtime.plan.launch
    hang_watch.start(runtime.step_clock, rank=launch.rank, world_size=launch.world_size, host=this_host(launch),
                     timeout_s=runtime.plan.timeout_s, settings=settings.hang or HangSettings())


def _straggler_watch(settings: SetupSettings, plan: Any) -> Any:
    """The straggler exchange ``rt.step()`` runs (``EZPZ_STRAGGLER_EVERY``), or None when off or one rank."""
    opts, launch, profiling = settings.stragglers, plan.launch, plan.profiling
    if opts is None or opts.every == 0 or launch.world_size < 2:
        return None
    from ezpz.steps.straggler_exchange import StragglerWatch

    return StragglerWatch(rank=launch.rank, world_size=launch.world_size, every=opts.every, factor=opts.factor,
                          report_dir=settings.failure_dir, attempt=settings.attempt,
                          new_event=profiling.new_event, timer=profiling.timer, device=plan.device.torch_device)


def _enable_tf32(torch: Any) -> None:
    """TF32 for fp32 matmuls and convolutions, through the API this torch version wants.

    torch 2.9+ has ``fp32_precision``; mixing it with the legacy ``allow_tf32``
    flags raises there, so the legacy flags are only used on older versions.
    """
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32"
        torch.backends.cudnn.conv.fp32_precision = "tf32"
    else:
        matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def _check_autocast(plan: SetupPlan) -> None:
    """Refuse the policy if torch would silently switch autocast off for it."""
    if not plan.amp.autocast:
        return
    import torch

    device_type = plan.device.candidate.device_type
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if not torch.amp.is_autocast_available(device_type):
            enabled = False
        else:
            with torch.autocast(device_type=device_type, dtype=plan.amp.torch_dtype):
                enabled = torch.is_autocast_enabled(device_type)
    if not enabled:
        said = "; ".join(str(w.message) for w in caught) or "autocast is unavailable for this device type"
        raise UnavailableError(
            name="precision", value=plan.amp.dtype,
            expected=f"a dtype torch.autocast accepts on {device_type}",
            fix=f"torch refused it ({said}); set EZPZ_PRECISION=fp32 or upgrade torch",
        )


def _mark_started(plan: SetupPlan, failure_dir: str | None) -> None:
    """``started-<rank>`` in the attempt's failure directory (best-effort; see :mod:`ezpz.failures.rank_markers`)."""
    if not failure_dir:
        return
    from ezpz.failures.rank_markers import mark_started
    from ezpz.launch_env.rendezvous import this_host

    try:
        host = this_host(plan.launch)
    except Exception:  # bookkeeping never stops setup()
        host = "?"
    mark_started(failure_dir, plan.launch.rank, host)


def teardown() -> None:
    """Destroy the process group ezpz created (an adopted one is left to its owner); forget the runtime.

    A background checkpoint save in flight (``rt.save_checkpoint(..., background=True)``) completes first; its
    failure is raised once the rest is done. After a preemption (``rt.preempted``), it then exits with status 143
    (128 + SIGTERM).

    With gloo, call it on every rank after its last collective: it first runs a few tiny all-reduces so that
    gloo's worker threads let go of the last ones (:mod:`ezpz.primitives.gloo_quiesce`), bounded by a short timeout, and
    skipped while an exception is propagating (peers may then be inside another collective).
    """
    global _runtime, _runtime_settings
    from ezpz.steps import hang_watch

    hang_watch.stop()  # first: a slow teardown collective is no stalled step
    if _runtime is not None:
        _runtime.boundary.remove()  # the optimizer step hook setup() installed
    failure = _finish_background_save()
    if _runtime is not None and _runtime.process_group and _runtime.owns_process_group:
        import torch
        import torch.distributed as dist

        if dist.is_initialized():
            _quiesce_gloo(torch, dist)
            dist.destroy_process_group()
        from ezpz.launch_env.store import report_refused

        report_refused()  # rank 0: name processes of other launches that reached this job's store
    for key, value in list(_applied_env.items()):
        if os.environ.get(key) == value:
            before = _env_before.get(key)
            if before is None:
                del os.environ[key]
            else:
                os.environ[key] = before
    _applied_env.clear()
    _env_before.clear()
    _undo_lifecycle_actions()
    from ezpz.failures.capture import uninstall as stop_capturing_failures
    from ezpz.steps.preemption import uninstall as stop_preemption

    stop_preemption()
    stop_capturing_failures()
    markers = sys.modules.get("ezpz.failures.rank_markers")  # loaded by setup() only when a failure dir was set
    if markers is not None:
        markers.mark_ended()  # this rank got through teardown (also written at exit when teardown is never called)
    preempted = _runtime is not None and _runtime.preempted
    _runtime, _runtime_settings = None, None
    _log.set_rank(None, all_ranks=False)
    if failure is not None:  # after the rest of teardown: a failed checkpoint is never silent, even when preempted
        raise failure
    if preempted:  # SIGTERM, and the ranks stopped at the agreed step: the status a scheduler expects
        from ezpz.steps.preemption import PREEMPTED_STATUS

        raise SystemExit(PREEMPTED_STATUS)


def _finish_background_save() -> CheckpointError | None:
    """Wait for a background checkpoint save in flight (before its group goes); its failure, raised after teardown."""
    pending = _runtime.state.background if _runtime is not None else None
    if pending is None:
        return None
    try:
        pending.close()
    except CheckpointError as err:
        return err
    return None


def _undo_lifecycle_actions() -> None:
    """Run the plugins' ``LifecycleAction.undo`` callables, the latest first; one that raises is named and skipped."""
    while _undos:
        plugin, undo = _undos.pop()
        try:
            undo()
        except Exception as err:  # teardown goes on: the other plugins' undos and the rest still run
            _log.get_logger("ezpz.teardown").warning(
                "lifecycle_undo_failed", plugin=plugin, error=f"{type(err).__name__}: {err}",
                fix=f"report it to the plugin's authors, or set EZPZ_DISABLE_PLUGINS={plugin}")


def _quiesce_gloo(torch: Any, dist: Any) -> None:
    """Before destroying the group: gloo's workers past their last collective, unless a failure is in flight."""
    log = _log.get_logger("ezpz.teardown")
    propagating = sys.exc_info()[0]
    if propagating is not None:
        log.debug("gloo_quiesce", done=False, reason=f"skipped: {propagating.__name__} is propagating on this "
                  "rank, and its peers may be inside another collective")
        time.sleep(0.02)  # still: a worker waiting only for the GIL can drop its collective now
        return
    from ezpz.primitives.gloo_quiesce import quiesce

    report = quiesce(torch, dist.group.WORLD)
    (log.debug if report.done or not report.attempted else log.warning)(
        "gloo_quiesce", done=report.done, reason=report.reason)
