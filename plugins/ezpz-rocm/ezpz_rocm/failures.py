"""AMD failure knowledge: RCCL/HIP failure texts, and the hang budget of torch's NCCL watchdog over RCCL.

Pure data and pure functions; the plugin hooks hand them to the core.

On ROCm builds torch's ``ProcessGroupNCCL`` is compiled against RCCL and reads
the same ``TORCH_NCCL_*`` variables as on CUDA: each collective times out after
the process-group timeout (``EZPZ_TIMEOUT``); ``TORCH_NCCL_ASYNC_ERROR_HANDLING=3``
takes the process down on that timeout; the heartbeat monitor
(``TORCH_NCCL_ENABLE_MONITORING=1``) aborts a process whose watchdog is stuck in
a HIP/RCCL call after ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``. Sources: PyTorch,
"ProcessGroupNCCL Environment Variables",
https://docs.pytorch.org/docs/stable/torch_nccl_environment_variables.html ; ROCm
documentation, "RCCL environment variables" (RCCL keeps NCCL's names).
"""

from __future__ import annotations

from ezpz.plugin_kit import HEARTBEAT_FLOOR_S, nccl_watchdog_env  # re-exported: torch's, not vendor's

__all__ = ["HEARTBEAT_FLOOR_S", "SIGNATURES", "nccl_watchdog_env"]


#: (pattern, kind, reason, blames_host, source)
SIGNATURES = (
    (r"Watchdog caught collective operation timeout", "timeout",
     "torch's NCCL watchdog (over RCCL): a collective ran past the process-group timeout", False,
     "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (checkTimeout)"),
    (r"NCCL error.*unhandled system error|ncclSystemError", "lost_peer",
     "RCCL: a system call failed (network or a peer's host; NCCL_DEBUG=INFO names the device)", False,
     "RCCL keeps NCCL's result codes: ncclSystemError"),
    (r"NCCL error.*remote process exited|ncclRemoteError", "lost_peer",
     "RCCL: a remote rank exited or its connection broke", False, "RCCL/NCCL ncclResult_t: ncclRemoteError"),
    (r"HW Exception by GPU node", "lost_peer",
     "the ROCm runtime reported a hardware exception (e.g. GPU hang): this host's GPU failed, avoid the host", True,
     "ROCr runtime (ROCR-Runtime) hardware exception message"),
    (r"HIP out of memory|hipErrorOutOfMemory", "oom",
     "the HIP caching allocator could not allocate: the model or batch does not fit", False,
     "torch caching allocator on ROCm (torch.OutOfMemoryError text), HIP hipErrorOutOfMemory"),
)
