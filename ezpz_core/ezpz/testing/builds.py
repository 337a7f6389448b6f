"""Torch build facts for tests: representative builds per vendor, adjustable per field.

Policies are pure functions of facts, so a vendor plugin's decisions can be
tested on a laptop by feeding it the :class:`~ezpz.facts.TorchBuild` of the
machine it targets. The presets below describe the public wheels of each
flavour (what ``ezpz.probes.torch_build.probe_torch_build()`` reports there); override any
field for the case at hand::

    build = recorded_build("xpu", version="2.5.1+xpu", distributed_backends=("gloo",))
"""

from __future__ import annotations

from typing import Any

import attrs

from ezpz.facts import TorchBuild

__all__ = ["BUILDS", "recorded_build"]

BUILDS: dict[str, TorchBuild] = {
    # CPU-only wheel (what this project's CI runs): gloo, plus mpi only when built from source.
    "cpu": TorchBuild(version="2.13.0+cpu", distributed_backends=("gloo",)),
    # NVIDIA CUDA wheel.
    "cuda": TorchBuild(version="2.7.1+cu126", cuda="12.6", distributed_backends=("gloo", "nccl")),
    # AMD ROCm wheel: HIP behind torch.cuda, RCCL behind the name "nccl"; torch.version.cuda is None.
    "rocm": TorchBuild(version="2.7.1+rocm6.3", hip="6.3.42131-fa1d09cbd", distributed_backends=("gloo", "nccl")),
    # Intel XPU wheel with native XCCL collectives (torch >= 2.8).
    "xpu": TorchBuild(version="2.8.0+xpu", xpu_built=True, distributed_backends=("gloo", "xccl")),
    # Intel XPU wheel before XCCL: collectives need the oneCCL bindings ("ccl").
    "xpu-ccl": TorchBuild(version="2.5.1+xpu", xpu_built=True, distributed_backends=("gloo",)),
    # macOS arm64 wheel with MPS.
    "mps": TorchBuild(version="2.7.1", mps_built=True, distributed_backends=("gloo",)),
}


def recorded_build(kind: str = "cpu", **overrides: Any) -> TorchBuild:
    """The preset build ``kind`` (one of :data:`BUILDS`), with ``overrides`` applied.

    ``recorded_build("this")`` probes the installed torch instead.
    """
    if kind == "this":
        from ezpz.probes.torch_build import probe_torch_build

        base = probe_torch_build()
    else:
        try:
            base = BUILDS[kind]
        except KeyError:
            raise ValueError(f"unknown build {kind!r}; expected 'this' or one of {sorted(BUILDS)}") from None
    return attrs.evolve(base, **overrides) if overrides else base
