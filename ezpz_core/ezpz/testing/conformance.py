"""The plugin conformance check: :func:`check_plugin` and :func:`assert_conformant`.

A plugin passes when:

* every ``@ezpz.hookimpl`` names a hook spec and takes a subset of its
  arguments (checked by hand for clear messages, then by pluggy's own
  ``register``/``check_pending`` in a fresh manager), and no ``ezpz_*``
  function is left unmarked (pluggy would silently ignore it);
* registering it in a fresh :class:`~ezpz.plugin_host.host.PluginHost` beside the
  built-ins quarantines nothing, and planning with that host works;
* each hook, called with this machine's (or the given, recorded) inputs and
  with synthetic ones, returns its documented type or None, never raises,
  and every reason it gives (candidates, rejections, backend, precision,
  profiling, lifecycle, alternatives) is a non-empty string;
* hooks return None for a device the plugin did not offer;
* its module imports in a fresh interpreter where the vendor SDKs are
  unimportable, without even trying to import them, and pulls in nothing
  beyond the standard library, ezpz and ezpz's own dependencies.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pluggy
from attrs import field, frozen

from ezpz import hookspecs
from ezpz.compiling import CompilePolicy
from ezpz.decisions import (
    AmpPolicy,
    BackendChoice,
    DeviceChoice,
    LifecycleAction,
    ProfilingSupport,
    SetupPlan,
)
from ezpz.errors import ConfigError
from ezpz.explain import Explanation
from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild
from ezpz.plugin_host.host import ENTRY_POINT_GROUP

__all__ = [
    "HOOK_RETURNS",
    "VENDOR_SDK_MODULES",
    "CheckResult",
    "ConformanceReport",
    "assert_conformant",
    "check_plugin",
]

VENDOR_SDK_MODULES: tuple[str, ...] = (
    "pynvml",
    "nvtx",
    "amdsmi",
    "pyrsmi",
    "rocm_smi",
    "intel_extension_for_pytorch",
    "oneccl_bindings_for_pytorch",
    "torch_ccl",
    "habana_frameworks",
)
"""Top-level modules of vendor SDKs that a plugin must not need at import time."""

HOOK_RETURNS: dict[str, type | None] = {
    "ezpz_probe_devices": ProbeReport,
    "ezpz_select_backend": BackendChoice,
    "ezpz_amp_policy": AmpPolicy,
    "ezpz_profiling": ProfilingSupport,
    "ezpz_compile_policy": CompilePolicy,
    "ezpz_detect_launch_env": LaunchEnv,
    "ezpz_before_init": LifecycleAction,
    "ezpz_after_setup": None,  # return value ignored
    "ezpz_failure_signatures": list,  # (or a tuple) of ezpz.failures.signatures.FailureSignature
}
"""The documented non-None return type of every hook (None: ignored)."""

_PREFIX = "ezpz_"
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


@frozen
class CheckResult:
    """One conformance check: its name, whether it passed, and what was seen.

    ``skipped`` results count as passed (the check could not apply).
    """

    name: str
    passed: bool
    detail: str = ""
    skipped: bool = False


@frozen(kw_only=True)
class ConformanceReport:
    """Every check run against one plugin. ``str()`` it for a readable list."""

    plugin: str
    target: str
    results: tuple[CheckResult, ...] = field(converter=tuple)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    def __getitem__(self, name: str) -> CheckResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no check named {name!r}; checks run: {[r.name for r in self.results]}")

    def names(self) -> list[str]:
        return [r.name for r in self.results]

    def __str__(self) -> str:
        head = f"plugin {self.plugin!r} ({self.target}): " + (
            "conformant" if self.passed else f"{len(self.failures)} of {len(self.results)} checks failed"
        )
        lines = [head]
        for r in self.results:
            mark = "SKIP" if r.skipped else ("PASS" if r.passed else "FAIL")
            lines.append(f"  {mark} {r.name}" + (f": {r.detail}" if r.detail else ""))
        return "\n".join(lines)


# -- resolving the plugin ------------------------------------------------------------


@frozen
class _Target:
    plugin: Any
    name: str
    target: str
    module: str | None  # importable module name for the isolated-import check


def _resolve(plugin: object | str) -> _Target:
    if not isinstance(plugin, str):
        module = plugin.__name__ if isinstance(plugin, ModuleType) else getattr(inspect.getmodule(plugin), "__name__", None)
        name = getattr(plugin, "__name__", None) or type(plugin).__name__
        return _Target(plugin, name, module or name, module)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == plugin:
            return _Target(ep.load(), ep.name, ep.value, ep.value.split(":", 1)[0])
    module_name, _, attr = plugin.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return _Target(obj, plugin, plugin, module_name)


# -- hook implementations ----------------------------------------------------------------


@frozen
class _Impl:
    attr: str
    hook: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    opts: Mapping[str, Any]


def _spec_args() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if name.startswith(_PREFIX) and hasattr(fn, "ezpz_spec"):
            out[name] = tuple(inspect.signature(fn).parameters)
    return out


def _impls(plugin: object) -> tuple[list[_Impl], list[str]]:
    """Marked hook implementations, and names of ``ezpz_*`` routines left unmarked."""
    impls, unmarked = [], []
    for attr in dir(plugin):
        try:
            value = getattr(plugin, attr)
        except Exception:  # noqa: BLE001  (properties that raise are not hooks)
            continue
        if not inspect.isroutine(value):
            continue
        opts = getattr(value, "ezpz_impl", None)
        if isinstance(opts, dict):
            params = inspect.signature(value).parameters
            impls.append(_Impl(attr, opts.get("specname") or attr, value, tuple(params), dict(opts)))
        elif attr.startswith(_PREFIX) and not hasattr(value, "ezpz_spec"):
            unmarked.append(attr)
    return impls, unmarked


def _check_specs(t: _Target, impls: Sequence[_Impl]) -> CheckResult:
    specs = _spec_args()
    problems: list[str] = []
    for impl in impls:
        if impl.hook not in specs:
            close = difflib.get_close_matches(impl.hook, list(specs), n=1)
            hint = f" (did you mean {close[0]}?)" if close else f" (hooks: {', '.join(sorted(specs))})"
            problems.append(f"{impl.hook}: no hook spec of that name{hint}")
            continue
        extra = [a for a in impl.argnames if a not in specs[impl.hook]]
        if extra:
            problems.append(
                f"{impl.hook}: argument(s) {', '.join(extra)} not in the spec's ({', '.join(specs[impl.hook])})"
            )
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    try:
        pm.register(t.plugin, name=t.name)
        pm.check_pending()
    except Exception as err:  # noqa: BLE001  (PluginValidationError and duplicate names)
        problems.append(f"pluggy: {type(err).__name__}: {_one_line(err)}")
    if not impls and not problems:
        return CheckResult("hookimpls match specs", False, "no @ezpz.hookimpl functions found: nothing to register")
    if problems:
        return CheckResult("hookimpls match specs", False, "; ".join(problems))
    return CheckResult("hookimpls match specs", True, ", ".join(sorted({i.hook for i in impls})))


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


# -- value checks ----------------------------------------------------------------------------


def _text(value: object, where: str, out: list[str]) -> None:
    if not isinstance(value, str):
        out.append(f"{where} is {type(value).__name__}, not a string")
    elif not value.strip():
        out.append(f"{where} is empty")


def _alternatives(alts: Iterable[Any], where: str, out: list[str]) -> None:
    for i, alt in enumerate(alts):
        _text(getattr(alt, "name", None), f"{where}[{i}].name", out)
        _text(getattr(alt, "reason", None), f"{where}[{i}].reason", out)


def _value_problems(value: object) -> list[str]:
    """Reasons that are empty or not strings, and other malformed fields."""
    out: list[str] = []
    if isinstance(value, ProbeReport):
        for i, c in enumerate(value.candidates):
            if not isinstance(c, DeviceCandidate):
                out.append(f"candidates[{i}] is {type(c).__name__}, not DeviceCandidate")
                continue
            _text(c.device_type, f"candidates[{i}].device_type", out)
            _text(c.reason, f"candidates[{i}].reason", out)
            if not isinstance(c.priority, int):
                out.append(f"candidates[{i}].priority is {type(c.priority).__name__}, not int")
        for i, r in enumerate(value.rejections):
            _text(getattr(r, "device_type", None), f"rejections[{i}].device_type", out)
            _text(getattr(r, "reason", None), f"rejections[{i}].reason", out)
    elif isinstance(value, BackendChoice):
        _text(value.name, "name", out)
        _text(value.reason, "reason", out)
        _alternatives(value.alternatives, "alternatives", out)
    elif isinstance(value, AmpPolicy):
        _text(value.reason, "reason", out)
        _text(value.tf32_reason, "tf32_reason", out)
        _alternatives(value.alternatives, "alternatives", out)
    elif isinstance(value, ProfilingSupport):
        _text(value.reason, "reason", out)
        for i, a in enumerate(value.activities):
            _text(a, f"activities[{i}]", out)
        if (value.range_push is None) != (value.range_pop is None):
            out.append("range_push and range_pop must both be set or both be None")
        for attr in ("range_push", "range_pop", "memory_stats"):
            fn = getattr(value, attr)
            if fn is not None and not callable(fn):
                out.append(f"{attr} is not callable")
    elif isinstance(value, LifecycleAction):
        _text(value.reason, "reason", out)
        for k, v in value.env_defaults.items():
            if not isinstance(k, str) or not isinstance(v, str):
                out.append(f"env_defaults[{k!r}] must map str to str, got {type(v).__name__}")
    elif isinstance(value, LaunchEnv):
        _alternatives(value.rejected, "rejected", out)
    return out


# -- calling hooks ---------------------------------------------------------------------------


class _Caller:
    """Calls one plugin's hooks and turns each outcome into a CheckResult."""

    def __init__(self, impls: Sequence[_Impl]) -> None:
        self.by_hook = {i.hook: i for i in impls if i.hook in HOOK_RETURNS}
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
        expect = HOOK_RETURNS[hook]
        try:
            value = impl.function(**{a: kwargs[a] for a in impl.argnames if a in kwargs})
        except ConfigError as err:
            if config_error_ok:
                self.results.append(CheckResult(name, True, f"refused the request: {_one_line(err)}"))
            else:
                self.results.append(CheckResult(name, False, f"raised {type(err).__name__}: {_one_line(err)}"))
            return None
        except Exception as err:  # noqa: BLE001
            self.results.append(CheckResult(name, False, f"raised {type(err).__name__}: {_one_line(err)}"))
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
        if expect is list and isinstance(value, tuple):
            value = list(value)
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
        problems = _value_problems(value) + (check(value) if check else [])
        if problems:
            self.results.append(CheckResult(name, False, "; ".join(problems)))
            return None
        self.results.append(CheckResult(name, True, _summary(value)))
        return value


def _summary(value: object) -> str:
    if isinstance(value, ProbeReport):
        parts = [f"offers {c.device_type} (priority {c.priority})" for c in value.candidates]
        parts += [f"rejects {r.device_type}: {r.reason}" for r in value.rejections]
        return "; ".join(parts) or "empty report"
    if isinstance(value, BackendChoice):
        return f"{value.name}: {value.reason}"
    if isinstance(value, AmpPolicy):
        return f"{value.dtype} (autocast {'on' if value.autocast else 'off'}): {value.reason}"
    if isinstance(value, ProfilingSupport):
        return f"activities {','.join(value.activities)}, marker {value.marker}"
    if isinstance(value, LifecycleAction):
        return value.reason
    if isinstance(value, LaunchEnv):
        return f"{value.launcher}: rank {value.rank}/{value.world_size}"
    return type(value).__name__


def _fp32_off(value: AmpPolicy) -> list[str]:
    if value.dtype != "fp32" or value.autocast:
        return [f"requested fp32 but got {value.dtype} with autocast {'on' if value.autocast else 'off'}"]
    return []


def _synthetic_plan(
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


def _synthetic_runtime(plan: SetupPlan) -> Any:
    from ezpz.runtime import Runtime

    device: Any = plan.device.torch_device
    try:
        import torch

        device = torch.device(device)
    except Exception:  # noqa: BLE001  (a device type this torch does not know)
        pass
    launch, cand = plan.launch, plan.device.candidate
    return Runtime(
        device=device, device_type=cand.device_type, vendor=cand.vendor, backend=plan.backend.name, rank=launch.rank,
        local_rank=launch.local_rank, world_size=launch.world_size, local_world_size=launch.local_world_size,
        node_rank=launch.node_rank, num_nodes=launch.num_nodes, amp=plan.amp, profiling=plan.profiling, plan=plan,
        explanation=Explanation(decisions=()), process_group=False,
    )


def _exercise(
    caller: _Caller, name: str, build: TorchBuild, environ: Mapping[str, str], extra: Sequence[DeviceCandidate]
) -> list[CheckResult]:
    """Call every hook the plugin implements; return extra cross-hook results."""
    extra_results: list[CheckResult] = []
    own: list[DeviceCandidate] = []
    report = caller.call("ezpz_probe_devices", "inputs", {"build": build, "environ": environ})
    if report is not None:
        own += [c if c.plugin else attrs.evolve(c, plugin=name) for c in report.candidates]
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
        plan = _synthetic_plan(cand, build, _PAIR, backend, amp, prof)
        caller.call("ezpz_before_init", label, {"plan": plan})
        if caller.has("ezpz_after_setup"):
            caller.call("ezpz_after_setup", label, {"runtime": _synthetic_runtime(plan)})

    foreign = "foreign device"
    caller.call("ezpz_select_backend", foreign,
                {"device": _FOREIGN, "build": build, "launch": _SINGLE, "requested": None}, must_be_none=True)
    caller.call("ezpz_amp_policy", foreign, {"device": _FOREIGN, "build": build, "requested": "auto"}, must_be_none=True)
    caller.call("ezpz_profiling", foreign, {"device": _FOREIGN, "build": build}, must_be_none=True)
    caller.call("ezpz_compile_policy", foreign, {"device": _FOREIGN, "build": build}, must_be_none=True)
    foreign_plan = _synthetic_plan(_FOREIGN, build, _SINGLE, None, None, None)
    caller.call("ezpz_before_init", foreign, {"plan": foreign_plan})
    if caller.has("ezpz_after_setup"):
        caller.call("ezpz_after_setup", foreign, {"runtime": _synthetic_runtime(foreign_plan)})

    caller.call("ezpz_detect_launch_env", "inputs", {"environ": environ})
    caller.call("ezpz_detect_launch_env", "empty environment", {"environ": {}})
    caller.call("ezpz_failure_signatures", "signatures", {}, check=_signatures)
    return extra_results


def _signatures(value: list[Any]) -> list[str]:
    from ezpz.failures.signatures import FailureSignature

    bad = [type(v).__name__ for v in value if not isinstance(v, FailureSignature)]
    return [f"entries that are not FailureSignature: {', '.join(bad[:5])}"] if bad else []


# -- host-level checks -----------------------------------------------------------------------


def _host_checks(t: _Target, build: TorchBuild, environ: Mapping[str, str]) -> list[CheckResult]:
    from ezpz.testing.hosts import make_host, make_plan

    host = make_host(builtins=True)
    if not host.pm.is_registered(t.plugin):
        host.register(t.name, t.plugin, target=t.target)
        host.validate()
    failed = [f"{r.name} at {r.stage}: {r.error}" for r in host.failures]
    results = [CheckResult("registers cleanly", not failed,
                           "; ".join(failed) if failed else f"registered beside {', '.join(sorted(host.loaded()))}")]
    if failed:
        return results
    try:
        plan = make_plan(host, environ=environ, build=build)
    except Exception as err:  # noqa: BLE001
        quarantined = "".join(f"; quarantined {r.name} at {r.stage}: {r.error}" for r in host.failures)
        results.append(CheckResult("plan with the built-ins", False,
                                   f"raised {type(err).__name__}: {_one_line(err)}{quarantined}"))
        return results
    failed = [f"{r.name} at {r.stage}: {r.error}" for r in host.failures]
    results.append(CheckResult(
        "plan with the built-ins", not failed,
        "quarantined: " + "; ".join(failed) if failed
        else f"device {plan.device.torch_device}, backend {plan.backend.name}, precision {plan.amp.dtype}",
    ))
    return results


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


_ISOLATED_SOURCE = Path(__file__).with_name("_isolated_import.py")


def _isolated_import(
    module: str | None, sdk_modules: Sequence[str], allow_imports: Iterable[str], timeout: float = 120.0
) -> CheckResult:
    name = "imports without vendor SDKs"
    if module is None or module == "__main__" or not _findable(module):
        return CheckResult(name, True, f"skipped: {module!r} is not an importable module", skipped=True)
    env = dict(os.environ)
    env.pop("EZPZ_PLUGINS", None)
    env.pop("EZPZ_STRICT_PLUGINS", None)
    env["EZPZ_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # baseline: only the core and built-ins are imported
    # ...and not this module, even when it is a built-in, so its own imports show.
    own = [ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
           if ep.value.split(":", 1)[0] == module]
    if own:
        env["EZPZ_DISABLE_PLUGINS"] = ",".join(filter(None, [env.get("EZPZ_DISABLE_PLUGINS", ""), *own]))
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    with tempfile.TemporaryDirectory(prefix="ezpz-testing-") as tmp:
        out = Path(tmp, "result.json")
        args = json.dumps({"module": module, "blocked": list(sdk_modules), "out": str(out)})
        proc = subprocess.run(
            [sys.executable, "-c", _ISOLATED_SOURCE.read_text(encoding="utf-8"), args],
            env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )
        if not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return CheckResult(name, False, f"child interpreter exited {proc.returncode}: {' | '.join(tail)}")
        result = json.loads(out.read_text(encoding="utf-8"))
    problems: list[str] = []
    top = module.split(".", 1)[0]

    def own(importer: str) -> bool:  # the plugin's own code, not a library it pulled in
        return importer == top or importer.startswith(top + ".") or importer == module

    direct = [i for i in result["imports"] if own(i["by"])]
    tried = sorted({i["module"] for i in direct if i["blocked"]})
    if tried:
        problems.append(f"tried to import {', '.join(tried)} at module import (import vendor SDKs inside hook bodies)")
    if not result["ok"]:
        last = (result["error"] or "").strip().splitlines()[-1:] or ["unknown error"]
        problems.append(f"import failed without the SDKs: {last[0]}")
    allowed = set(sys.stdlib_module_names) | {top, "ezpz"} | set(allow_imports)
    heavy = sorted({i["module"].split(".", 1)[0] for i in direct if not i["blocked"]} - allowed)
    if heavy:
        pulled = len({m.split(".", 1)[0] for m in result["new_modules"]} - allowed - set(heavy))
        problems.append(
            f"imports {', '.join(heavy)} at module import"
            + (f" (pulling in {pulled} more top-level package(s))" if pulled else "")
            + "; a plugin module may import only the standard library and ezpz "
            "(import the rest inside hook bodies, or pass allow_imports=)"
        )
    if result.get("baseline_error"):
        problems.append(f"importing ezpz itself failed: {result['baseline_error'].strip().splitlines()[-1]}")
    if problems:
        return CheckResult(name, False, "; ".join(problems))
    blocked = ", ".join(sdk_modules) or "none"
    return CheckResult(name, True, f"imported {module} with {blocked} blocked; new modules: "
                                   f"{', '.join(sorted({m.split('.', 1)[0] for m in result['new_modules']})) or 'none'}")


# -- public API -------------------------------------------------------------------------------


def check_plugin(
    plugin: object | str,
    *,
    sdk_modules: Sequence[str] = VENDOR_SDK_MODULES,
    build: TorchBuild | None = None,
    environ: Mapping[str, str] | None = None,
    candidates: Sequence[DeviceCandidate] = (),
    allow_imports: Iterable[str] = (),
    isolated_import: bool = True,
) -> ConformanceReport:
    """Run every conformance check against ``plugin`` and report; never raises for a bad plugin.

    :param plugin: A plugin module or object, an entry-point name in group
        ``ezpz`` (``"cuda"``), or an import path (``"ezpz_cuda.plugin"``,
        ``"pkg.mod:obj"``).
    :param sdk_modules: Top-level vendor SDK modules made unimportable for the
        import check (default :data:`VENDOR_SDK_MODULES`).
    :param build: Torch build facts to feed the hooks (default: the installed
        torch); pass a recorded one (:func:`ezpz.testing.recorded_build`).
    :param environ: Environment to feed the hooks (default: ``os.environ``).
    :param candidates: Recorded :class:`~ezpz.facts.DeviceCandidate` records
        (with this plugin's ``facts``) to exercise the device hooks with, in
        addition to what the probe finds here; this is how a vendor suite
        checks its backend/precision/profiling hooks on a machine without the
        device.
    :param allow_imports: Extra top-level modules the plugin may import at
        module import time.
    :param isolated_import: Run the import check in a child interpreter
        (about a second); turn off only for plugins defined inside a test.
    """
    try:
        t = _resolve(plugin)
    except Exception as err:  # noqa: BLE001
        failed = [CheckResult("resolve", False, f"could not load {plugin!r}: {type(err).__name__}: {_one_line(err)}")]
        module = plugin.partition(":")[0] if isinstance(plugin, str) else None
        if isolated_import and module and _findable(module):  # say whether a vendor SDK import is the cause
            failed.append(_isolated_import(module, sdk_modules, allow_imports))
        return ConformanceReport(plugin=str(plugin), target=str(plugin), results=tuple(failed))
    results: list[CheckResult] = [CheckResult("resolve", True, f"{t.name} -> {t.target}")]
    impls, unmarked = _impls(t.plugin)
    results.append(CheckResult(
        "hookimpls marked", not unmarked,
        f"{', '.join(unmarked)} not decorated with @ezpz.hookimpl: pluggy ignores unmarked functions"
        if unmarked else f"{len(impls)} hook implementation(s)",
    ))
    results.append(_check_specs(t, impls))
    wrappers = [i.hook for i in impls if i.opts.get("hookwrapper") or i.opts.get("wrapper")]
    results.append(CheckResult(
        "no hook wrappers", not wrappers,
        f"{', '.join(wrappers)}: ezpz calls each plugin on its own and quarantines wrappers" if wrappers else "",
    ))
    if build is None:
        from ezpz.probes.torch_build import probe_torch_build

        build = probe_torch_build()
    env = dict(os.environ if environ is None else environ)
    results += _host_checks(t, build, env)
    caller = _Caller([i for i in impls if i.hook in HOOK_RETURNS])
    cross = _exercise(caller, t.name, build, env, candidates)
    results += caller.results + cross
    if isolated_import:
        results.append(_isolated_import(t.module, sdk_modules, allow_imports))
    return ConformanceReport(plugin=t.name, target=t.target, results=tuple(results))


def assert_conformant(plugin: object | str, **kwargs: Any) -> ConformanceReport:
    """:func:`check_plugin`, raising ``AssertionError`` listing every failed check; returns the report."""
    report = check_plugin(plugin, **kwargs)
    if not report.passed:
        failed = "\n".join(f"  FAIL {r.name}: {r.detail}" for r in report.failures)
        raise AssertionError(f"plugin {report.plugin!r} ({report.target}) is not conformant:\n{failed}")
    return report
