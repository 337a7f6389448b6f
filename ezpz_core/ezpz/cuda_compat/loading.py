"""``torch.load`` of CUDA checkpoints: ``map_location='cuda...'`` and files whose storages are tagged ``cuda``.

A ``map_location`` naming CUDA (a string, a ``torch.device``, or the values of a dict) is translated. Without
one, storages saved on ``cuda`` or ``cuda:N`` go to the chosen device (torch would refuse them on a host
without CUDA) and every other storage stays where it was saved, as torch does.
"""

from __future__ import annotations

from typing import Any

from ezpz.cuda_compat.context import Compat
from ezpz.cuda_compat.patching import scoped
from ezpz.cuda_compat.scope import Site
from ezpz.primitives.cuda_device import is_cuda_device_string

__all__ = ["install"]


def install(c: Compat) -> None:
    import torch
    import torch.serialization as serialization

    load, devices, target = torch.load, c.devices, c.target

    def loading(site: Site, f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        if map_location is None:
            seen: list[str] = []

            def restore(storage: Any, location: str) -> Any:
                if is_cuda_device_string(location):
                    seen.append(location)
                    return serialization.default_restore_location(storage, str(devices.device(location)))
                return None

            result = load(f, restore, *args, **kwargs)
            if seen:
                site.note("torch.load(map_location=None)",
                          f"storages saved on {', '.join(sorted(set(seen)))} loaded onto {target}", "same")
            return result
        if isinstance(map_location, dict):
            mapped = {k: (devices.same_kind(v) if devices.asks_cuda(v, ordinals=False) else v)
                      for k, v in map_location.items()}
            if mapped != map_location:
                site.note(f"torch.load(map_location={map_location!r})", f"map_location={mapped!r}", "same")
            return load(f, mapped, *args, **kwargs)
        if devices.asks_cuda(map_location, ordinals=False):
            site.note(f"torch.load(map_location={map_location!r})", f"map_location={target!r}", "same")
            return load(f, devices.same_kind(map_location), *args, **kwargs)
        return load(f, map_location, *args, **kwargs)

    c.patches.replace(torch, "load", scoped(c.scope, load, loading))
