"""Typed facade over the hooks: callers never touch ``pm.hook.x(...)``.

Each plugin's implementation is called on its own so that one plugin raising
or returning the wrong type is quarantined while the others keep answering.
A :class:`~ezpz.errors.ConfigError` raised by a plugin is the user's problem,
not the plugin's, and propagates.

Every hook call runs on the hook worker under ``EZPZ_HOOK_TIMEOUT``
(:mod:`ezpz.plugin_host.deadline`); one that runs past it raises
:class:`~ezpz.errors.PluginTimeoutError` and its plugin is quarantined.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ezpz.primitives.logger import get_logger
from ezpz.errors import ConfigError, PluginError, PluginTimeoutError
from ezpz.hookspecs import return_type
from ezpz.plugin_host.deadline import Call, HookTimeout, called, calling, run_watched

if TYPE_CHECKING:
    from ezpz.compiling import CompilePolicy
    from ezpz.cuda_answers import CudaAnswers
    from ezpz.failures.signatures import FailureSignature
    from ezpz.decisions import (AmpPolicy, BackendChoice, LifecycleAction, MeshSupport, ProfilingSupport, SetupPlan,
                                StepBoundary)
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild
    from ezpz.plugin_host.host import PluginHost
    from ezpz.runtime import Runtime

T = TypeVar("T")
_NONE = type(None)


class Hooks:
    """One typed method per hook spec."""

    def __init__(self, host: PluginHost) -> None:
        self.host = host
        self._log = get_logger("ezpz.hooks")

    def _call(self, hook: str, kwargs: Mapping[str, Any], *, first: bool) -> list[tuple[str, Any]]:
        """Call every plugin's ``hook`` on the hook worker, under the deadline; each answer must be of the type
        :data:`ezpz.hookspecs.RETURNS` states (or None)."""
        expect = return_type(hook) or object
        return self.watched(lambda: self._call_plugins(hook, kwargs, expect, first=first))

    def watched(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (which calls hooks) on the hook worker: one hand-off for all its hook calls.

        A hook inside it that runs past ``EZPZ_HOOK_TIMEOUT`` raises
        :class:`~ezpz.errors.PluginTimeoutError` here and its plugin is quarantined.
        """
        try:
            return run_watched(fn, self.host.settings.hook_timeout_s, self._slow)
        except HookTimeout as stuck:
            raise self._timed_out(stuck) from None

    def _dist(self, plugin: str) -> tuple[str, str]:
        record = self.host.records.get(plugin)
        return record.distribution if record else ("unknown", "unknown")

    def _slow(self, call: Call, elapsed: float) -> None:
        dist, version = self._dist(call.plugin)
        self._log.warning("hook_slow", plugin=call.plugin, distribution=dist, version=version, hook=call.hook,
                          elapsed_s=round(elapsed, 1), deadline_s=self.host.settings.hook_timeout_s,
                          fix=f"if it never returns, set EZPZ_DISABLE_PLUGINS={call.plugin}")

    def _timed_out(self, stuck: HookTimeout) -> PluginTimeoutError:
        """Quarantine the stuck plugin (its thread is abandoned) and build the error that names it."""
        name, hook = stuck.call.plugin, stuck.call.hook
        dist, version = self._dist(name)
        facts: dict[str, Any] = {"plugin": name, "distribution": dist, "version": version, "hook": hook, "timeout_s": stuck.timeout_s}
        try:
            self.host.quarantine(name, PluginTimeoutError(**facts, where=stuck.where), stage=f"hook {hook}")
        except PluginError:  # strict mode: the timeout itself is the error to raise
            pass
        return PluginTimeoutError(**facts, where=stuck.where, stack=stuck.stack)

    def _call_plugins(self, hook: str, kwargs: Mapping[str, Any], expect: type | tuple[type, ...], *,
                      first: bool) -> list[tuple[str, Any]]:
        caller = getattr(self.host.pm.hook, hook)
        results: list[tuple[str, Any]] = []
        for impl in reversed(caller.get_hookimpls()):  # pluggy's call order
            name = impl.plugin_name
            if self.host.pm.get_plugin(name) is None:  # quarantined earlier in this call
                continue
            if impl.hookwrapper or impl.wrapper:
                self.host.quarantine(name, TypeError(f"{hook}: hook wrappers are not supported by ezpz"), stage=f"hook {hook}")
                continue
            args = {a: kwargs[a] for a in impl.argnames}
            start = time.perf_counter()
            calling(hook, name)
            try:
                result = impl.function(**args)
            except (ConfigError, PluginError, KeyboardInterrupt):  # the user's input, strict mode, or Ctrl-C
                raise
            except BaseException as err:  # SystemExit, GeneratorExit ...: a plugin never ends the user's process
                self.host.quarantine(name, err, stage=f"hook {hook}")
                continue
            finally:
                called()
            if self.host.settings.trace:
                self._log.info("hook_call", hook=hook, plugin=name, result=type(result).__name__,
                               ms=round((time.perf_counter() - start) * 1e3, 3))
            if result is None:
                continue
            if not isinstance(result, expect):
                wanted = expect.__name__ if isinstance(expect, type) else " or ".join(t.__name__ for t in expect)
                self.host.quarantine(
                    name,
                    TypeError(f"{hook} returned {type(result).__name__} ({result!r:.100}), expected {wanted} or None"),
                    stage=f"hook {hook}",
                )
                continue
            results.append((name, result))
            if first:
                break
        return results

    def _first(self, hook: str, kwargs: Mapping[str, Any]) -> tuple[str, Any] | None:
        found = self._call(hook, kwargs, first=True)
        return found[0] if found else None

    def detect_launch_env(self, environ: Mapping[str, str]) -> tuple[str, LaunchEnv] | None:
        return self._first("ezpz_detect_launch_env", {"environ": environ})

    def probe_devices(self, build: TorchBuild, environ: Mapping[str, str]) -> list[tuple[str, ProbeReport]]:
        return self._call("ezpz_probe_devices", {"build": build, "environ": environ}, first=False)

    def select_backend(
        self, device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None
    ) -> tuple[str, BackendChoice] | None:
        return self._first("ezpz_select_backend", {"device": device, "build": build, "launch": launch,
                                                   "requested": requested})

    def amp_policy(self, device: DeviceCandidate, build: TorchBuild, requested: str) -> tuple[str, AmpPolicy] | None:
        return self._first("ezpz_amp_policy", {"device": device, "build": build, "requested": requested})

    def profiling(self, device: DeviceCandidate, build: TorchBuild) -> tuple[str, ProfilingSupport] | None:
        return self._first("ezpz_profiling", {"device": device, "build": build})

    def compile_policy(self, device: DeviceCandidate, build: TorchBuild) -> tuple[str, CompilePolicy] | None:
        return self._first("ezpz_compile_policy", {"device": device, "build": build})

    def step_boundary(self, device: DeviceCandidate, build: TorchBuild) -> tuple[str, StepBoundary] | None:
        return self._first("ezpz_step_boundary", {"device": device, "build": build})

    def mesh_support(self, device: DeviceCandidate, build: TorchBuild,
                     backend: str) -> tuple[str, MeshSupport] | None:
        return self._first("ezpz_mesh_support", {"device": device, "build": build, "backend": backend})

    def before_init(self, plan: SetupPlan) -> list[tuple[str, LifecycleAction]]:
        return self._call("ezpz_before_init", {"plan": plan}, first=False)

    def failure_signatures(self) -> list[FailureSignature]:
        """Every plugin's failure signatures, each stamped with its plugin; a list with a bad entry quarantines."""
        import attr

        from ezpz.failures.signatures import FailureSignature

        found: list[FailureSignature] = []
        for name, batch in self._call("ezpz_failure_signatures", {}, first=False):
            bad = next((s for s in batch if not isinstance(s, FailureSignature)), None)
            if bad is not None or len(batch) > 1000:
                why = f"an entry is {type(bad).__name__}" if bad is not None else f"{len(batch)} entries (max 1000)"
                self.host.quarantine(name, TypeError(f"ezpz_failure_signatures: {why}, expected FailureSignature"),
                                     stage="hook ezpz_failure_signatures")
                continue
            found.extend(attr.evolve(s, plugin=name) for s in batch)
        return found

    def cuda_answers(self, device: DeviceCandidate, build: TorchBuild, backend: str) -> tuple[str, CudaAnswers] | None:
        return self._first("ezpz_cuda_answers", {"device": device, "build": build, "backend": backend})

    def after_setup(self, runtime: Runtime) -> None:
        self._call("ezpz_after_setup", {"runtime": runtime}, first=False)
