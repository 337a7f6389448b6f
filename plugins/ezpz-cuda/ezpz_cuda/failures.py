"""NVIDIA failure knowledge: NCCL/CUDA failure texts, and the hang budget of torch's NCCL watchdog.

Pure data and pure functions; the plugin hooks hand them to the core.

Hang budget: torch's ``ProcessGroupNCCL`` times each collective out after the
process-group timeout (``EZPZ_TIMEOUT``, passed to ``init_process_group``);
``TORCH_NCCL_ASYNC_ERROR_HANDLING=3`` makes its watchdog take the process down
on that timeout (instead of leaving it hung), and the heartbeat monitor
(``TORCH_NCCL_ENABLE_MONITORING=1``) aborts a process whose watchdog itself is
stuck (in a CUDA/NCCL call that never returns) after
``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC`` (torch's default: 480 s), which ezpz
derives from ``EZPZ_TIMEOUT``. Source: PyTorch, "ProcessGroupNCCL Environment
Variables", https://docs.pytorch.org/docs/stable/torch_nccl_environment_variables.html
"""

from __future__ import annotations

from ezpz.plugin_kit import HEARTBEAT_FLOOR_S, nccl_watchdog_env  # re-exported: torch's, not vendor's

__all__ = ["HEARTBEAT_FLOOR_S", "SIGNATURES", "nccl_watchdog_env"]


#: (pattern, kind, reason, blames_host, source)
SIGNATURES = (
    (r"Watchdog caught collective operation timeout", "timeout",
     "torch's NCCL watchdog: a collective ran past the process-group timeout (a peer did not arrive)", False,
     "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (checkTimeout)"),
    (r"NCCL error.*unhandled system error|ncclSystemError", "lost_peer",
     "NCCL: a system call failed (network or a peer's host; NCCL_DEBUG=INFO names the device)", False,
     "NCCL documentation, Troubleshooting: ncclSystemError"),
    (r"NCCL error.*remote process exited|ncclRemoteError", "lost_peer",
     "NCCL: a remote rank exited or its connection broke", False, "NCCL documentation, ncclResult_t: ncclRemoteError"),
    (r"\bXid\b", "lost_peer",
     "an NVIDIA Xid (driver-reported GPU error): the GPU on this host failed, a retry should avoid the host", True,
     "NVIDIA, Xid Errors (docs.nvidia.com/deploy/xid-errors)"),
    (r"uncorrectable ECC error", "lost_peer",
     "an uncorrectable ECC error: this host's GPU memory is faulty", True, "CUDA runtime: cudaErrorECCUncorrectable"),
    (r"CUDA out of memory|CUDA error: out of memory", "oom",
     "the CUDA caching allocator could not allocate: the model or batch does not fit", False,
     "torch/csrc/cuda caching allocator (torch.OutOfMemoryError text)"),
)
