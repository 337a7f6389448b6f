"""What cannot be redirected raises at its call site: the file and line, the API and the portable alternative.

A custom CUDA extension (``torch.utils.cpp_extension`` with CUDA sources) has no kernel for another device;
CUDA graphs exist only where the device has graphs. Never a silent CPU fallback. (CuPy needs no wrapper: on a
host without CUDA, ``import cupy`` fails on its own; where CUDA is chosen, nothing is redirected.)
"""

from __future__ import annotations

from typing import Any

from ezpz.cuda_compat.context import Compat
from ezpz.cuda_compat.patching import scoped, scoped_class
from ezpz.cuda_compat.scope import Site
from ezpz.errors import EzpzError

__all__ = ["NotRedirectable", "install"]


class NotRedirectable(EzpzError, RuntimeError):
    """A CUDA-only API the mode cannot answer on the chosen device."""

    def __init__(self, *, where: str, api: str, device: str, alternative: str) -> None:
        self.where, self.api, self.device, self.alternative = where, api, device, alternative
        super().__init__(f"{where}: {api} has no equivalent on {device} under python -m ezpz.cuda_compat. "
                         f"Portable alternative: {alternative}")


def install(c: Compat) -> None:
    import torch
    import torch.utils.cpp_extension as cpp_extension

    def refuse(api: str, alternative: str) -> Any:
        def raising(site: Site, *args: Any, **kwargs: Any) -> Any:
            c.unsupported.append({"file": site.file, "line": site.line, "api": api})
            site.note(api, "raised NotRedirectable", "none")
            raise NotRedirectable(where=f"{site.file}:{site.line}", api=api, device=c.target, alternative=alternative)
        return raising

    def cuda_sources(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        sources = kwargs.get("sources", args[1] if len(args) > 1 else ())
        sources = [sources] if isinstance(sources, str) else list(sources or ())
        return bool(kwargs.get("with_cuda") or kwargs.get("cuda_sources")
                    or any(str(s).endswith((".cu", ".cuh")) for s in sources))

    extension = "the same operation in PyTorch ops (or torch.compile), or the kernel built for this device"
    for name in ("load", "load_inline"):
        original = getattr(cpp_extension, name)
        c.patches.replace(cpp_extension, name, scoped(
            c.scope, original, refuse(f"torch.utils.cpp_extension.{name}(CUDA sources)", extension), cuda_sources))
    c.patches.replace(cpp_extension, "CUDAExtension", scoped(
        c.scope, cpp_extension.CUDAExtension, refuse("torch.utils.cpp_extension.CUDAExtension", extension)))

    if not c.answers.graphs:
        graphs = "run the captured code eagerly (or torch.compile it, mode='reduce-overhead' where supported)"
        for name in ("CUDAGraph", "graph", "make_graphed_callables", "graph_pool_handle"):
            original = getattr(torch.cuda, name, None)
            if original is not None:
                front = scoped_class if isinstance(original, type) else scoped
                c.patches.replace(torch.cuda, name, front(c.scope, original, refuse(f"torch.cuda.{name}", graphs)))
