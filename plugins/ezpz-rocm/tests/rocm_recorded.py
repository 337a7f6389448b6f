"""Recorded facts of real AMD machines and ROCm torch builds, each with the public source it came from.

These are the only inputs the tests give the plugin: the tests replace the
two probe functions (``ezpz_rocm.probe.amdsmi_gpus`` / ``torch_gpus``) with
these records and run ``ezpz.hooks.plan()`` for real.

``gcnArchName`` keeps the target-feature suffixes the runtime reports
(``gfx942:sramecc+:xnack-``; syntax: https://llvm.org/docs/AMDGPUUsage.html#target-id).
Memory sizes are the nominal VRAM per device.
"""

from __future__ import annotations

from attrs import frozen

from ezpz.facts import TorchBuild
from ezpz_rocm.facts import RocmGpu

GIB = 1024**3


@frozen
class Node:
    """One recorded machine: what amdsmi would list (physical order), and where the facts come from."""

    key: str
    gpus: tuple[RocmGpu, ...]
    source: str


def _node(key: str, count: int, name: str, gcn: str, gib: int, source: str) -> Node:
    gpus = tuple(
        RocmGpu(index=i, physical_id=str(i), name=name, gcn_arch_name=gcn, total_memory=gib * GIB,
                uuid=f"GPU-{key}{i:012x}")
        for i in range(count)
    )
    return Node(key=key, gpus=gpus, source=source)


NODES: dict[str, Node] = {
    # AMD Instinct MI100 (CDNA, gfx908, 32 GiB HBM2): ROCm GPU specifications table,
    # https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html ; a 4-GPU node (AMD's MI100 node diagram: up to
    # four GPUs per EPYC socket, https://rocm.docs.amd.com/en/latest/reference/gpu-arch/mi100.html)
    "mi100": _node("mi100", 4, "AMD Instinct MI100", "gfx908:sramecc+:xnack-", 32,
                   "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html"),
    # OLCF Frontier node: 4x MI250X, each card 2 GCDs -> 8 HIP devices, 64 GiB HBM2e per GCD, gfx90a.
    # https://docs.olcf.ornl.gov/systems/frontier_user_guide.html (node and GPU architecture sections)
    "mi250x": _node("mi250x", 8, "AMD Instinct MI250X", "gfx90a:sramecc+:xnack-", 64,
                    "https://docs.olcf.ornl.gov/systems/frontier_user_guide.html"),
    # AMD Instinct MI300X platform: 8x MI300X (CDNA3, gfx942, 192 GiB HBM3): ROCm GPU specifications;
    # gcnArchName "gfx942:sramecc+:xnack-" as recorded in TunableOp results on MI300X in
    # https://github.com/huggingface/text-generation-inference/commit/232e8d522713f43834d48ae45d1330b0e6dd367e
    "mi300x": _node("mi300x", 8, "AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 192,
                    "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html"),
    # Radeon RX 7900 XTX (RDNA3, gfx1100, 24 GiB): ROCm GPU specifications, Radeon tab. RDNA reports no feature suffix.
    "rx7900xtx": _node("rx7900xtx", 1, "AMD Radeon RX 7900 XTX", "gfx1100", 24,
                       "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html"),
    # Radeon RX 6900 XT (RDNA2, gfx1030, 16 GiB): ROCm GPU specifications, Radeon tab.
    "rx6900xt": _node("rx6900xt", 1, "AMD Radeon RX 6900 XT", "gfx1030", 16,
                      "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html"),
    # Synthetic: an architecture ezpz-rocm's table does not know (no real product), to test the fallback.
    "unknown": _node("unknown", 2, "AMD Future GPU", "gfx1999", 48, "synthetic"),
}

#: ROCm wheels of torch as ``ezpz.probes.torch_build.probe_torch_build()`` reports them (gloo + nccl=RCCL).
BUILDS: dict[str, TorchBuild] = {
    # HIP 6.1.40091 is ROCm 6.1's HIP (ROCm 6.1 compatibility matrix, "hipother 6.1.40091":
    # https://rocm.docs.amd.com/en/docs-6.1.0/compatibility/compatibility-matrix.html); the "-a8dbc0c19" suffix is
    # what `python -m torch.utils.collect_env` prints for the +rocm6.1 wheels in public bug reports.
    "2.4.0+rocm6.1": TorchBuild(version="2.4.0+rocm6.1", hip="6.1.40091-a8dbc0c19", distributed_backends=("gloo", "nccl")),
    # HIP of ROCm 6.2.4 wheels: collect_env output "2.7.1+rocm6.2.4 / 6.2.41134-65d174c3e"; HIP 6.2.41134 is
    # ROCm 6.2's HIP (HIP changelog, https://github.com/ROCm/clr/blob/develop/CHANGELOG.md)
    "2.6.0+rocm6.2.4": TorchBuild(version="2.6.0+rocm6.2.4", hip="6.2.41134-65d174c3e",
                                  distributed_backends=("gloo", "nccl")),
    # torch.version.hip=6.4.43482-0f2d60242 logged by a 2.8.0+rocm6.4 job on OLCF Frontier (public run log).
    "2.8.0+rocm6.4": TorchBuild(version="2.8.0+rocm6.4", hip="6.4.43482-0f2d60242", distributed_backends=("gloo", "nccl")),
    # HIP string of ROCm 7.2 ("ROCM used to build PyTorch: 7.2.26015-fc0010cf6a", collect_env of 2.9.1+rocm7.2.0).
    # The 2.13.0 pairing is synthetic: no 2.13 ROCm wheel was recorded.
    "2.13.0+rocm7.2": TorchBuild(version="2.13.0+rocm7.2", hip="7.2.26015-fc0010cf6a",
                                 distributed_backends=("gloo", "nccl")),
}

#: A ROCm build without RCCL (source build with USE_RCCL=0): synthetic, for the gloo fallback.
NO_RCCL = TorchBuild(version="2.8.0+rocm6.4", hip="6.4.43482-0f2d60242", distributed_backends=("gloo",))
#: ROCm 5.3 (before TunableOp): HIP 5.3.22061 is ROCm 5.3's HIP (ROCm 5.3 release notes). Synthetic pairing.
OLD_ROCM = TorchBuild(version="2.0.1+rocm5.3", hip="5.3.22061-e8e78f1a", distributed_backends=("gloo", "nccl"))
#: This project's CPU wheel.
CPU = TorchBuild(version="2.13.0+cpu", distributed_backends=("gloo",))


def torchrun_env(local_rank: int = 0, local_world_size: int = 1, nodes: int = 1, node_rank: int = 0,
                 **extra: str) -> dict[str, str]:
    """The variables torchrun sets for one worker (https://pytorch.org/docs/stable/elastic/run.html)."""
    world = local_world_size * nodes
    env = {
        "RANK": str(node_rank * local_world_size + local_rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(local_world_size),
        "GROUP_RANK": str(node_rank),
        "ROLE_RANK": str(node_rank * local_world_size + local_rank),
        "TORCHELASTIC_RUN_ID": "ezpz-rocm-test",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
    }
    env.update(extra)
    return env
