"""``torch.optim`` optimizers asked for fused kernels (``AdamW(fused=True)``) on a device that has none.

CUDA scripts often ask for the fused kernels where they run on CUDA (nanoGPT: ``fused=True`` when its device
string says ``cuda``). Where the chosen device's plugin says fused kernels do not run there
(``CudaAnswers.fused_optimizers`` False), ``fused=True`` from the project is dropped, so the optimizer takes
torch's default implementation (the same update, another kernel), and the report says so.
"""

from __future__ import annotations

from typing import Any

from ezpz.cuda_compat.context import Compat
from ezpz.cuda_compat.patching import scoped
from ezpz.cuda_compat.scope import Site

__all__ = ["FUSED_OPTIMIZERS", "install"]

#: The ``torch.optim`` classes that take ``fused=``.
FUSED_OPTIMIZERS = ("Adam", "AdamW", "SGD", "Adagrad", "Adamax", "NAdam", "RAdam", "RMSprop")


def _asks_fused(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return bool(kwargs.get("fused"))


def install(c: Compat) -> None:
    if c.answers.fused_optimizers is not False:
        return
    import torch.optim

    name = c.devices.name
    for cls_name in FUSED_OPTIMIZERS:
        cls = getattr(torch.optim, cls_name, None)
        if cls is None:
            continue
        init = cls.__init__

        def unfused(site: Site, this: Any, *args: Any, _init: Any = init, _cls: str = cls_name, **kwargs: Any) -> Any:
            kwargs["fused"] = None
            site.note(f"torch.optim.{_cls}(fused=True)",
                      f"torch.optim.{_cls}(fused=None): {name} has no fused optimizer kernels, so torch's default "
                      "implementation runs (the same update)", "different")
            return _init(this, *args, **kwargs)

        c.patches.replace(cls, "__init__", scoped(c.scope, init, unfused, _asks_fused))
