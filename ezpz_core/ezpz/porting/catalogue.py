"""What each CUDA-only API becomes in a portable ezpz script, and why: the data ``ezpz port`` rewrites by.

Pure data, no libcst and no torch. Keys are qualified names as written in the
script after its imports are resolved (``dist.init_process_group`` is
``torch.distributed.init_process_group``). Every entry says why, and the
report repeats that reason next to each line it touched. ``docs/cli.md``
(``ezpz port``) lists the same table for readers.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = [
    "AUTOCAST_CALLS", "DTYPE_PRECISIONS", "GRAD_SCALER_CALLS", "INIT_PROCESS_GROUP",
    "KEPT", "MEMORY_STATS", "NCCL_LITERAL", "RANK_VARIABLES", "REMOVED_CALLS", "Rule", "SIMPLE_CALLS",
    "TF32_FLAGS", "UNPORTABLE", "UNPORTABLE_MODULES", "is_cuda_api",
]


class Rule(NamedTuple):
    """One catalogue entry: what the call becomes (``None``: removed or kept) and why."""

    target: str | None
    why: str


#: A backend string that asks for NCCL (``'nccl'``, ``'cuda:nccl,cpu:gloo'``).
NCCL_LITERAL = re.compile(r"^[a-z0-9_:,]*nccl[a-z0-9_:,]*$")

DEVICE_WHY = ("setup() chose the device (EZPZ_DEVICE, the plugins' priority) and its index for this rank; "
              "'cuda' exists only on NVIDIA and AMD GPUs")
DEVICE_STR_WHY = DEVICE_WHY + "; str() keeps it a string as the script had it"
BACKEND_WHY = ("setup() chose the collective backend the device's plugin supports (gloo on CPU, the vendor's "
               "library on an accelerator); 'nccl' exists only with CUDA/ROCm")

#: Calls replaced by one ``rt`` call (arguments dropped: the runtime knows the device).
SIMPLE_CALLS: dict[str, Rule] = {
    "torch.cuda.synchronize": Rule("rt.synchronize()", "waits for the chosen device's queued work (a no-op on "
                                   "CPU; on a lazy device the plugin's wait)"),
    "torch.cuda.is_available": Rule("rt.device_type != 'cpu'", "the question the script asks is 'do I run on an "
                                    "accelerator': ezpz answers it for the device it chose, not only for NVIDIA's"),
}

#: ``torch.cuda`` memory counters and the ``rt.memory_stats()`` key each becomes (NaN where a device has none).
MEMORY_STATS: dict[str, str] = {
    "torch.cuda.memory_allocated": "allocated_bytes",
    "torch.cuda.max_memory_allocated": "max_allocated_bytes",
    "torch.cuda.memory_reserved": "reserved_bytes",
    "torch.cuda.max_memory_reserved": "max_reserved_bytes",
}
MEMORY_WHY = ("rt.memory_stats() asks the chosen device's plugin; devices report different counters, so a counter "
              "this device lacks is NaN (CPU reports only host_peak_rss_bytes), never a silent 0")

#: Statements removed because ``setup()`` already did them.
REMOVED_CALLS: dict[str, Rule] = {
    "torch.cuda.set_device": Rule(None, "setup() already set this rank's device (the local rank's index, on the "
                                  "device it chose); torch.cuda.set_device fails where CUDA is absent"),
}

INIT_PROCESS_GROUP = "torch.distributed.init_process_group"
INIT_WHY = ("setup() starts the process group when the world size is > 1, on the backend it chose and with "
            "EZPZ_TIMEOUT; a second init_process_group raises, so the script's call runs only when no group exists")

#: autocast entry points; ``torch.cuda.amp.autocast`` has no device argument, the others take it first.
AUTOCAST_CALLS = ("torch.cuda.amp.autocast", "torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast_mode.autocast")
AUTOCAST_WHY = ("rt.autocast() is the chosen device's autocast with the precision policy's dtype, or a no-op where "
                "the policy is fp32")
GRAD_SCALER_CALLS = ("torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler")
GRAD_SCALER_WHY = ("rt.grad_scaler() is torch.amp.GradScaler for the chosen device, enabled only where the "
                   "precision policy needs loss scaling (fp16); an enabled= the script passes is kept")

#: Spellings of a dtype in scripts and the ``setup(precision=...)`` name each means.
DTYPE_PRECISIONS: dict[str, str] = {
    "torch.float16": "fp16", "torch.half": "fp16", "float16": "fp16",
    "torch.bfloat16": "bf16", "bfloat16": "bf16",
    "torch.float32": "fp32", "torch.float": "fp32", "float32": "fp32",
}

#: ``int(os.environ['X'])`` and the runtime field it becomes.
RANK_VARIABLES: dict[str, str] = {
    "RANK": "rt.rank", "LOCAL_RANK": "rt.local_rank", "WORLD_SIZE": "rt.world_size",
    "LOCAL_WORLD_SIZE": "rt.local_world_size",
}
RANK_WHY = ("RANK/LOCAL_RANK/WORLD_SIZE are torchrun's names; setup() read the layout from whichever launcher "
            "started the job (torchrun, mpiexec, srun, ...), and gives 0/1 for a plain process")

#: TF32 switches: ``= True`` is removed (setup() decides TF32 per device), ``= False`` is kept.
TF32_FLAGS = ("torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32")
TF32_WHY = ("setup() turns TF32 on where the device has it (the CUDA plugin: compute capability >= 8.0, unless "
            "fp32 is asked for) and records the reason in rt.explain()['precision']; on other devices the flag "
            "means nothing, and from torch 2.9 mixing it with the fp32_precision API setup() uses is refused")

#: Left as they are, with the reason the report gives.
KEPT: dict[str, str] = {
    "torch.backends.cuda.matmul.allow_tf32": "kept: setting TF32 off is the script's explicit choice "
                                             "(setup() would turn it on on CUDA >= 8.0); it means nothing elsewhere",
    "torch.backends.cudnn.allow_tf32": "kept: setting TF32 off is the script's explicit choice; it means nothing "
                                       "off CUDA/ROCm",
    "torch.backends.cudnn.benchmark": "kept: a cuDNN autotuner switch, honoured on CUDA/ROCm and ignored elsewhere",
    "torch.backends.cudnn.deterministic": "kept: honoured on CUDA/ROCm; torch.use_deterministic_algorithms(True) "
                                          "is the device-neutral switch",
    "torch.backends.cudnn.enabled": "kept: a cuDNN switch, ignored off CUDA/ROCm",
    "torch.cuda.manual_seed": "kept: torch.manual_seed already seeds every device's generator; this call only "
                              "queues a seed for CUDA and does nothing where CUDA is absent",
    "torch.cuda.manual_seed_all": "kept: torch.manual_seed already seeds every device's generator; this call only "
                                  "queues a seed for CUDA and does nothing where CUDA is absent",
    "torch.cuda.empty_cache": "kept: releases CUDA's cached blocks, a no-op where CUDA was never initialised; "
                              "torch.accelerator.empty_cache() (torch 2.9+) is the device-neutral form",
    "device_type == 'cuda'": "kept: the script compares a device type to 'cuda'; after the port the device type is "
                             "the chosen one, so this branch runs only on CUDA (check that its other branch is "
                             "right for every device)",
}

#: CUDA APIs no rewrite can make portable: the report names the line and what to do instead.
UNPORTABLE: dict[str, str] = {
    "torch.cuda.set_device": "set_device inside an expression: setup() sets the device; remove the call",
    "torch.cuda.is_bf16_supported": "asks about NVIDIA's bf16; read rt.amp.dtype (the precision setup() chose) or "
                                    "rt.amp.why_unsupported('bf16', rt.device_type)",
    "torch.cuda.device_count": "the layout is the launcher's: rt.local_world_size ranks per node, each on rt.device",
    "torch.cuda.current_device": "rt.device (its .index is this rank's device, None on CPU)",
    "torch.cuda.get_device_name": "rt.explain() names the chosen device and why",
    "torch.cuda.get_device_properties": "device properties are vendor-specific; rt.explain() says what was chosen",
    "torch.cuda.get_device_capability": "a CUDA compute capability has no meaning on other devices; ask the "
                                        "precision policy (rt.amp) instead",
    "torch.cuda.reset_peak_memory_stats": "raises where CUDA is absent; torch.accelerator.reset_peak_memory_stats() "
                                          "(torch 2.9+) is the device-neutral form",
    "torch.cuda.memory_summary": "CUDA's allocator text; rt.memory_stats() has the chosen device's counters",
    "torch.cuda.mem_get_info": "rt.memory_stats() has device_free_bytes/device_total_bytes where the device says",
    "torch.cuda.Stream": "streams are device-specific: torch.Stream(rt.device) on torch 2.4+ where the device has them",
    "torch.cuda.stream": "streams are device-specific: torch.accelerator.current_stream() (torch 2.6+)",
    "torch.cuda.current_stream": "torch.accelerator.current_stream() (torch 2.6+) where the device has streams",
    "torch.cuda.Event": "torch.Event(rt.device) (torch 2.4+) where the device has events; time with "
                        "rt.synchronize() and time.perf_counter() elsewhere",
    "torch.cuda.CUDAGraph": "CUDA graphs exist only on CUDA (torch.accelerator.Graph on torch 2.12+ where a device "
                            "has graphs); capture nothing elsewhere",
    "torch.cuda.graph": "CUDA graphs exist only on CUDA",
    "torch.cuda.make_graphed_callables": "CUDA graphs exist only on CUDA",
    "torch.cuda.nvtx.range_push": "use `with rt.range(name):` around the region (NVTX, roctx or ITT per device)",
    "torch.cuda.nvtx.range_pop": "use `with rt.range(name):` around the region (NVTX, roctx or ITT per device)",
    "torch.cuda.nvtx.mark": "NVTX markers exist only on CUDA; `with rt.range(name):` marks a region on every device",
    "torch.cuda.FloatTensor": "legacy CUDA tensor type: torch.tensor(..., device=rt.device)",
    "torch.cuda.HalfTensor": "legacy CUDA tensor type: torch.tensor(..., dtype=torch.float16, device=rt.device)",
    "torch.cuda.LongTensor": "legacy CUDA tensor type: torch.tensor(..., dtype=torch.long, device=rt.device)",
    "torch.cuda.amp.custom_fwd": "torch.amp.custom_fwd(device_type=rt.device_type) (torch 2.4+)",
    "torch.cuda.amp.custom_bwd": "torch.amp.custom_bwd(device_type=rt.device_type) (torch 2.4+)",
    "torch.profiler.ProfilerActivity.CUDA": "outside a torch.profiler.profile(activities=...) call: rt.profiler() "
                                            "picks the device's activities",
    "torch.utils.cpp_extension.CUDAExtension": "a custom CUDA kernel runs only on NVIDIA GPUs: keep a PyTorch "
                                               "fallback for other devices",
    "torch.utils.cpp_extension.load": "a custom kernel built from source: check that it is not CUDA-only",
    ".is_cuda": "asks 'is this on NVIDIA'; compare tensor.device.type with rt.device_type",
    "device_ids": "DDP device_ids the porter could not read; pass them only where the device is per rank",
    "cuda-string": "a CUDA device string the porter could not place (in a container or comparison): use rt.device",
    "nccl-string": "an NCCL backend string the porter could not place: use rt.backend",
    "map_location-dict": "a map_location mapping of CUDA devices: use map_location=rt.device",
}

#: Imports of CUDA-only libraries: reported at the import line.
UNPORTABLE_MODULES: dict[str, str] = {
    "cupy": "CuPy arrays live on NVIDIA GPUs only: use torch tensors on rt.device",
    "pynvml": "NVML talks to NVIDIA's driver only: rt.memory_stats() and rt.explain() for the chosen device",
    "apex": "NVIDIA apex: use torch.amp (rt.autocast(), rt.grad_scaler()) and torch.optim's fused/foreach optimizers",
    "pycuda": "PyCUDA runs only on NVIDIA GPUs",
    "numba.cuda": "numba's CUDA target runs only on NVIDIA GPUs",
    "triton": "Triton kernels run where the device has a Triton backend (NVIDIA, AMD, Intel): check the device",
    "flash_attn": "flash-attn's kernels are CUDA/ROCm only: F.scaled_dot_product_attention picks a kernel per device",
    "bitsandbytes": "bitsandbytes' kernels target CUDA first: check that the chosen device is supported",
}


def is_cuda_api(qualified: str) -> bool:
    """Whether a qualified name is CUDA-specific PyTorch API (``torch.cuda.*``, ``torch.backends.cuda*``)."""
    return qualified.startswith(("torch.cuda.", "torch.backends.cuda.", "torch.backends.cudnn.")) or qualified in (
        "torch.cuda", "torch.profiler.ProfilerActivity.CUDA", "torch.autograd.ProfilerActivity.CUDA")
