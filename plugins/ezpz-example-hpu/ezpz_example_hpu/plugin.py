"""Example ezpz plugin for a Gaudi-style accelerator: device type ``hpu``, collectives ``hccl``.

Read this file top to bottom as the plugin-author tutorial. A device plugin
answers four questions for its device, each in one hook:

1. ``ezpz_probe_devices``: is my device here, how many, and if not, why not?
2. ``ezpz_select_backend``: which collective backend for my device?
3. ``ezpz_amp_policy``: which autocast dtype, grad scaler and TF32 setting?
4. ``ezpz_profiling``: which profiler activities and range markers?

and may prepare the process just before ``init_process_group`` in
``ezpz_before_init``. It does not implement ``ezpz_detect_launch_env``
(launchers are not a device's business) or ``ezpz_after_setup`` (nothing to
observe here).

Where the device comes from, in order:

* the real SDK: when ``habana_frameworks.torch.hpu`` imports, it says how many
  Gaudi devices are visible;
* otherwise a *teaching device*, opt-in: ``EZPZ_EXAMPLE_HPU_SIMULATE=<count>``
  pretends ``count`` devices exist, so that ``ezpz doctor`` and
  ``ezpz.hooks.plan()`` show this plugin's decisions on any laptop. A
  simulated device is for planning only: ``setup()`` on it fails because this
  torch has no ``hpu`` runtime;
* neither: the probe rejects cleanly with "habana_frameworks not installed".

Rules every plugin follows, and this one shows:

* Import only the standard library and ezpz at module level. The vendor SDK
  is imported inside hook bodies, so ``import ezpz`` stays fast and works on
  machines without the SDK.
* Keep the impure part small: :func:`read_sdk` and :func:`read_simulation`
  look at the world and return frozen facts (:class:`HpuFacts`); everything
  else is a pure function of those facts, testable with recorded ones.
* Answer only for your own device: later hooks check
  ``isinstance(device.facts, HpuFacts)`` and return None otherwise.
* Every answer carries a reason a user can read in ``ezpz doctor``.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from typing import Literal

from attrs import field, frozen

from ezpz import hookimpl
from ezpz.decisions import AmpPolicy, BackendChoice, BackendOption, LifecycleAction, PrecisionOption, ProfilingSupport, SetupPlan
from ezpz.errors import ConfigError
from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild
from ezpz.policies import choose_backend, choose_precision

__all__ = [
    "DEVICE_TYPE",
    "PRIORITY",
    "SIMULATE_VAR",
    "VISIBLE_VAR",
    "HpuFacts",
    "backend_options",
    "hpu_candidate",
    "precision_options",
    "read_sdk",
    "read_simulation",
]

DEVICE_TYPE = "hpu"
VENDOR = "habana"

# Candidates are ranked by priority (higher wins). The built-ins use 0 (cpu)
# and 50 (mps); the discrete-GPU plugins use 100. 110 means: when this probe
# reports a device, it wins device selection even beside a GPU. Users can
# still pick another device with EZPZ_DEVICE=cuda.
PRIORITY = 110

SIMULATE_VAR = "EZPZ_EXAMPLE_HPU_SIMULATE"
# Gaudi's visible-devices variable: a comma-separated list of module IDs; the
# process at local rank i uses the i-th listed module.
VISIBLE_VAR = "HABANA_VISIBLE_MODULES"
HCCL_MODULE = "habana_frameworks.torch.distributed.hccl"

_log = logging.getLogger(__name__)  # never configured here: the application decides where logs go


# -- facts: what the probe saw, frozen -------------------------------------------------


@frozen(kw_only=True)
class HpuFacts:
    """Everything the later hooks need to know about the device, recorded once by the probe.

    Tests build these directly to exercise the pure functions below, just as
    a test for a real vendor plugin feeds facts recorded on real hardware.
    """

    source: Literal["sdk", "simulated"]
    count: int
    names: tuple[str, ...] = field(default=(), converter=tuple)
    module_ids: tuple[str, ...] = field(default=(), converter=tuple)
    hccl_importable: bool = False

    @property
    def simulated(self) -> bool:
        return self.source == "simulated"


def _visible_module_ids(environ: Mapping[str, str], all_ids: tuple[str, ...]) -> tuple[str, ...]:
    """Apply ``HABANA_VISIBLE_MODULES`` (if set) to the module IDs present, keeping its order."""
    raw = environ.get(VISIBLE_VAR, "").strip()
    if not raw:
        return all_ids
    listed = [part.strip() for part in raw.split(",") if part.strip()]
    return tuple(i for i in listed if i in all_ids)


# -- probing: the only code that looks at the world ----------------------------------------


def read_sdk(environ: Mapping[str, str]) -> HpuFacts | str | None:
    """Ask the real Habana SDK: facts, a rejection reason, or None when it is not installed.

    The import happens here, inside a function, never at module level. It
    loads torch and the Habana bridge, which is acceptable in a probe; it
    does not create a device context.
    """
    try:
        import habana_frameworks.torch.hpu as hthpu  # the vendor SDK: imported only when probing
    except ImportError:
        return None
    except Exception as err:  # a broken SDK install is a rejection, not a crash
        return f"habana_frameworks is installed but failed to import ({type(err).__name__}: {err})"
    if not hthpu.is_available():
        return "habana_frameworks is installed but no Gaudi device is visible (check hl-smi and HABANA_VISIBLE_MODULES)"
    count = int(hthpu.device_count())
    ids = _visible_module_ids(environ, tuple(str(i) for i in range(count)))
    try:
        hccl = importlib.util.find_spec(HCCL_MODULE) is not None  # present, not imported: see ezpz_before_init
    except ImportError:
        hccl = False
    return HpuFacts(source="sdk", count=count, names=(str(hthpu.get_device_name()),) * count, module_ids=ids,
                    hccl_importable=hccl)


def read_simulation(environ: Mapping[str, str]) -> HpuFacts | str | None:
    """The opt-in teaching device: facts, a rejection reason, or None when simulation is off.

    A malformed value is the user's mistake, so it raises
    :class:`~ezpz.errors.ConfigError` naming the variable (ezpz shows it to
    the user instead of quarantining the plugin).
    """
    raw = environ.get(SIMULATE_VAR, "").strip()
    if raw in ("", "0"):
        return None
    if not raw.isdigit():
        raise ConfigError(
            name=SIMULATE_VAR, value=raw, expected="a whole number of simulated devices (0 or unset: off)",
            fix=f"set {SIMULATE_VAR}=2 to simulate two devices, or unset it",
        )
    ids = _visible_module_ids(environ, tuple(str(i) for i in range(int(raw))))
    if not ids:
        return f"{VISIBLE_VAR}={environ.get(VISIBLE_VAR)!r} hides all {raw} simulated device(s)"
    return HpuFacts(source="simulated", count=len(ids), names=("Gaudi (simulated)",) * len(ids), module_ids=ids)


# -- pure functions of the facts: the plugin's knowledge, unit-testable anywhere ------------


def hpu_candidate(facts: HpuFacts, environ: Mapping[str, str] | None = None) -> DeviceCandidate:
    """The device this plugin offers, with a reason the user can read."""
    if facts.simulated:
        raw = (environ or {}).get(SIMULATE_VAR, str(facts.count))
        reason = (f"{facts.count} simulated Gaudi device(s) from {SIMULATE_VAR}={raw} "
                  "(a teaching device: plan() and ezpz doctor only; nothing runs on it)")
    else:
        reason = f"{facts.count} Gaudi device(s) reported by habana_frameworks.torch.hpu"
    return DeviceCandidate(
        device_type=DEVICE_TYPE, vendor=VENDOR, reason=reason, count=facts.count, priority=PRIORITY,
        names=facts.names, physical_ids=facts.module_ids, visible_devices_var=VISIBLE_VAR,
        details={"source": facts.source, "hccl": "importable" if facts.hccl_importable else "absent"},
        facts=facts,  # handed back to this plugin's later hooks
    )


def backend_options(facts: HpuFacts, build: TorchBuild) -> list[BackendOption]:
    """Collective backends for the device, in preference order, each with why it is (un)available."""
    if facts.hccl_importable and not facts.simulated:
        hccl = BackendOption(name="hccl", available=True,
                             reason="HCCL, Habana's collective library (registered by importing "
                                    f"{HCCL_MODULE} just before the process group is created)")
    elif facts.simulated:
        hccl = BackendOption(name="hccl", available=False,
                             reason="hccl needs the real habana_frameworks SDK; this device is simulated")
    else:
        hccl = BackendOption(name="hccl", available=False, reason=f"{HCCL_MODULE} is not installed")
    has_gloo = "gloo" in build.distributed_backends
    if not has_gloo:
        gloo_reason = "torch built without gloo"
    elif facts.simulated:
        gloo_reason = "simulated device: tensors live on the CPU, so gloo carries the collectives"
    else:
        gloo_reason = "gloo moves CPU tensors only: a fallback for host-side collectives, not hpu tensors"
    return [hccl, BackendOption(name="gloo", available=has_gloo, reason=gloo_reason)]


def precision_options(facts: HpuFacts) -> list[PrecisionOption]:
    """Low-precision dtypes in preference order for ``EZPZ_PRECISION=auto``."""
    return [
        PrecisionOption(dtype="bf16", supported=True,
                        reason="Gaudi's matrix engines compute bf16 natively; bf16 is Habana's recommended autocast dtype"),
        PrecisionOption(dtype="fp16", supported=False,
                        reason="this example plugin offers bf16 only for hpu autocast"),
    ]


def _label(facts: HpuFacts) -> str:
    return "hpu (simulated)" if facts.simulated else "hpu"


# -- the hooks: thin glue from ezpz's questions to the functions above ------------------------


@hookimpl
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport:
    """Offer the hpu device from the SDK or the simulation; otherwise say why not."""
    found = read_sdk(environ)
    if found is None:
        found = read_simulation(environ)
    if found is None:
        return ProbeReport.rejected(
            DEVICE_TYPE, VENDOR, f"habana_frameworks not installed (set {SIMULATE_VAR}=<count> for a teaching device)"
        )
    if isinstance(found, str):
        return ProbeReport.rejected(DEVICE_TYPE, VENDOR, found)
    return ProbeReport.found(hpu_candidate(found, environ))


@hookimpl
def ezpz_select_backend(
    device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None
) -> BackendChoice | None:
    if not isinstance(device.facts, HpuFacts):
        return None  # not our device: let the plugin that offered it answer
    # choose_backend honours EZPZ_BACKEND/TORCH_BACKEND the same way for every vendor.
    return choose_backend(backend_options(device.facts, build), requested=requested, device=_label(device.facts))


@hookimpl
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    if not isinstance(device.facts, HpuFacts):
        return None
    return choose_precision(
        precision_options(device.facts), requested=requested, device=_label(device.facts), tf32=False,
        tf32_reason="TF32 is a CUDA matmul setting; Gaudi's fp32 math modes are not managed by this example",
    )


@hookimpl
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    if not isinstance(device.facts, HpuFacts):
        return None
    return ProfilingSupport(
        activities=("CPU",), marker=None,
        reason="CPU profiler activity only: this example does not wire up Habana's profiler; "
               "Runtime.range() still records torch record_function ranges under the profiler",
    )


@hookimpl
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """Import the hccl bindings only when hccl was chosen, and say so in the trace."""
    facts = plan.device.candidate.facts
    if not isinstance(facts, HpuFacts):
        return None
    if plan.backend.name == "hccl":
        # Importing this module registers "hccl" with torch.distributed. It reads
        # the launcher's rank variables, so it belongs here: after ezpz decided
        # the layout, before init_process_group.
        import habana_frameworks.torch.distributed.hccl  # noqa: F401

        return LifecycleAction(reason=f"imported {HCCL_MODULE} to register the hccl backend")
    if facts.simulated:
        _log.debug("simulated hpu device: planning only")
        return LifecycleAction(
            reason=f"simulated hpu device ({SIMULATE_VAR}): nothing to import; collectives would use "
                   f"{plan.backend.name} on the CPU"
        )
    return LifecycleAction(reason=f"hpu with {plan.backend.name}: no vendor bindings to import")
