"""What the chosen device answers for CUDA questions: its plugin's ``ezpz_cuda_answers``, else its torch module.

A plugin that says nothing gets what ``torch.get_device_module(device)`` and ``torch.accelerator`` show:
streams, events and graphs where the module has them, pinned memory where the device is torch's current
accelerator, no compute capability. A device whose type is ``cuda`` is what ``torch.cuda`` drives already
(CUDA, ROCm's HIP): nothing is redirected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ezpz.cuda_answers import CudaAnswers

if TYPE_CHECKING:
    from ezpz.runtime import Runtime

__all__ = ["ask", "default_answers"]


def ask(runtime: Runtime) -> CudaAnswers:
    """The chosen device's answers: the first plugin that answers the hook, else :func:`default_answers`."""
    import attr

    from ezpz.hooks import get_plugin_host
    from ezpz.plugin_host.calls import Hooks

    plan = runtime.plan
    found = Hooks(get_plugin_host()).cuda_answers(plan.device.candidate, plan.build, runtime.backend)
    if found is None:
        return default_answers(runtime)
    plugin, answers = found
    return attr.evolve(answers, plugin=plugin)


def default_answers(runtime: Runtime) -> CudaAnswers:
    """What the device's torch module says, for a plugin that does not answer ``ezpz_cuda_answers``."""
    import torch

    device_type = runtime.device_type
    if device_type == "cuda":
        return CudaAnswers(redirect=False, plugin="(default)",
                           reason="the chosen device is driven by torch.cuda itself: the script's CUDA calls run as written")
    try:
        module: Any = torch.get_device_module(device_type)
    except (RuntimeError, AttributeError, ValueError):
        module = None
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    on_module = (lambda name: module is not None and hasattr(module, name))
    return CudaAnswers(
        plugin="(default)",
        reason=f"no plugin answered for {device_type}: read from torch.get_device_module({device_type!r}) "
               "and torch.accelerator",
        streams=on_module("Stream") and on_module("current_stream"),
        events=on_module("Event"),
        graphs=False,
        pinned_memory=accelerator is not None and accelerator.type == device_type,
        missing_reduce_ops=("AVG",) if runtime.backend == "gloo" else (),
        properties={"name": str(runtime.device)},
    )
