"""CUDA devices that reach torch other than as a factory's argument: default devices, generators, meshes, modules.

``with torch.device('cuda'):`` and ``torch.set_default_device('cuda')`` make torch's ``DeviceContext`` (a
torch-function mode that fills in ``device=`` for torch's factory functions); ``torch.Generator(device='cuda')``,
``init_device_mesh('cuda', ...)`` / ``DeviceMesh('cuda', ...)`` and ``torch.get_device_module('cuda')`` name the
device by type. Each, from the project, gets the chosen device. ``nn.Linear(..., device='cuda')`` is
:mod:`.tensors`' (its factory wrappers follow torch's calls back to the project's line).

The default-device mode decides "is this a factory" from a set torch builds once
(``torch.utils._device._device_constructors``); built after :mod:`.tensors` replaced the factories, it would
hold the replacements, never match torch's own functions, and leave the tensors on the CPU without a word. It is
built here first, from torch's originals.
"""

from __future__ import annotations

import sys
from typing import Any

from ezpz.cuda_compat.context import Compat
from ezpz.cuda_compat.patching import front_class, scoped
from ezpz.cuda_compat.scope import Site
from ezpz.cuda_compat.unsupported import NotRedirectable

__all__ = ["install"]


def install(c: Compat) -> None:
    import torch
    import torch.utils._device as device_mode

    constructors = getattr(device_mode, "_device_constructors", None)  # see ezpz.primitives.torch_private
    if constructors is not None:
        constructors()  # built from torch's own factories, before .tensors replaces them
    devices, scope, patches = c.devices, c.scope, c.patches
    asks = devices.asks_cuda
    getframe = sys._getframe
    context = device_mode.DeviceContext

    class DeviceContext(context):  # type: ignore[misc, valid-type]
        """torch's default-device mode, with a CUDA device from the project replaced by the chosen one."""

        def __init__(self, device: Any) -> None:
            if asks(device, ordinals=False):
                site = scope.user_site(getframe(1))
                if site is not None:
                    target = devices.device(device)
                    site.note(f"default device {device!r} (torch.device context / set_default_device)",
                              f"default device {str(target)!r}", "same")
                    device = target
            super().__init__(device)

    patches.replace(device_mode, "DeviceContext", DeviceContext)

    generator = torch.Generator

    def new_generator(kind: type, device: Any = "cpu") -> Any:
        site = scope.site(getframe(1)) or scope.user_site(getframe(1)) if asks(device, ordinals=False) else None
        if site is None:
            return generator.__new__(kind, device)  # type: ignore[call-arg]  # torch.Generator's C __new__
        target = devices.same_kind(device)
        try:
            made: torch.Generator = generator.__new__(kind, target)  # type: ignore[call-arg]
        except (NotImplementedError, RuntimeError) as err:
            api = f"torch.Generator(device={device!r})"
            c.unsupported.append({"file": site.file, "line": site.line, "api": api})
            site.note(api, "raised NotRedirectable", "none")
            raise NotRedirectable(where=f"{site.file}:{site.line}", api=api, device=devices.name, alternative=(
                f"a CPU generator (torch.Generator()) and random tensors drawn on the CPU then moved: {devices.name} "
                f"has no generator of its own ({type(err).__name__}: {str(err).splitlines()[0][:160]})")) from None
        site.note(f"torch.Generator(device={device!r})", f"torch.Generator(device={str(target)!r})", "same")
        return made

    patches.replace(torch, "Generator", front_class(generator, new_generator))

    get_device_module = torch.get_device_module

    def device_module(site: Site, device: Any = None) -> Any:
        site.note(f"torch.get_device_module({device!r})",
                  f"torch.cuda as this mode answers it (for {devices.name})", "same")
        return torch.cuda

    def names_cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        device = args[0] if args else kwargs.get("device")
        return device is not None and asks(device, ordinals=False)

    patches.replace(torch, "get_device_module", scoped(scope, get_device_module, device_module, names_cuda))
    _install_mesh(c)


def _install_mesh(c: Compat) -> None:
    """``init_device_mesh('cuda', ...)`` and ``DeviceMesh('cuda', ...)`` -> the chosen device's type."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    import torch.distributed.device_mesh as mesh_module

    scope, patches, kind = c.scope, c.patches, c.devices.type
    init = mesh_module.init_device_mesh

    def names_cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        device_type = args[0] if args else kwargs.get("device_type")
        return isinstance(device_type, str) and device_type.startswith("cuda")

    def init_mesh(site: Site, *args: Any, **kwargs: Any) -> Any:
        asked = args[0] if args else kwargs.pop("device_type")
        site.note(f"init_device_mesh({asked!r}, ...)", f"init_device_mesh({kind!r}, ...)", "same")
        return init(kind, *args[1:], **kwargs)

    wrapped = scoped(scope, init, init_mesh, names_cuda)
    patches.replace(mesh_module, "init_device_mesh", wrapped)
    if getattr(dist, "init_device_mesh", None) is init:
        patches.replace(dist, "init_device_mesh", wrapped)

    mesh = mesh_module.DeviceMesh
    getframe = sys._getframe

    def new_mesh(cls: type, device_type: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(device_type, str) and device_type.startswith("cuda"):
            site = scope.site(getframe(1))
            if site is not None:
                site.note(f"DeviceMesh({device_type!r}, ...)", f"DeviceMesh({kind!r}, ...)", "same")
                device_type = kind
        return mesh(device_type, *args, **kwargs)

    front = front_class(mesh, new_mesh)
    patches.replace(mesh_module, "DeviceMesh", front)
    if getattr(dist, "DeviceMesh", None) is mesh:
        patches.replace(dist, "DeviceMesh", front)
