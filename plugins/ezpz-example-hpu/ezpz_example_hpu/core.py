"""The example plugin's knowledge: facts, probe and pure policies for the ``hpu`` device.

:mod:`ezpz_example_hpu.plugin` (the module the entry point names) holds only
the hooks, and imports this module inside them. Building the attrs class
below and importing the ezpz records costs a little at import time, and
ezpz imports every installed plugin whenever ``import ezpz`` runs, on every
rank; keeping it here means that cost is paid only when a hook first runs.

Read it in three parts: the frozen facts the probe records, the probe (the
only code that looks at the world), and the pure functions of the facts
that the hooks turn into answers.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from typing import Literal

from attrs import field, frozen

from ezpz.compiling import CompileOption
from ezpz.decisions import BackendOption, PrecisionOption
from ezpz.errors import ConfigError
from ezpz.facts import DeviceCandidate, TorchBuild
from ezpz.plugin_kit import vendor_then_gloo

__all__ = [
    "DEVICE_TYPE",
    "HCCL_MODULE",
    "PRIORITY",
    "SIMULATE_VAR",
    "VENDOR",
    "VISIBLE_VAR",
    "HpuFacts",
    "backend_options",
    "compile_options",
    "device_label",
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


# -- facts: what the probe saw, frozen -------------------------------------------------


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    """attrs converter with a typed signature (``converter=tuple`` leaves a type checker guessing)."""
    return tuple(values)


@frozen(kw_only=True)
class HpuFacts:
    """Everything the later hooks need to know about the device, recorded once by the probe.

    Tests build these directly to exercise the pure functions below, just as
    a test for a real vendor plugin feeds facts recorded on real hardware.
    """

    source: Literal["sdk", "simulated"]
    count: int
    names: tuple[str, ...] = field(default=(), converter=_strings)
    module_ids: tuple[str, ...] = field(default=(), converter=_strings)
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
        hccl = importlib.util.find_spec(HCCL_MODULE) is not None  # present, not imported: see plugin.ezpz_before_init
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
    # Your collectives first, gloo as the fallback: the kit builds the list every device plugin uses.
    gloo = ("simulated device: tensors live on the CPU, so gloo carries the collectives" if facts.simulated
            else "gloo moves CPU tensors only: a fallback for host-side collectives, not hpu tensors")
    return vendor_then_gloo(build, hccl, gloo_reason=gloo)


def precision_options(facts: HpuFacts) -> list[PrecisionOption]:
    """Low-precision dtypes in preference order for ``EZPZ_PRECISION=auto``."""
    return [
        PrecisionOption(dtype="bf16", supported=True,
                        reason="Gaudi's matrix engines compute bf16 natively; bf16 is Habana's recommended autocast dtype"),
        PrecisionOption(dtype="fp16", supported=False,
                        reason="this example plugin offers bf16 only for hpu autocast"),
    ]


def compile_options(facts: HpuFacts) -> list[CompileOption]:
    """``torch.compile`` backends in preference order, each with why it does (not) work on the device."""
    return [
        CompileOption(backend="inductor", available=False,
                      reason="TorchInductor has no hpu code generator; Habana's own compiler is the 'hpu_backend' "
                             "that habana_frameworks registers with torch.compile"),
        CompileOption(backend="aot_eager", available=not facts.simulated,
                      reason="TorchDynamo and AOTAutograd trace the model; the graph runs on the hpu kernels"
                      if not facts.simulated else "a simulated device has no kernels to run a traced graph on"),
        CompileOption(backend="none", available=True, reason="not compiling: the model runs eagerly"),
    ]


def device_label(facts: HpuFacts) -> str:
    """How the device is named in reasons and errors."""
    return "hpu (simulated)" if facts.simulated else "hpu"
