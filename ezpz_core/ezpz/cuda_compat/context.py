"""What every redirection needs: the runtime, the device's answers, the device map, the scope and the undo list."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ezpz.cuda_answers import CudaAnswers
from ezpz.cuda_compat.devices import DeviceMap
from ezpz.cuda_compat.patching import Patches
from ezpz.cuda_compat.scope import Scope, Site
from ezpz.primitives.device_module import device_module

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
        self.module = device_module(runtime.device_type)
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

    def module_attr(self, name: str) -> Any:
        """``name`` of the chosen device's torch module (``torch.xpu.memory_allocated``), None where it has none."""
        return getattr(self.module, name, None) if self.module is not None else None

    def memory_counter(self, api: str, call: str, empty: Any) -> Callable[..., Any]:
        """A front for a memory counter (``torch.cuda.memory_allocated``, ``torch.accelerator.max_memory_allocated``,
        named ``api``): the device module's ``call``, else ``empty``, reported either way."""

        def stat(site: Site, *args: Any, **kwargs: Any) -> Any:
            fn = self.module_attr(call)
            if fn is not None:
                site.note(f"{api}()", f"{self.target}'s {call}", "same")
                return fn()
            site.note(f"{api}()", f"{empty!r}: {self.target} keeps no such counter", "none")
            return empty

        return stat
