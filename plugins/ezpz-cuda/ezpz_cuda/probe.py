"""The impure layer: the only code that touches NVML or ``torch.cuda``. Kept small on purpose.

Tests replace these functions (``monkeypatch.setattr(ezpz_cuda.probe, "nvml_gpus", ...)``)
to feed recorded facts through the real decision path.
"""

from __future__ import annotations

from typing import Any

from ezpz_cuda.facts import GpuFacts

__all__ = ["ProbeUnavailable", "nvml_gpus", "torch_arch_list", "torch_gpus"]


class ProbeUnavailable(RuntimeError):
    """A probe could not answer; ``str()`` says why, for the trace."""


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def nvml_gpus() -> tuple[GpuFacts, ...]:
    """Every NVIDIA GPU the driver reports, in NVML index order, without creating a CUDA context.

    NVML ignores ``CUDA_VISIBLE_DEVICES``; the policy layer applies it.
    Raises :class:`ProbeUnavailable` when the bindings (``ezpz-cuda[nvml]``) or the driver are missing.
    """
    try:
        import pynvml
    except ImportError as err:
        raise ProbeUnavailable("the NVML bindings are not installed (pip install 'ezpz-cuda[nvml]')") from err
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        raise ProbeUnavailable(f"NVML could not start ({err}): is the NVIDIA driver installed and loaded?") from err
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            try:
                mig_current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
                mig = bool(mig_current)
            except pynvml.NVMLError:  # NOT_SUPPORTED on GPUs without MIG
                mig = False
            gpus.append(GpuFacts(
                name=_text(pynvml.nvmlDeviceGetName(handle)),
                major=int(major),
                minor=int(minor),
                total_memory=int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
                pci_bus_id=_text(pynvml.nvmlDeviceGetPciInfo(handle).busId),
                mig_enabled=mig,
            ))
        return tuple(gpus)
    except pynvml.NVMLError as err:
        raise ProbeUnavailable(f"NVML query failed: {err}") from err
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def torch_gpus() -> tuple[GpuFacts, ...]:
    """The devices the CUDA runtime shows this process (after ``CUDA_VISIBLE_DEVICES``), in torch order.

    ``torch.cuda.device_count()`` counts through NVML where it can (no CUDA
    context); ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` only changes
    ``torch.cuda.is_available()``, which this does not call. Reading the
    properties with ``get_device_properties`` initialises CUDA in this process.
    """
    import torch

    try:
        count = torch.cuda.device_count()
        gpus = []
        for index in range(count):
            props = torch.cuda.get_device_properties(index)
            uuid = getattr(props, "uuid", None)
            gpus.append(GpuFacts(
                name=str(props.name),
                major=int(props.major),
                minor=int(props.minor),
                total_memory=int(props.total_memory),
                uuid=str(uuid) if uuid is not None else None,
            ))
    except Exception as err:  # RuntimeError/AssertionError from a broken driver or a CPU-only build
        raise ProbeUnavailable(f"torch.cuda could not list devices: {type(err).__name__}: {err}") from err
    return tuple(gpus)


def torch_arch_list() -> tuple[str, ...]:
    """The CUDA architectures torch was compiled for (``sm_80``, ``compute_120``...), read without CUDA init."""
    import torch

    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    try:
        value = flags() if flags is not None else " ".join(torch.cuda.get_arch_list())
    except Exception:  # an unusual build: treat the list as unknown
        return ()
    return tuple(value.split()) if value else ()
