"""Example ezpz plugin for a Gaudi-style accelerator: device type ``hpu``, collectives ``hccl``.

Read this package as the plugin-author tutorial. A device plugin answers
five questions for its device, each in one hook:

1. ``ezpz_probe_devices``: is my device here, how many, and if not, why not?
2. ``ezpz_select_backend``: which collective backend for my device?
3. ``ezpz_amp_policy``: which autocast dtype, grad scaler and TF32 setting?
4. ``ezpz_profiling``: which profiler activities and range markers?
5. ``ezpz_compile_policy``: which ``torch.compile`` backend, and why not the others?

and may prepare the process just before ``init_process_group`` in
``ezpz_before_init``. It does not implement ``ezpz_step_boundary`` (the device
is eager), ``ezpz_failure_signatures`` (no runtime texts to recognise here),
``ezpz_detect_launch_env`` (launchers are not a device's business) or
``ezpz_after_setup`` (nothing to observe here).

Where the device comes from, in order:

* the real SDK: when ``habana_frameworks.torch.hpu`` imports, it says how many
  Gaudi devices are visible;
* otherwise a *teaching device*, opt-in: ``EZPZ_EXAMPLE_HPU_SIMULATE=<count>``
  pretends ``count`` devices exist, so that ``ezpz doctor`` and
  ``ezpz.hooks.plan()`` show this plugin's decisions on any laptop. A
  simulated device is for planning only: ``setup()`` on it fails because this
  torch has no ``hpu`` runtime;
* neither: the probe rejects cleanly with "habana_frameworks not installed".

The plugin is two modules. :mod:`ezpz_example_hpu.core` holds what the
plugin knows: the facts the probe records, the probe, and pure policies.
This module, the one the entry point names, holds only the hooks: thin glue
from ezpz's questions to the functions in ``core``. Read this docstring, then
``core.py``, then the hooks below.

Rules every plugin follows, and this one shows:

* Keep the entry-point module cheap to import: ezpz imports every installed
  plugin whenever ``import ezpz`` runs, on every rank, on machines without
  your hardware. This module imports only the standard library and
  ``ezpz.hookimpl`` at module level; ``core`` (its attrs class, ezpz's
  records) and the vendor SDK are imported inside hook bodies, so
  ``import ezpz`` stays fast and works on machines without the SDK.
* Keep the impure part small: :func:`~ezpz_example_hpu.core.read_sdk` and
  :func:`~ezpz_example_hpu.core.read_simulation` look at the world and return
  frozen facts (:class:`~ezpz_example_hpu.core.HpuFacts`); everything else is
  a pure function of those facts, testable with recorded ones.
* Answer only for your own device: later hooks get their facts from
  :func:`ezpz.plugin_kit.facts_if_ours` and return None when it has none.
* Every answer carries a reason a user can read in ``ezpz doctor``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ezpz import hookimpl

# Everything else is imported inside the hooks, so that `import ezpz` (which imports this module) stays cheap.
if TYPE_CHECKING:  # names for the annotations only: with `from __future__ import annotations` they stay strings
    from collections.abc import Mapping

    from ezpz.compiling import CompilePolicy
    from ezpz.decisions import AmpPolicy, BackendChoice, LifecycleAction, ProfilingSupport, SetupPlan
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild

__all__ = [
    "ezpz_amp_policy",
    "ezpz_before_init",
    "ezpz_compile_policy",
    "ezpz_probe_devices",
    "ezpz_profiling",
    "ezpz_select_backend",
]

#: This plugin's facts record, by path: :func:`ezpz.plugin_kit.facts_if_ours` never imports it to ask.
FACTS = "ezpz_example_hpu.core:HpuFacts"


# -- the hooks: thin glue from ezpz's questions to the functions in core.py ---------------------


#: What the quick "not here" answer below says, before ``core`` is imported; the plugin's tests check each
#: against ``core`` (DEVICE_TYPE, VENDOR, SIMULATE_VAR) and the answer against the full probe's.
_DEVICE, _VENDOR, _SIMULATE_VAR, _SDK = "hpu", "habana", "EZPZ_EXAMPLE_HPU_SIMULATE", "habana_frameworks"


def _sdk_absent(environ: Mapping[str, str]) -> bool:
    """Neither the SDK (not imported, not installed) nor the simulation: the probe can answer without ``core``.

    A plugin installed on a machine without its device should cost what asking it costs: one lookup of the
    SDK's package, not the import of its facts module (an attrs record, ezpz's policies) on every ``setup()``.
    """
    import importlib.util
    import sys

    if environ.get(_SIMULATE_VAR, "").strip() not in ("", "0") or _SDK in sys.modules:
        return False
    try:
        return importlib.util.find_spec(_SDK) is None
    except (ImportError, ValueError):  # a broken install: let read_sdk say what is wrong with it
        return False


def _not_installed() -> ProbeReport:
    from ezpz.facts import ProbeReport

    return ProbeReport.rejected(
        _DEVICE, _VENDOR, f"habana_frameworks not installed (set {_SIMULATE_VAR}=<count> for a teaching device)"
    )


@hookimpl
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport:
    """Offer the hpu device from the SDK or the simulation; otherwise say why not."""
    if _sdk_absent(environ):
        return _not_installed()  # the answer below, without importing core
    from ezpz.facts import ProbeReport
    from ezpz_example_hpu.core import DEVICE_TYPE, VENDOR, hpu_candidate, read_sdk, read_simulation

    found = read_sdk(environ)
    if found is None:
        found = read_simulation(environ)
    if found is None:
        return _not_installed()
    if isinstance(found, str):
        return ProbeReport.rejected(DEVICE_TYPE, VENDOR, found)
    return ProbeReport.found(hpu_candidate(found, environ))


@hookimpl
def ezpz_select_backend(
    device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None
) -> BackendChoice | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.policies import choose_backend
    from ezpz_example_hpu.core import backend_options, device_label

    # choose_backend honours EZPZ_BACKEND/TORCH_BACKEND the same way for every vendor.
    return choose_backend(backend_options(facts, build), requested=requested, device=device_label(facts))


@hookimpl
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.policies import choose_precision
    from ezpz_example_hpu.core import device_label, precision_options

    return choose_precision(
        precision_options(facts), requested=requested, device=device_label(facts), tf32=False,
        tf32_reason="TF32 is a CUDA matmul setting; Gaudi's fp32 math modes are not managed by this example",
    )


@hookimpl
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:  # imports nothing: another vendor's device costs nothing here
        return None  # not our device: the plugin that offered it answers
    from ezpz.decisions import ProfilingSupport

    return ProfilingSupport(
        activities=("CPU",), marker=None,
        reason="CPU profiler activity only: this example does not wire up Habana's profiler; "
               "Runtime.range() still records torch record_function ranges under the profiler",
    )


@hookimpl
def ezpz_compile_policy(device: DeviceCandidate, build: TorchBuild) -> CompilePolicy | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.compiling import choose_compile
    from ezpz_example_hpu.core import compile_options, device_label

    return choose_compile(compile_options(facts), device=device_label(facts))


@hookimpl
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """Import the hccl bindings only when hccl was chosen, and say so in the trace."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(plan.device.candidate, FACTS)  # imports nothing for another vendor's device
    if facts is None:
        return None
    from ezpz.plugin_kit import get_logger
    from ezpz.decisions import LifecycleAction
    from ezpz_example_hpu.core import HCCL_MODULE, SIMULATE_VAR

    if plan.backend.name == "hccl":
        # Importing this module registers "hccl" with torch.distributed. It reads
        # the launcher's rank variables, so it belongs here: after ezpz decided
        # the layout, before init_process_group.
        import habana_frameworks.torch.distributed.hccl  # noqa: F401

        return LifecycleAction(reason=f"imported {HCCL_MODULE} to register the hccl backend")
    if facts.simulated:
        get_logger(__name__).debug("simulated_device", note="planning only")  # configures no logging
        return LifecycleAction(
            reason=f"simulated hpu device ({SIMULATE_VAR}): nothing to import; collectives would use "
                   f"{plan.backend.name} on the CPU"
        )
    return LifecycleAction(reason=f"hpu with {plan.backend.name}: no vendor bindings to import")


# -- names the tests import from here ------------------------------------------------------------
# They live in core.py. A module-level __getattr__ (PEP 562) runs only for a name this
# module does not define, so it forwards these on first use without importing core at
# `import ezpz`. There is deliberately no __dir__: pluggy and the conformance
# kit look for hooks through dir(), which must not import core either.

_FROM_CORE = frozenset({"HCCL_MODULE", "SIMULATE_VAR", "VISIBLE_VAR", "HpuFacts", "backend_options", "hpu_candidate"})


def __getattr__(name: str) -> Any:
    if name in _FROM_CORE:
        from ezpz_example_hpu import core

        return getattr(core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
