"""Turn facts into a :class:`~ezpz.decisions.SetupPlan` without side effects.

``setup()`` acts on the plan; ``ezpz doctor`` only prints it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from ezpz.calls import Hooks
from ezpz.decisions import AmpPolicy, BackendChoice, Decision, ProfilingSupport, SetupPlan
from ezpz.errors import ConfigError, UnavailableError
from ezpz.explain import Explanation
from ezpz.facts import DeviceCandidate, LaunchEnv, Rejection, TorchBuild
from ezpz.policies import choose_device
from ezpz.settings import SetupSettings

__all__ = ["plan_setup", "explain_plan"]


def _no_answer(hook: str, device: DeviceCandidate) -> UnavailableError:
    return UnavailableError(
        name=hook,
        value=None,
        expected=f"an answer for device {device.label} from the plugin that offered it",
        fix=f"plugin {device.plugin!r} offered the device but did not answer {hook}; upgrade it or report a bug",
    )


def plan_setup(hooks: Hooks, settings: SetupSettings, environ: Mapping[str, str], build: TorchBuild) -> SetupPlan:
    found = hooks.detect_launch_env(environ)
    if found is None:
        raise UnavailableError(
            name="ezpz_detect_launch_env", value=None, expected="a launch environment from some plugin",
            fix="the built-in 'launchers' plugin is disabled (EZPZ_DISABLE_PLUGINS); re-enable it",
        )
    launch: LaunchEnv = found[1]
    if launch.distributed and (launch.master_addr is None or launch.master_port is None):
        from ezpz.launch import resolve_rendezvous  # a site plugin may leave the rendezvous to the core

        launch = resolve_rendezvous(launch, environ)

    candidates: list[DeviceCandidate] = []
    rejections: list[Rejection] = []
    for plugin, report in hooks.probe_devices(build, environ):
        candidates += [c if c.plugin else _with_plugin(c, plugin) for c in report.candidates]
        rejections += [r if r.plugin else _with_plugin(r, plugin) for r in report.rejections]
    device = choose_device(
        candidates, rejections, local_rank=launch.local_rank, local_world_size=launch.local_world_size,
        requested=settings.device, requested_from=settings.device_from,
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
    return SetupPlan(build=build, launch=launch, device=device, backend=backend, amp=amp, profiling=profiling,
                     timeout_s=settings.timeout_s)


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
    from attrs import evolve

    if actual == default or default not in decision.reason:
        return decision
    return evolve(decision, reason=decision.reason.replace(default, actual))


def _with_plugin(record, plugin: str):  # type: ignore[no-untyped-def]
    from attrs import evolve

    return evolve(record, plugin=plugin)


def explain_plan(plan: SetupPlan, settings: SetupSettings, plugins: tuple[Mapping[str, object], ...] = ()) -> Explanation:
    launch, dev, cand = plan.launch, plan.device, plan.device.candidate
    launch_details = {k: f"{getattr(launch, k)} (from {v})" for k, v in launch.sources.items()}
    if launch.master_addr:
        port = launch.master_port if launch.master_port is not None else "(published by rank 0 at setup)"
        launch_details.setdefault("rendezvous", f"{launch.master_addr}:{port}")
    device_details: dict[str, object] = {"vendor": cand.vendor, "count": cand.count}
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
        Decision(topic="timeout", chosen=f"{plan.timeout_s:g}s", reason=f"from {settings.timeout_from}"),
    )
    return Explanation(decisions=decisions, plugins=plugins)
