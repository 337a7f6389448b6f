"""Device requests: ``.to('cuda')``/``.to(0)``, ``.cuda()``, ``device='cuda'`` in factories, pinned memory, DataLoader.

Each wrapper first checks, without looking at the caller, whether the call asks for CUDA at all; only such
calls from the project are translated (:mod:`.devices`) and noted in the report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ezpz.cuda_compat.context import Compat
from ezpz.cuda_compat.patching import scoped
from ezpz.cuda_compat.scope import Site

__all__ = ["FACTORIES", "install"]

#: torch functions whose ``device=`` argument may name CUDA.
FACTORIES = (
    "arange", "as_tensor", "empty", "empty_like", "empty_strided", "eye", "full", "full_like", "linspace",
    "logspace", "ones", "ones_like", "rand", "rand_like", "randint", "randint_like", "randn", "randn_like",
    "randperm", "range", "scalar_tensor", "tensor", "tril_indices", "triu_indices", "zeros", "zeros_like",
)


def install(c: Compat) -> None:
    import torch

    devices, scope, patches = c.devices, c.scope, c.patches
    asks = devices.asks_cuda

    def to_needs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        return (len(args) > 1 and asks(args[1])) or ("device" in kwargs and asks(kwargs["device"]))

    def move(call: str) -> Any:
        said: dict[Any, tuple[Any, str, str]] = {}  # what each asked device became, and the report's words

        def words(asked: Any) -> tuple[Any, str, str]:
            found = said.get(asked)
            if found is None:
                found = said[asked] = (devices.same_kind(asked), f"{call}({asked!r})", f"{call}({devices.name!r})")
            return found

        def redirect(site: Site, this: Any, *args: Any, **kwargs: Any) -> Any:
            if args and asks(args[0]):
                target, asked_text, became = words(args[0])
                args = (target, *args[1:])
            else:
                target, asked_text, became = words(kwargs["device"])
                kwargs["device"] = target
            site.note(asked_text, became, "same")
            if call == "Module.to":
                return _keeping_ties(site, this, lambda: originals[call](this, *args, **kwargs), devices.name)
            return originals[call](this, *args, **kwargs)
        return redirect

    originals: dict[str, Callable[..., Any]] = {"Tensor.to": torch.Tensor.to, "Module.to": torch.nn.Module.to}
    patches.replace(torch.Tensor, "to", scoped(scope, torch.Tensor.to, move("Tensor.to"), to_needs))
    patches.replace(torch.nn.Module, "to", scoped(scope, torch.nn.Module.to, move("Module.to"), to_needs))

    def cuda_method(owner: Any, call: str) -> None:
        original = owner.cuda

        def redirect(site: Site, this: Any, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
            target = devices.target if device is None else devices.device(device)
            site.note(f"{call}({'' if device is None else repr(device)})", f".to({str(target)!r})", "same")
            if isinstance(this, torch.nn.Module):
                return _keeping_ties(site, this, lambda: originals["Module.to"](this, target), devices.name)
            return originals["Tensor.to"](this, target, non_blocking=non_blocking, **kwargs)

        patches.replace(owner, "cuda", scoped(scope, original, redirect))

    cuda_method(torch.Tensor, "Tensor.cuda")
    cuda_method(torch.nn.Module, "Module.cuda")

    def device_kwarg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        device = kwargs.get("device")
        return device is not None and asks(device)

    for name in FACTORIES:
        original = getattr(torch, name, None)
        if original is None:
            continue

        def redirect(site: Site, *args: Any, _name: str = name, _original: Any = original,
                     _said: dict[Any, tuple[Any, str]] = {}, **kwargs: Any) -> Any:  # noqa: B006 - per factory
            asked = kwargs["device"]
            found = _said.get(asked)
            if found is None:
                found = _said[asked] = (devices.same_kind(asked), f"torch.{_name}(device={asked!r})")
            kwargs["device"] = found[0]
            site.note(found[1], f"device={devices.name!r}", "same")
            return _original(*args, **kwargs)

        patches.replace(torch, name, scoped(scope, original, redirect, device_kwarg, through_torch=True))

    _install_pinning(c)


def _keeping_ties(site: Site, module: Any, move: Any, name: str) -> Any:
    """Run ``move`` (a ``Module.to``) and keep parameters that were one object before it one object after.

    On CUDA ``Module.to`` swaps each parameter's data in place, so a tied weight (``wte.weight =
    lm_head.weight``) stays tied. Where the device's tensors cannot take a CPU tensor's place in place
    (PrivateUse1 devices, XLA), torch makes a new Parameter per module and the tie silently breaks; the
    training then differs from CUDA's. Re-tying restores what the script had on CUDA.
    """
    if not hasattr(module, "_parameters"):  # torch's private table (torch_private.PRIVATE_NAMES): no re-tie
        return move()
    owners: dict[int, list[tuple[Any, str]]] = {}
    for owner in module.modules():
        for pname, param in owner._parameters.items():
            if param is not None:
                owners.setdefault(id(param), []).append((owner, pname))
    shared = [places for places in owners.values() if len(places) > 1]
    result = move()
    retied = 0
    for places in shared:
        first_owner, first_name = places[0]
        kept = first_owner._parameters[first_name]
        for owner, pname in places[1:]:
            if owner._parameters[pname] is not kept:
                owner._parameters[pname] = kept
                retied += 1
    if retied:
        site.note("Module.to: shared parameters", f"kept tied on {name} ({retied} re-tied: torch untied them "
                  f"because {name} tensors cannot replace CPU ones in place)", "same")
    return result


def _install_pinning(c: Compat) -> None:
    """``Tensor.pin_memory()`` and ``DataLoader(pin_memory=True)`` where the device has no pinned host memory."""
    import torch
    import torch.utils.data

    if c.answers.pinned_memory is not False:
        return
    scope, patches, name = c.scope, c.patches, c.devices.name
    why = f"no pinned host memory for {name}: the tensor stays in ordinary host memory"

    def pin(site: Site, this: Any, *args: Any, **kwargs: Any) -> Any:
        site.note("Tensor.pin_memory()", f"the tensor itself ({why})", "none")
        return this

    patches.replace(torch.Tensor, "pin_memory", scoped(scope, torch.Tensor.pin_memory, pin))

    loader_init = torch.utils.data.DataLoader.__init__

    def loader(site: Site, this: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("pin_memory"):
            kwargs["pin_memory"] = False
            site.note("DataLoader(pin_memory=True)", f"DataLoader(pin_memory=False) ({why})", "none")
        return loader_init(this, *args, **kwargs)

    def asks_pinning(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        return bool(kwargs.get("pin_memory"))

    patches.replace(torch.utils.data.DataLoader, "__init__", scoped(scope, loader_init, loader, asks_pinning))
