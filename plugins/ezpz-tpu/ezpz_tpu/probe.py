"""The only code of this plugin that looks at the world: the environment and what is installed.

The probe never imports torch_xla: importing it loads the PJRT runtime's
library (seconds) and, without ``PJRT_DEVICE``, picks a runtime for the
process. It decides from the variables torch_xla itself reads
(``torch_xla/_internal/tpu.py`` and ``torch_xla/runtime.py`` in torch-xla
2.9.0) and from which packages are installed, so ``ezpz doctor`` stays fast
and a forked data-loader worker stays safe.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the facts (attrs records) are imported once torch_xla is known to be installed
    from ezpz_tpu.facts import Generation, TpuFacts

__all__ = ["DEVICE_TYPE", "PJRT_VAR", "VENDOR", "installed", "read_environment", "read_slice"]

DEVICE_TYPE = "xla"
VENDOR = "google"
PJRT_VAR = "PJRT_DEVICE"
#: The TPU VM's variables for a slice, as torch_xla reads them (torch_xla/_internal/tpu.py, torch-xla 2.9.0).
ACCELERATOR_VAR = "TPU_ACCELERATOR_TYPE"
WORKER_ID_VAR = "TPU_WORKER_ID"
WORKER_HOSTS_VAR = "TPU_WORKER_HOSTNAMES"
CPU_DEVICES_VAR = "CPU_NUM_DEVICES"

_TYPE = re.compile(r"^(?P<prefix>[a-z0-9]+?)-(?P<number>\d+)$")


def installed(name: str) -> bool:
    """Whether a top-level package is installed (found, not imported); a seam tests replace."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def read_slice(accelerator_type: str) -> tuple[Generation, int] | str:
    """``v5litepod-8`` -> (v5e, 8 chips in the slice), or why the value is not understood."""
    from ezpz_tpu.facts import GENERATIONS

    m = _TYPE.match(accelerator_type.strip().lower())
    if m is None:
        return (f"{ACCELERATOR_VAR}={accelerator_type!r} is not '<generation>-<number>' "
                "(for example v4-8, v5litepod-8, v5p-8, v6e-8)")
    for gen in GENERATIONS:
        if m["prefix"] == gen.type_prefix:
            return gen, gen.chips_in(int(m["number"]))
    known = ", ".join(g.type_prefix for g in GENERATIONS)
    return f"{ACCELERATOR_VAR}={accelerator_type!r}: generation {m['prefix']!r} has no recorded facts here (known: {known})"


def read_environment(
    environ: Mapping[str, str], found: Callable[[str], bool] = installed
) -> TpuFacts | str | None:
    """Facts, a rejection reason, or None when torch_xla is not installed (then nothing else is imported)."""
    if not found("torch_xla"):
        return None
    from ezpz_tpu.facts import TpuFacts

    raw = environ.get(PJRT_VAR, "").strip()
    if raw:
        pjrt, source = raw.split("_")[0].upper(), PJRT_VAR  # torch_xla reads "TPU_C_API" as TPU, likewise
    elif environ.get(ACCELERATOR_VAR, "").strip():
        pjrt, source = "TPU", ACCELERATOR_VAR
    elif found("libtpu"):
        pjrt, source = "TPU", "libtpu"
    else:
        pjrt, source = "CPU", "default"
    if pjrt == "CPU":
        count_raw = environ.get(CPU_DEVICES_VAR, "1").strip() or "1"
        count = int(count_raw) if count_raw.isdigit() and int(count_raw) > 0 else 1
        return TpuFacts(pjrt_device="CPU", source=source, count=count)
    if pjrt != "TPU":
        return (f"{PJRT_VAR}={raw!r}: this plugin drives TPUs and XLA's CPU runtime "
                "(PJRT_DEVICE=TPU or CPU); XLA on GPUs is not offered here")
    accel = environ.get(ACCELERATOR_VAR, "").strip()
    worker_raw = environ.get(WORKER_ID_VAR, "").strip()
    hosts = tuple(h for h in environ.get(WORKER_HOSTS_VAR, "").split(",") if h.strip())
    worker = int(worker_raw) if worker_raw.isdigit() else None
    if not accel:
        return TpuFacts(pjrt_device="TPU", source=source, count=1, worker_id=worker, worker_hostnames=hosts)
    parsed = read_slice(accel)
    if isinstance(parsed, str):
        return parsed
    gen, chips = parsed
    return TpuFacts(pjrt_device="TPU", source=source, count=gen.chips_on_this_host(chips), accelerator_type=accel,
                    generation=gen, slice_chips=chips, worker_id=worker, worker_hostnames=hosts)
