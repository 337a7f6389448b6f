"""Intel GPU failure knowledge: Level Zero / Unified Runtime failure texts, and what bounds an XCCL hang.

Pure data and pure functions; the plugin hooks hand them to the core.

Hang budget: neither torch's ``xccl`` backend nor the oneCCL bindings (``ccl``)
document a collective watchdog or an environment variable that makes a hung
collective fail (the original ezpz's Aurora postmortems: "XCCL hangs ignore
timeouts", which is why it grew an idle-output watchdog). So this plugin sets
no variables and says so; the bound on an XPU hang is ``ezpz launch --timeout``
(idle output) and the rendezvous timeout at ``setup()``.
"""

from __future__ import annotations

__all__ = ["HANG_BUDGET_REASON", "SIGNATURES"]

HANG_BUDGET_REASON = (
    "XPU hang budget: no XCCL/oneCCL watchdog honours the process-group timeout, so a hung collective is bounded "
    "only by `ezpz launch --timeout` (idle output, exit 124); set it for long jobs")

#: (pattern, kind, reason, blames_host, source)
SIGNATURES = (
    (r"UR_RESULT_ERROR_OUT_OF_RESOURCES", "oom",
     "Level Zero (Unified Runtime) ran out of device resources", False,
     "Unified Runtime ur_result_t; listed among crash patterns by the original ezpz's Aurora failover (failover.sh)"),
    (r"UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|XPU out of memory", "oom",
     "the XPU ran out of device memory: the model or batch does not fit", False,
     "Unified Runtime ur_result_t; torch XPU caching allocator (torch.OutOfMemoryError text)"),
    (r"UR_RESULT_ERROR_DEVICE_LOST", "lost_peer",
     "Level Zero lost the device: this host's GPU failed, a retry should avoid the host", True,
     "Unified Runtime ur_result_t: UR_RESULT_ERROR_DEVICE_LOST"),
)
