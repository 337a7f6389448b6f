"""What every redirection needs: the runtime, the device's answers, the device map, the scope and the undo list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ezpz.cuda_answers import CudaAnswers
from ezpz.cuda_compat.devices import DeviceMap
from ezpz.cuda_compat.patching import Patches
from ezpz.cuda_compat.scope import Scope

if TYPE_CHECKING:
    from ezpz.runtime import Runtime

__all__ = ["Compat"]


class Compat:
    """One run of the mode: built by :mod:`.session`, handed to each ``install()``."""

    def __init__(self, runtime: Runtime, answers: CudaAnswers, scope: Scope, *, precision_asked: str) -> None:
        self.rt = runtime
        self.answers = answers
        self.scope = scope
        self.patches = Patches()
        self.module = _device_module(runtime.device_type)
        count = self.module.device_count() if self.module is not None and hasattr(self.module, "device_count") else 1
        self.devices = DeviceMap(runtime.device, local_rank=runtime.local_rank, count=count,
                                 local_world_size=runtime.local_world_size)
        self.precision_asked = precision_asked  # EZPZ_PRECISION / setup(precision=): "auto" unless the user set one
        self.unsupported: list[dict[str, Any]] = []
        self.session: Any = None  # the .session.Session that made this run (its script, roots, report place)
        self.forked: object | None = None  # .children: the after-fork hook, kept alive (the registry is weak)

    @property
    def target(self) -> str:
        return self.devices.name


def _device_module(device_type: str) -> Any:
    import torch

    try:
        return torch.get_device_module(device_type)
    except (RuntimeError, AttributeError, ValueError):
        return None
