"""Recorded NVIDIA device and torch-build facts, each with its public source.

These are the inputs the plugin's tests feed through the real decision path in
place of the probes (``ezpz_cuda.probe``). Compute capabilities are from
NVIDIA's "CUDA GPUs - Compute Capability" table
(https://developer.nvidia.com/cuda-gpus, also mirrored in the CUDA Programming
Guide's compute-capability appendix,
https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html).
Device names are the strings NVML/``nvidia-smi`` report. Memory sizes are the
datasheet capacities unless a driver-reported value is cited; the driver
reports slightly less than the nominal size, and the plugin only displays it.
UUIDs are per board, not per model: the ones below are synthetic.
"""

from __future__ import annotations

from ezpz.facts import TorchBuild
from ezpz_cuda.facts import GpuFacts

GiB = 2**30
MiB = 2**20


def _uuid(n: int) -> str:
    """A synthetic NVML-style UUID (``GPU-`` + 8-4-4-4-12 hex)."""
    return f"GPU-{n:08x}-0000-4000-8000-{n:012x}"


# -- devices -----------------------------------------------------------------------------

# Tesla V100 SXM2 32 GB: compute capability 7.0 (cuda-gpus table); 16 or 32 GB HBM2
# (NVIDIA V100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/v100/).
V100_SXM2_32GB = GpuFacts(name="Tesla V100-SXM2-32GB", major=7, minor=0, total_memory=32 * GiB)
# Same table and datasheet, PCIe 16 GB board.
V100_PCIE_16GB = GpuFacts(name="Tesla V100-PCIE-16GB", major=7, minor=0, total_memory=16 * GiB)

# A100 SXM4 40 GB: compute capability 8.0 (cuda-gpus table); 40/80 GB HBM2(e) (NVIDIA A100 datasheet,
# https://www.nvidia.com/en-us/data-center/a100/). 42298834944 bytes is deviceQuery's "Total amount of
# global memory" for an "NVIDIA A100-SXM4-40GB" quoted in bottlerocket-os/bottlerocket PR #3873.
A100_SXM4_40GB = GpuFacts(name="NVIDIA A100-SXM4-40GB", major=8, minor=0, total_memory=42298834944)

# H100 SXM5 80 GB: compute capability 9.0 (cuda-gpus table); 80 GB HBM3 (NVIDIA H100 datasheet,
# https://www.nvidia.com/en-us/data-center/h100/). "NVIDIA H100 80GB HBM3" with memory.total 81559 MiB is an
# nvidia-smi query result recorded in public test code (name,compute_cap,memory.total: 9.0, 81559).
H100_SXM5_80GB = GpuFacts(name="NVIDIA H100 80GB HBM3", major=9, minor=0, total_memory=81559 * MiB)

# GeForce RTX 4090: compute capability 8.9 (cuda-gpus table); 24 GB GDDR6X (GeForce RTX 4090 product page,
# https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4090/).
RTX_4090 = GpuFacts(name="NVIDIA GeForce RTX 4090", major=8, minor=9, total_memory=24 * GiB)

# GeForce RTX 3090: compute capability 8.6 (cuda-gpus table); 24 GB GDDR6X (GeForce RTX 3090 product page).
RTX_3090 = GpuFacts(name="NVIDIA GeForce RTX 3090", major=8, minor=6, total_memory=24 * GiB)

# Tesla T4: compute capability 7.5 (cuda-gpus table); 16 GB GDDR6 (NVIDIA T4 datasheet,
# https://www.nvidia.com/en-us/data-center/tesla-t4/).
T4 = GpuFacts(name="Tesla T4", major=7, minor=5, total_memory=16 * GiB)

# GeForce GTX 1080: compute capability 6.1 (cuda-gpus table); 8 GB GDDR5X (GeForce GTX 1080 specifications).
# NVIDIA's forum answer "FP16 support on GTX 1060 and 1080" (forums.developer.nvidia.com/t/53256): every
# compute-capability-6.1 GPU has low-rate fp16 arithmetic.
GTX_1080 = GpuFacts(name="NVIDIA GeForce GTX 1080", major=6, minor=1, total_memory=8 * GiB)

# GeForce GTX 980: compute capability 5.2 (cuda-gpus table); 4 GB GDDR5. Below 5.3, the first capability
# with native half arithmetic (cuda_fp16.h; LLVM NVPTX "fp16 math operations are supported on sm_53+").
GTX_980 = GpuFacts(name="NVIDIA GeForce GTX 980", major=5, minor=2, total_memory=4 * GiB)


# NVIDIA H200, recorded live on 2026-11-27 (../shared/hardware/nvidia-h200-2026-11-27/run1-log.txt, the
# "install" and "doctor+plugins" sections): nvidia-smi "NVIDIA H200, 580.159.04, 143771 MiB, 9.0"; ezpz doctor's
# device block "1 x NVIDIA H200 (compute capability 9.0, 140 GiB) visible, found via NVML", uuid as NVML gave it.
# This is the one device in this file that ezpz has run on (docs/hardware-validation.md).
H200_LIVE = GpuFacts(name="NVIDIA H200", major=9, minor=0, total_memory=143771 * MiB,
                     uuid="GPU-ab4d4a0c-598a-366f-8698-444f3204c880")


def node(gpu: GpuFacts, count: int, first_uuid: int = 1) -> tuple[GpuFacts, ...]:
    """``count`` identical GPUs as NVML lists them, each with its own (synthetic) UUID and PCI bus id."""
    from attrs import evolve

    return tuple(
        evolve(gpu, uuid=_uuid(first_uuid + i), pci_bus_id=f"00000000:{0x18 + i:02X}:00.0") for i in range(count)
    )


# -- torch builds ------------------------------------------------------------------------
# distributed_backends: Linux CUDA wheels ship gloo and NCCL (torch.distributed.is_nccl_available()).
# ARCH lists are torch.cuda.get_arch_list() for the public x86_64 Linux wheels, from the TORCH_CUDA_ARCH_LIST
# each release was built with:
#   cu121/cu124: sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90, as moi90/pytorch_compute_capabilities table.md
#                lists for the pytorch 2.6.0 cuda12.4 package (read from its binaries); the 2.4.0+cu121 wheel is
#                assumed to carry the same list (not re-read from that wheel here)
#   cu128 (2.8): "7.0;7.5;8.0;8.6;9.0;10.0;12.0" (pytorch .ci/manywheel/build_cuda.sh; sm_70 kept for 2.8
#                per pytorch/pytorch#157517, dropped again in 2.11 per pytorch/pytorch#172352)
#   cu130 (2.13): {7.5, 8.0, 8.6, 9.0, 10.0, 12.0} + PTX for 12.0 on Linux (PYTORCH_RELEASES_CODE_CC in
#                torch 2.13's torch/cuda/__init__.py; the support matrix in pytorch/pytorch#172352)

TORCH_2_4_CU121 = TorchBuild(version="2.4.0+cu121", cuda="12.1", distributed_backends=("gloo", "nccl"))
TORCH_2_6_CU124 = TorchBuild(version="2.6.0+cu124", cuda="12.4", distributed_backends=("gloo", "nccl"))
TORCH_2_8_CU128 = TorchBuild(version="2.8.0+cu128", cuda="12.8", distributed_backends=("gloo", "nccl"))
TORCH_2_13_CU130 = TorchBuild(version="2.13.0+cu130", cuda="13.0", distributed_backends=("gloo", "nccl"))
# The H200 host's own torch, as ezpz doctor printed it there ("torch 2.11.0+cu130 cuda=13.0 ... backends=gloo,nccl";
# run1-log.txt, NCCL 2.28.9).
TORCH_2_11_CU130 = TorchBuild(version="2.11.0+cu130", cuda="13.0", distributed_backends=("gloo", "nccl"))

ARCH_CU121 = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
ARCH_CU124 = ARCH_CU121
ARCH_CU128 = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
ARCH_CU130 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")

# torch_arch_list as ezpz doctor printed it on the H200 host (run1-log.txt): the probe's raw answer.
ARCH_2_11_CU130_LIVE = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")

ARCH = {
    TORCH_2_4_CU121.version: ARCH_CU121,
    TORCH_2_6_CU124.version: ARCH_CU124,
    TORCH_2_8_CU128.version: ARCH_CU128,
    TORCH_2_13_CU130.version: ARCH_CU130,
    TORCH_2_11_CU130.version: ARCH_2_11_CU130_LIVE,
}

CUDA_BUILDS = (TORCH_2_4_CU121, TORCH_2_6_CU124, TORCH_2_8_CU128, TORCH_2_13_CU130)

# Windows CUDA wheels have no NCCL ("NCCL ... not available on Windows": torch.distributed docs, Backends table).
TORCH_2_6_CU124_WINDOWS = TorchBuild(version="2.6.0+cu124", cuda="12.4", distributed_backends=("gloo",))

# A ROCm wheel: torch.version.cuda is None, torch.version.hip is set, RCCL answers to "nccl". The hip string
# has the format torch reports ("<major>.<minor>.<build>-<git hash>"); the plugin only checks that it is set.
TORCH_2_6_ROCM62 = TorchBuild(version="2.6.0+rocm6.2.4", hip="6.2.41134-65d174c3e",
                              distributed_backends=("gloo", "nccl"))

# The CPU-only wheel this project's CI runs.
TORCH_2_13_CPU = TorchBuild(version="2.13.0+cpu", distributed_backends=("gloo",))
