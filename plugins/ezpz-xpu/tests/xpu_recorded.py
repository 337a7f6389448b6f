"""Recorded Intel GPU and torch-build facts, each with its public source.

The tests feed these through the real decision path in place of
``ezpz_xpu.probe``. Device fields are copied from published
``torch.xpu.get_device_properties()`` output; a field the source does not show
stays ``None`` (or 0 bytes of memory), exactly as an older torch would report it.
Nothing here was measured on Intel hardware by this project.
"""

from __future__ import annotations

from attrs import evolve
from ezpz.facts import TorchBuild

from ezpz_xpu.facts import XpuDeviceProps

MiB = 2**20

# -- devices ------------------------------------------------------------------------------------

# One tile (stack) of an Intel Data Center GPU Max 1550 as torch shows it in FLAT mode (the default):
# intel/torch-xpu-ops issue #3889 (CI log from the release/2.13 branch), devices [8]/[9] =
# "_XpuDeviceProperties(name='Intel(R) Data Center GPU Max 1550', platform_name='Intel(R) oneAPI Unified
# Runtime over Level-Zero', type='gpu', device_id=0xBD5, uuid=d47ef340-79ec-b1ea-0000-000000000001,
# driver_version='1.6.33578+51', total_memory=65520MB, ..., max_compute_units=512, ..., gpu_eu_count=512,
# ..., has_fp16=1, has_fp64=1, has_atomic64=1, is_integrated_gpu=0)". The repr does not print the bf16/DPAS
# flags, so they stay None here.
MAX1550_TILE = XpuDeviceProps(
    name="Intel(R) Data Center GPU Max 1550", platform_name="Intel(R) oneAPI Unified Runtime over Level-Zero",
    device_id=0xBD5, uuid="d47ef340-79ec-b1ea-0000-000000000001", driver_version="1.6.33578+51",
    total_memory=65520 * MiB, max_compute_units=512, gpu_eu_count=512, has_fp16=True, has_fp64=True,
    is_integrated_gpu=False,
)

# The same card in COMPOSITE mode: one root device whose two tiles are sub-devices (Level Zero "Device
# Hierarchy"; dpctl's environment-variable guide; Intel's "Flattening GPU Tile Hierarchy" article). Memory and
# EU count are the two FLAT tiles above added together (derived, not a separate recording).
MAX1550_CARD = evolve(MAX1550_TILE, total_memory=2 * 65520 * MiB, max_compute_units=1024, gpu_eu_count=1024,
                      uuid="d47ef340-79ec-b1ea-0000-000000000000")

# A Max 1550 tile as an IPEX-era torch reports it (no bf16/DPAS/integrated fields at all): ALCF Aurora docs,
# "Device properties = _XpuDeviceProperties(name='Intel(R) Data Center GPU Max 1550', platform_name='Intel(R)
# Level-Zero', type='gpu', driver_version='1.3.30872', total_memory=65536MB, max_compute_units=448,
# gpu_eu_count=448, ... has_fp16=1, has_fp64=1, has_atomic64=1)" with "Number of tiles = 12" per node.
MAX1550_TILE_IPEX_ERA = XpuDeviceProps(
    name="Intel(R) Data Center GPU Max 1550", platform_name="Intel(R) Level-Zero", driver_version="1.3.30872",
    total_memory=65536 * MiB, max_compute_units=448, gpu_eu_count=448, has_fp16=True, has_fp64=True,
)

# The failure mode of pytorch/pytorch issue #196074: torch answers the four cl_intel_* capability flags from an
# offline-compiler query and reports all of them False when it cannot run it (seen on an Arc B580 with working
# XMX). A Max 1550 tile in that state.
MAX1550_TILE_FLAGS_UNQUERIED = evolve(
    MAX1550_TILE, has_bfloat16_conversions=False, has_subgroup_matrix_multiply_accumulate=False,
    has_subgroup_matrix_multiply_accumulate_tensor_float32=False,
)

# Intel Arc A770 (Alchemist, discrete, 16 GB): stas00/ml-engineering PR #107 (mamf-finder run on torch
# 2.7.0+xpu): "_XpuDeviceProperties(name='Intel(R) Arc(TM) A770 Graphics', platform_name='Intel(R) oneAPI
# Unified Runtime over Level-Zero', type='gpu', driver_version='1.6.33578', total_memory=15473MB,
# max_compute_units=512, gpu_eu_count=512, gpu_subslice_count=32, ..., has_fp16=1, has_fp64=0,
# has_atomic64=1)"; the same run measured ~91 TFLOPS in bf16 matmul, i.e. XMX bf16 works. No FP64 on Arc A
# (pytorch/pytorch issue #147731, which is why GradScaler fails there).
ARC_A770 = XpuDeviceProps(
    name="Intel(R) Arc(TM) A770 Graphics", platform_name="Intel(R) oneAPI Unified Runtime over Level-Zero",
    driver_version="1.6.33578", total_memory=15473 * MiB, max_compute_units=512, gpu_eu_count=512,
    has_fp16=True, has_fp64=False,
)

# Meteor Lake integrated "Intel(R) Arc(TM) Graphics" (Xe-LPG, 128 EUs, no XMX):
# intel/intel-xpu-backend-for-triton PR #1888, `torch.xpu.get_device_capability()` on MTL:
# {"driver_version": "1.3.29735", "gpu_eu_count": 128, "gpu_subslice_count": 8, "has_atomic64": true,
#  "has_bf16_conversion": false, "has_fp16": true, "has_fp64": true, "has_subgroup_2d_block_io": false,
#  "has_subgroup_matrix_multiply_accumulate": false, "has_subgroup_matrix_multiply_accumulate_tensor_float32":
#  false, "max_compute_units": 128, ..., "name": "Intel(R) Arc(TM) Graphics", "platform_name": "Intel(R)
#  Level-Zero"}. That torch predates is_integrated_gpu, and the record shows no memory size (shared memory).
MTL_IGPU = XpuDeviceProps(
    name="Intel(R) Arc(TM) Graphics", platform_name="Intel(R) Level-Zero", driver_version="1.3.29735",
    max_compute_units=128, gpu_eu_count=128, has_fp16=True, has_fp64=True, has_bfloat16_conversions=False,
    has_subgroup_matrix_multiply_accumulate=False, has_subgroup_matrix_multiply_accumulate_tensor_float32=False,
)

# -- nodes (what torch.xpu.device_count() / get_device_properties(i) show) ----------------------------------
# Aurora node: 6 Max 1550 cards x 2 tiles; 12 torch devices in FLAT mode (ALCF docs: "Number of tiles = 12",
# "By default, each tile is mapped to one PyTorch device"), 6 in COMPOSITE mode.
AURORA_FLAT = (MAX1550_TILE,) * 12
AURORA_COMPOSITE = (MAX1550_CARD,) * 6

# -- torch builds ---------------------------------------------------------------------------------
# XPU builds report xpu_built (torch.xpu._is_compiled()). Backends are what torch.distributed reports:
# gloo always; xccl from 2.8, where XCCL landed in torch.distributed (DeepSpeed PR #7299: "XCCL will be used
# for XPU device on Pytorch-2.8"; torch.distributed.is_xccl_available()). 2.4 was the first release with
# upstream XPU (prototype); 2.7 brought eager/compile parity.
TORCH_2_4_XPU = TorchBuild(version="2.4.0+xpu", xpu_built=True, distributed_backends=("gloo",))
TORCH_2_7_XPU = TorchBuild(version="2.7.0+xpu", xpu_built=True, distributed_backends=("gloo",))
TORCH_2_8_XPU = TorchBuild(version="2.8.0+xpu", xpu_built=True, distributed_backends=("gloo", "xccl"))
TORCH_2_13_XPU = TorchBuild(version="2.13.0+xpu", xpu_built=True, distributed_backends=("gloo", "xccl"))
XPU_BUILDS = (TORCH_2_4_XPU, TORCH_2_7_XPU, TORCH_2_8_XPU, TORCH_2_13_XPU)

# The CPU wheel this project's CI runs (torch.xpu._is_compiled() is False).
TORCH_2_13_CPU = TorchBuild(version="2.13.0+cpu", distributed_backends=("gloo",))
# A 2.8 XPU build without XCCL (built with USE_XCCL=0): is_xccl_available() is False.
TORCH_2_8_XPU_NO_XCCL = TorchBuild(version="2.8.0+xpu", xpu_built=True, distributed_backends=("gloo",))
