"""What the installed torch was built with (version, CUDA/HIP/XPU, collective backends). Touches no GPU."""

from __future__ import annotations

from ezpz.facts import TorchBuild

_BACKEND_CHECKS = (
    ("gloo", "is_gloo_available"),
    ("nccl", "is_nccl_available"),
    ("xccl", "is_xccl_available"),
    ("mpi", "is_mpi_available"),
    ("ucc", "is_ucc_available"),
)


def probe_torch_build() -> TorchBuild:
    import torch

    distributed = torch.distributed.is_available()
    backends: list[str] = []
    if distributed:
        import torch.distributed as dist

        for name, check in _BACKEND_CHECKS:
            fn = getattr(dist, check, None)
            if fn is not None and fn():
                backends.append(name)
    xpu = getattr(torch, "xpu", None)
    xpu_compiled = getattr(xpu, "_is_compiled", None)
    return TorchBuild(
        version=torch.__version__,
        cuda=getattr(torch.version, "cuda", None),
        hip=getattr(torch.version, "hip", None),
        xpu_built=bool(xpu_compiled()) if xpu_compiled else False,
        mps_built=bool(torch.backends.mps.is_built()),
        distributed=distributed,
        distributed_backends=tuple(backends),
    )
