"""Turn facts into a :class:`~ezpz.decisions.SetupPlan` without side effects.

``setup()`` acts on the plan; ``ezpz doctor`` only prints it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from ezpz.plugin_host.calls import Hooks
from ezpz.startup.environ import snapshot
from ezpz.decisions import AmpPolicy, BackendChoice, Decision, MeshSupport, ProfilingSupport, SetupPlan, StepBoundary
from ezpz.errors import ConfigError, UnavailableError
from ezpz.decisions import Explanation
from ezpz.facts import Alternative, DeviceCandidate, LaunchEnv, Rejection, TorchBuild
from ezpz.policies import choose_device, refuse_unknown_device_types
from ezpz.probes.torch_types import unknown_device_types
from ezpz.inputs.settings import SetupSettings

__all__ = ["plan_setup", "explain_plan"]


def _no_answer(hook: str, device: DeviceCandidate) -> UnavailableError:
    return UnavailableError(
        name=hook,
        value=None,
        expected=f"an answer for device {device.label} from the plugin that offered it",
        fix=f"plugin {device.plugin!r} offered the device but did not answer {hook}; upgrade it or report a bug",
    )


def _not_loaded(hooks: Hooks) -> dict[str, str]:
    """Installed plugins the user's controls kept out, by name -> why, and how to let each in."""
    out: dict[str, str] = {}
    for record in hooks.host.records.values():
        if record.status == "blocked":
            out[record.name.lower()] = (f"{record.reason}; remove {record.name!r} from EZPZ_DISABLE_PLUGINS to "
                                        "enable it")
        elif record.status == "not-allowed":
            out[record.name.lower()] = f"{record.reason}; add {record.name!r} to EZPZ_PLUGINS to enable it"
    return out


def plan_setup(hooks: Hooks, settings: SetupSettings, environ: Mapping[str, str], build: TorchBuild) -> SetupPlan:
    environ = snapshot(environ)  # every hook reads the same copy; a write raises in the hook (ezpz.startup.environ)
    found = hooks.detect_launch_env(environ)
    if found is None:
        raise UnavailableError(
            name="ezpz_detect_launch_env", value=None, expected="a launch environment from some plugin",
            fix=_no_launch_fix(hooks),
        )
    launch: LaunchEnv = found[1]
    if launch.distributed and (launch.master_addr is None or launch.master_port is None):
        from ezpz.launch_env import resolve_rendezvous  # a site plugin may leave the rendezvous to the core

        launch = resolve_rendezvous(launch, environ)

    candidates: list[DeviceCandidate] = []
    rejections: list[Rejection] = []
    for plugin, report in hooks.probe_devices(build, environ):
        candidates += [c if c.plugin else _with_plugin(c, plugin) for c in report.candidates]
        rejections += [r if r.plugin else _with_plugin(r, plugin) for r in report.rejections]
    # Every probe has run (a plugin imports its torch extension there): a device type torch still does not know
    # would fail at torch.device(); refuse it here, with the fix, and let the next candidate win.
    candidates, refused = refuse_unknown_device_types(candidates, unknown_device_types(c.device_type for c in candidates))
    rejections += refused
    device = choose_device(
        candidates, rejections, local_rank=launch.local_rank, local_world_size=launch.local_world_size,
        requested=settings.device, requested_from=settings.device_from, not_loaded=_not_loaded(hooks),
    )
    cand = device.candidate

    with _named_source("EZPZ_BACKEND", settings.backend_from):
        answer = hooks.select_backend(cand, build, launch, settings.backend)
    if answer is None:
        raise _no_answer("ezpz_select_backend", cand)
    backend: BackendChoice = _said_source(answer[1], "EZPZ_BACKEND", settings.backend_from)
    with _named_source("EZPZ_PRECISION", settings.precision_from):
        amp_answer = hooks.amp_policy(cand, build, settings.precision)
    if amp_answer is None:
        raise _no_answer("ezpz_amp_policy", cand)
    amp: AmpPolicy = _said_source(amp_answer[1], "EZPZ_PRECISION", settings.precision_from)
    prof_answer = hooks.profiling(cand, build)
    profiling = prof_answer[1] if prof_answer else ProfilingSupport(
        activities=("CPU",), reason=f"no plugin described profiling for {cand.device_type}; CPU activity only"
    )
    compile_policy = _compile_policy(hooks, cand, build, settings)
    step_answer = hooks.step_boundary(cand, build)
    step = step_answer[1] if step_answer else StepBoundary.eager(cand.label)
    mesh_answer = hooks.mesh_support(cand, build, backend.name)
    mesh = mesh_answer[1] if mesh_answer else _torch_mesh_support(cand.device_type, build, backend.name)
    from ezpz.startup.threads import choose_threads, probe_thread_facts

    threads = choose_threads(probe_thread_facts(environ, launch.local_world_size, launch.launcher))
    return SetupPlan(build=build, launch=launch, device=device, backend=backend, amp=amp, profiling=profiling,
                     timeout_s=settings.timeout_s, compile=compile_policy, threads=threads, step=step,
                     mesh=mesh)


def _torch_mesh_support(device_type: str, build: TorchBuild, backend: str) -> MeshSupport:
    """No plugin described meshes here: torch's own way, with the reduce operations gloo lacks when the backend
    is gloo (torch's own backend, on any device: :mod:`ezpz.plugin_kit.gloo_reductions`)."""
    if backend != "gloo":
        return MeshSupport.default(device_type)
    from ezpz.plugin_kit.gloo_reductions import gloo_mesh_support

    return gloo_mesh_support(build)


def _compile_policy(hooks: Hooks, cand: DeviceCandidate, build: TorchBuild, settings: SetupSettings):  # type: ignore[no-untyped-def]
    """The plugin's torch.compile answer (or "none" when nobody answers), with the user's request applied."""
    from ezpz.compiling import apply_compile_request, no_compile_answer

    answer = hooks.compile_policy(cand, build)
    policy = answer[1] if answer else no_compile_answer(cand.label)
    return apply_compile_request(policy, settings.compile, device=cand.label, requested_from=settings.compile_from,
                                 torch_has_compile=build.at_least(2, 0))


def _no_launch_fix(hooks: Hooks) -> str:
    """Why no plugin answered: the built-in was denied, or it failed (then say how, not "disabled")."""
    record = hooks.host.records.get("launchers")
    if record is not None and record.status == "failed":
        return (f"the built-in 'launchers' plugin failed at {record.stage} ({record.error}); fix what that error "
                "names, or report a bug")
    if record is not None and record.status == "blocked":
        return "the built-in 'launchers' plugin is disabled (EZPZ_DISABLE_PLUGINS); re-enable it"
    return "no plugin answered ezpz_detect_launch_env; reinstall ezpz"


@contextlib.contextmanager
def _named_source(default: str, actual: str) -> Iterator[None]:
    """Plugins name the canonical variable; say the one the user actually set (TORCH_BACKEND, a keyword)."""
    try:
        yield
    except ConfigError as err:
        if err.name != default or actual == default:
            raise
        raise type(err)(name=actual, value=err.value, expected=err.expected,
                        fix=err.fix.replace(default, actual)) from err


def _said_source(decision, default: str, actual: str):  # type: ignore[no-untyped-def]
    """Plugins' reasons name the canonical variable; say the one the user actually set."""
    from attr import evolve

    if actual == default or default not in decision.reason:
        return decision
    return evolve(decision, reason=decision.reason.replace(default, actual))


def _with_plugin(record, plugin: str):  # type: ignore[no-untyped-def]
    from attr import evolve

    return evolve(record, plugin=plugin)


def _compile_decision(plan: SetupPlan) -> tuple[Decision, ...]:
    from ezpz.facts import Alternative

    policy = plan.compile
    if policy is None:
        return ()
    alts = [Alternative(name=o.backend, reason=("available: " if o.available else "unavailable: ") + o.reason)
            for o in policy.alternatives]
    details: dict[str, object] = {}
    if policy.options:
        details["options"] = dict(policy.options)
    return (Decision(topic="compile", chosen=policy.label, reason=policy.reason, alternatives=alts, details=details),)


def _step_decision(plan: SetupPlan, settings: SetupSettings) -> tuple[Decision, ...]:
    """What ends a step: the plugin's boundary at rt.step(), and (EZPZ_STEP_HOOK) after every optimizer.step()."""
    step = plan.step
    if step is None:
        return ()
    if step.mark is None:
        return (Decision(topic="step", chosen="Runtime.step() counts and times the step (no device call)",
                         reason=step.reason),)
    details = {"recompiles": "named once when every step compiles a new graph, after the warm-up (the device's "
                             "compile counter)" if step.compiles else "not watched: the plugin offers no compile counter",
               "save": "rt.save() brings every tensor to the host in one transfer" if step.to_host else "rt.save() is "
                       "torch.save"}
    hook = Alternative(name=f"{step.name} after every optimizer.step()",
                       reason="EZPZ_STEP_HOOK=0: the script marks its steps itself (rt.step(), or the device's own call)")
    if not settings.step_hook:
        return (Decision(topic="step", chosen=f"Runtime.step() calls {step.name}", reason=step.reason,
                         alternatives=(hook,), details=details),)
    return (Decision(
        topic="step", chosen=f"Runtime.step() calls {step.name}; without rt.step(), every optimizer.step() does",
        reason=(f"{step.reason}; a loop written for CUDA gets it after every optimizer.step() (torch's global optimizer "
                "step post-hook, installed by setup(), removed by teardown()); from a script's first rt.step() on, "
                "rt.step() is the boundary and the hook stands aside: one per step, never two"),
        alternatives=(Alternative(name=f"{step.name} at rt.step() only",
                                  reason="EZPZ_STEP_HOOK=0, for scripts that mark steps themselves"),),
        details=details),)


def _sharding_decision(plan: SetupPlan) -> tuple[Decision, ...]:
    """What rt.mesh() and rt.shard() do here: the mesh's groups, FSDP2 or its refusal, the mixed precision."""
    if plan.mesh is None:
        return ()
    from ezpz.sharding.explained import sharding_decision

    return (sharding_decision(plan.mesh, plan.amp, plan.device.candidate.device_type),)


def _hang_decision(settings: SetupSettings, timeout_s: float) -> Decision:
    """The hang-budget policy in force (the learned value is in a ``hang`` failure record, when one is written)."""
    from ezpz.inputs.settings import HangSettings

    hang = settings.hang or HangSettings()
    chosen = (f"learned: {hang.factor:g} x p99, floor {hang.floor_s:g}s, after {hang.warmup} steps" if hang.enabled
              else f"off: EZPZ_TIMEOUT {timeout_s:g}s")
    return Decision(topic="hang_budget", chosen=chosen, reason=hang.describe(timeout_s),
                    details={"watchdog": "a daemon thread per rank reads rt.step()'s clock; a step past its budget is "
                                         "named in a 'hang' failure record (ezpz.steps.hang_watch)"})


def _world_decision(settings: SetupSettings) -> tuple[Decision, ...]:
    """When ``ezpz launch --min-nodes`` shrank the world for this attempt: from what, to what, and why."""
    shrank = settings.world_shrank
    if shrank is None:
        return ()
    return (Decision(topic="world", chosen=f"shrank {shrank.before} -> {shrank.after} ranks",
                     reason=f"{shrank.why} (from EZPZ_WORLD_SHRANK, set by ezpz launch --min-nodes)",
                     alternatives=(Alternative(name="stop", reason="no spare host was left, and the healthy "
                                                                   "hosts still numbered --min-nodes or more"),)),)


def _straggler_decision(plan: SetupPlan, settings: SetupSettings) -> tuple[Decision, ...]:
    opts = settings.stragglers
    if opts is None:
        return ()
    if opts.every == 0:
        chosen, reason = "off", f"EZPZ_STRAGGLER_EVERY=0 ({opts.source})"
    elif plan.launch.world_size < 2:
        chosen, reason = "off", "one rank: nothing to compare"
    else:
        chosen = f"every {opts.every} steps, slow = {opts.factor:g}x the median step"
        reason = (f"from {opts.source}: rt.step() gathers each rank's recent step and section times on rank 0, which sends the verdict back; "
                  f"report {'in ' + settings.failure_dir if settings.failure_dir else 'in the log only'}; "
                  f"device timer {plan.profiling.timer} ({plan.profiling.timer_reason})")
    return (Decision(topic="stragglers", chosen=chosen, reason=reason),)


def explain_plan(plan: SetupPlan, settings: SetupSettings, plugins: tuple[Mapping[str, object], ...] = ()) -> Explanation:
    launch, dev, cand = plan.launch, plan.device, plan.device.candidate
    launch_details = {k: f"{getattr(launch, k)} (from {v})" for k, v in launch.sources.items()}
    if launch.master_addr:
        port = launch.master_port if launch.master_port is not None else "(published by rank 0 at setup)"
        launch_details.setdefault("rendezvous", f"{launch.master_addr}:{port}")
    device_details: dict[str, object] = {"vendor": cand.vendor, "plugin": cand.plugin or "?", "count": cand.count}
    for key in ("names", "arch", "physical_ids", "visible_devices_var"):
        value = getattr(cand, key)
        if value:
            device_details[key] = value
    device_details.update(cand.details)
    amp = plan.amp
    decisions = (
        Decision(topic="torch", chosen=plan.build.version,
                 reason=f"cuda={plan.build.cuda} hip={plan.build.hip} xpu_built={plan.build.xpu_built} "
                        f"backends={','.join(plan.build.distributed_backends) or 'none'}"),
        Decision(topic="launch", chosen=f"{launch.launcher}: rank {launch.rank}/{launch.world_size}, "
                 f"local {launch.local_rank}/{launch.local_world_size}, node {launch.node_rank}/{launch.num_nodes}",
                 reason=launch.reason or launch.launcher, alternatives=launch.rejected, details=launch_details),
        Decision(topic="device", chosen=dev.torch_device, reason=dev.reason, alternatives=dev.alternatives,
                 details=device_details),
        Decision(topic="backend", chosen=plan.backend.name, reason=plan.backend.reason,
                 alternatives=plan.backend.alternatives),
        Decision(topic="precision", chosen=f"{amp.dtype} (autocast {'on' if amp.autocast else 'off'}, "
                 f"grad scaler {'on' if amp.grad_scaler else 'off'}, tf32 {'on' if amp.tf32 else 'off'})",
                 reason=amp.reason, alternatives=amp.alternatives, details={"tf32": amp.tf32_reason}),
        Decision(topic="profiling", chosen=f"activities {','.join(plan.profiling.activities)}; "
                 f"ranges {plan.profiling.marker or 'torch record_function only'}", reason=plan.profiling.reason),
        *_compile_decision(plan),
        *_step_decision(plan, settings),
        *_sharding_decision(plan),
        Decision(topic="timeout", chosen=f"{plan.timeout_s:g}s", reason=f"from {settings.timeout_from}"),
        _hang_decision(settings, plan.timeout_s),
        Decision(topic="attempt", chosen=str(settings.attempt), reason=f"from {settings.attempt_from}",
                 details={"failure records": settings.failure_dir or "not written (EZPZ_FAILURE_DIR unset)"}),
        *_world_decision(settings),
        *_straggler_decision(plan, settings),
    )
    if plan.threads is not None:
        decisions += (Decision(topic="threads", chosen=f"{plan.threads.threads} intra-op thread(s)",
                               reason=plan.threads.reason, alternatives=plan.threads.alternatives),)
    return Explanation(decisions=decisions, plugins=plugins)
