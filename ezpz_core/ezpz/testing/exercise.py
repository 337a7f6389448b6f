"""Calling one plugin's hooks with this machine's (or recorded) inputs and synthetic ones, each outcome a check."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ezpz.decisions import AmpPolicy, BackendChoice, DeviceChoice, ProfilingSupport, SetupPlan
from ezpz.errors import ConfigError
from ezpz.decisions import Explanation
from ezpz.facts import DeviceCandidate, LaunchEnv, TorchBuild
from ezpz.hookspecs import RETURNS, return_type
from ezpz.testing.hookimpls import Impl, one_line
from ezpz.testing.report import CheckResult
from ezpz.testing.values import summary, value_problems

__all__ = ["Caller", "exercise", "synthetic_plan", "synthetic_runtime"]

_BARE_BUILD = TorchBuild(version="2.13.0+cpu", distributed_backends=("gloo",))
_SINGLE = LaunchEnv(launcher="single", reason="synthetic single process (ezpz.testing)")
_PAIR = LaunchEnv(
    launcher="torchrun", rank=1, world_size=2, local_rank=1, local_world_size=2, master_addr="127.0.0.1",
    master_port=29500, reason="synthetic two-rank job (ezpz.testing)",
)


class _ForeignFacts:
    """Facts no real plugin recognises."""


_FOREIGN = DeviceCandidate(
    device_type="ezpz-testing-foreign", vendor="ezpz.testing", count=1, plugin="ezpz.testing",
    reason="a device no installed plugin offers (conformance check)", facts=_ForeignFacts(),
)


class Caller:
    """Calls one plugin's hooks and turns each outcome into a CheckResult."""

    def __init__(self, impls: Sequence[Impl]) -> None:
        self.by_hook = {i.hook: i for i in impls if i.hook in RETURNS}
        self.results: list[CheckResult] = []

    def has(self, hook: str) -> bool:
        return hook in self.by_hook

    def call(
        self, hook: str, label: str, kwargs: Mapping[str, Any], *, must_answer: bool = False,
        must_be_none: bool = False, config_error_ok: bool = False, check: Callable[[Any], list[str]] | None = None,
    ) -> Any:
        """Call ``hook`` and record the result; return the value when it is well formed, else None."""
        impl = self.by_hook.get(hook)
        if impl is None:
            return None
        name = f"{hook}({label})"
        expect = return_type(hook)
        try:
            value = impl.function(**{a: kwargs[a] for a in impl.argnames if a in kwargs})
        except ConfigError as err:
            if config_error_ok:
                self.results.append(CheckResult(name, True, f"refused the request: {one_line(err)}"))
            else:
                self.results.append(CheckResult(name, False, f"raised {type(err).__name__}: {one_line(err)}"))
            return None
        except Exception as err:  # noqa: BLE001
            self.results.append(CheckResult(name, False, f"raised {type(err).__name__}: {one_line(err)}"))
            return None
        if expect is None:  # return value ignored (ezpz_after_setup)
            self.results.append(CheckResult(name, True, "ran"))
            return None
        if value is None:
            if must_answer:
                self.results.append(
                    CheckResult(name, False, f"returned None for a device the plugin offered; expected {expect.__name__}")
                )
            else:
                self.results.append(CheckResult(name, True, "None"))
            return None
        if not isinstance(value, expect):
            self.results.append(
                CheckResult(name, False, f"returned {type(value).__name__} ({value!r:.80}), expected {expect.__name__} or None")
            )
            return None
        if must_be_none:
            self.results.append(
                CheckResult(name, False, f"answered {type(value).__name__} for a device the plugin did not offer "
                                         "(check isinstance(device.facts, YourFacts) and return None otherwise)")
            )
            return None
        problems = value_problems(value) + (check(value) if check else [])
        if problems:
            self.results.append(CheckResult(name, False, "; ".join(problems)))
            return None
        self.results.append(CheckResult(name, True, summary(value)))
        return value


def _signatures(value: list[Any]) -> list[str]:
    from ezpz.failures.signatures import FailureSignature

    bad = [type(v).__name__ for v in value if not isinstance(v, FailureSignature)]
    return [f"entries that are not FailureSignature: {', '.join(bad[:5])}"] if bad else []


def _fp32_off(value: AmpPolicy) -> list[str]:
    if value.dtype != "fp32" or value.autocast:
        return [f"requested fp32 but got {value.dtype} with autocast {'on' if value.autocast else 'off'}"]
    return []


def synthetic_plan(
    candidate: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, backend: BackendChoice | None,
    amp: AmpPolicy | None, profiling: ProfilingSupport | None,
) -> SetupPlan:
    index = None if candidate.shared else 0
    return SetupPlan(
        build=build, launch=launch,
        device=DeviceChoice(candidate=candidate, index=index, reason="chosen by the conformance check"),
        backend=backend or BackendChoice(name="gloo", reason="synthetic (conformance check)"),
        amp=amp or AmpPolicy(dtype="fp32", autocast=False, grad_scaler=False, tf32=False, reason="synthetic"),
        profiling=profiling or ProfilingSupport(activities=("CPU",), reason="synthetic (conformance check)"),
        timeout_s=60.0,
    )


def synthetic_runtime(plan: SetupPlan) -> Any:
    """The runtime ``setup()`` would hand out for ``plan`` (the device kept as a string where torch does not know it)."""
    from ezpz.runtime import Runtime

    device: Any = plan.device.torch_device
    try:
        import torch

        device = torch.device(device)
    except Exception:  # noqa: BLE001  (a device type this torch does not know)
        pass
    return Runtime.from_plan(plan, Explanation(decisions=()), device=device)


def _device_types_known(plugin: str, found: Sequence[DeviceCandidate]) -> list[CheckResult]:
    """One result per device type the probe offered here: can torch make it (after the probe imported what it needs)?"""
    from ezpz.probes.torch_types import unknown_device_types

    unknown = unknown_device_types(c.device_type for c in found)
    return [CheckResult(
        f"device type known to torch ({device_type})", device_type not in unknown,
        f"plugin {plugin!r} offers {device_type!r}, but torch.device({device_type!r}) fails: {unknown[device_type]}; "
        "import the vendor's torch extension in the probe (setup() refuses this device)"
        if device_type in unknown else f"torch.device({device_type!r}) works",
    ) for device_type in sorted({c.device_type for c in found})]


def _backend_known(plugin: str, label: str, backend: str) -> CheckResult:
    """After ``ezpz_before_init``, does torch.distributed know the backend the plugin chose for its own device?"""
    from ezpz.probes.torch_types import backend_known

    known = backend_known(backend)
    return CheckResult(
        f"backend known to torch.distributed ({label}: {backend})", known,
        f"torch.distributed knows {backend!r}" if known else
        f"plugin {plugin!r} chose {backend!r}, which torch.distributed does not know even after ezpz_before_init; "
        "register it there (import the vendor's collective bindings), or init_process_group fails",
    )


def exercise(
    caller: Caller, name: str, build: TorchBuild, environ: Mapping[str, str], extra: Sequence[DeviceCandidate]
) -> list[CheckResult]:
    """Call every hook the plugin implements; return extra cross-hook results."""
    extra_results: list[CheckResult] = []
    own: list[DeviceCandidate] = []
    report = caller.call("ezpz_probe_devices", "inputs", {"build": build, "environ": environ})
    if report is not None:
        own += [c if c.plugin else attrs.evolve(c, plugin=name) for c in report.candidates]
    found_here = list(own)  # offered by the probe on this machine (not recorded): torch must be able to make them
    extra_results += _device_types_known(name, found_here)
    caller.call("ezpz_probe_devices", "bare: cpu-only torch, empty environment", {"build": _BARE_BUILD, "environ": {}})
    own += list(extra)

    if own:
        missing = [h for h in ("ezpz_select_backend", "ezpz_amp_policy") if not caller.has(h)]
        extra_results.append(CheckResult(
            "answers for its own devices", not missing,
            f"offers {', '.join(sorted({c.device_type for c in own}))} but implements no {' or '.join(missing)}; "
            "setup() would fail on that device" if missing else "implements ezpz_select_backend and ezpz_amp_policy",
        ))

    seen: set[str] = set()
    for cand in own:
        label = cand.device_type if cand.device_type not in seen else f"{cand.device_type}#{len(seen)}"
        seen.add(cand.device_type)
        backend = None
        for launch, where in ((_SINGLE, "single"), (_PAIR, "2 ranks")):
            kw = {"device": cand, "build": build, "launch": launch, "requested": None}
            got = caller.call("ezpz_select_backend", f"{label}, {where}", kw, must_answer=True)
            backend = backend or got
        amp = caller.call("ezpz_amp_policy", f"{label}, auto", {"device": cand, "build": build, "requested": "auto"},
                          must_answer=True)
        caller.call("ezpz_amp_policy", f"{label}, fp32", {"device": cand, "build": build, "requested": "fp32"},
                    must_answer=True, check=_fp32_off)
        for dtype in ("bf16", "fp16"):
            caller.call("ezpz_amp_policy", f"{label}, {dtype}", {"device": cand, "build": build, "requested": dtype},
                        must_answer=True, config_error_ok=True)
        prof = caller.call("ezpz_profiling", label, {"device": cand, "build": build})
        caller.call("ezpz_compile_policy", label, {"device": cand, "build": build})
        caller.call("ezpz_step_boundary", label, {"device": cand, "build": build})
        if backend is not None:
            caller.call("ezpz_mesh_support", label, {"device": cand, "build": build, "backend": backend.name})
            caller.call("ezpz_cuda_answers", label, {"device": cand, "build": build, "backend": backend.name})
        plan = synthetic_plan(cand, build, _PAIR, backend, amp, prof)
        caller.call("ezpz_before_init", label, {"plan": plan})
        if backend is not None and any(cand is c for c in found_here):
            extra_results.append(_backend_known(name, label, backend.name))
        if caller.has("ezpz_after_setup"):
            caller.call("ezpz_after_setup", label, {"runtime": synthetic_runtime(plan)})

    foreign = "foreign device"
    caller.call("ezpz_select_backend", foreign,
                {"device": _FOREIGN, "build": build, "launch": _SINGLE, "requested": None}, must_be_none=True)
    caller.call("ezpz_amp_policy", foreign, {"device": _FOREIGN, "build": build, "requested": "auto"}, must_be_none=True)
    caller.call("ezpz_profiling", foreign, {"device": _FOREIGN, "build": build}, must_be_none=True)
    caller.call("ezpz_compile_policy", foreign, {"device": _FOREIGN, "build": build}, must_be_none=True)
    caller.call("ezpz_step_boundary", foreign, {"device": _FOREIGN, "build": build}, must_be_none=True)
    caller.call("ezpz_mesh_support", foreign, {"device": _FOREIGN, "build": build, "backend": "gloo"},
                must_be_none=True)
    caller.call("ezpz_cuda_answers", foreign, {"device": _FOREIGN, "build": build, "backend": "gloo"},
                must_be_none=True)
    foreign_plan = synthetic_plan(_FOREIGN, build, _SINGLE, None, None, None)
    caller.call("ezpz_before_init", foreign, {"plan": foreign_plan})
    if caller.has("ezpz_after_setup"):
        caller.call("ezpz_after_setup", foreign, {"runtime": synthetic_runtime(foreign_plan)})

    caller.call("ezpz_detect_launch_env", "inputs", {"environ": environ})
    caller.call("ezpz_detect_launch_env", "empty environment", {"environ": {}})
    caller.call("ezpz_failure_signatures", "signatures", {}, check=_signatures)
    return extra_results
