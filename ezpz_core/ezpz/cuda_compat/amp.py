"""CUDA mixed precision -> the chosen device's: ``torch.autocast('cuda')``, ``torch.cuda.amp``, TF32/cuDNN flags.

A dtype the script names is kept where the device can do it (fp32 stays fp32: autocast off); one it cannot
do is replaced by the precision policy's choice, with the plugin's reason; a precision the user set for the
run (``EZPZ_PRECISION``) wins over the script's. A grad scaler stays on only where fp16 stays fp16. TF32
and cuDNN flags are applied as written (they only steer CUDA kernels) and reported as not applying where the
device is not CUDA.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ezpz.cuda_compat.context import Compat
from ezpz.cuda_compat.patching import scoped
from ezpz.cuda_compat.scope import Site

__all__ = ["install", "settle"]

_NAMES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32"}


def settle(c: Compat, asked: str) -> tuple[str, str, str]:
    """``(precision, behaves, why)`` for a precision the script names (``bf16``, ``fp16``, ``fp32``)."""
    amp, name = c.rt.amp, c.target
    if c.precision_asked != "auto" and asked != c.precision_asked:
        return amp.dtype, "different", f"EZPZ_PRECISION={c.precision_asked} asks {amp.dtype} for this run"
    if asked == "fp32":
        return "fp32", "same", "fp32 stays fp32: autocast off"
    why = amp.why_unsupported(asked, name)
    if why is None:
        return asked, "same", f"{name} does {asked}"
    return amp.dtype, "different", f"{asked} replaced by the policy's {amp.dtype}: {why}"


def install(c: Compat) -> None:
    import torch
    import torch.amp.autocast_mode as autocast_mode
    import torch.amp.grad_scaler as grad_scaler

    scope, patches, target_type, name = c.scope, c.patches, c.rt.device_type, c.target
    autocast_init = autocast_mode.autocast.__init__
    scaler_init = grad_scaler.GradScaler.__init__

    def autocast_for(site: Site, this: Any, call: str, dtype: Any, enabled: bool, cache_enabled: Any) -> None:
        asked = _NAMES.get(str(dtype).removeprefix("torch."), "fp16") if dtype is not None else "fp16"
        precision, behaves, why = settle(c, asked)
        if precision == "fp32" or not enabled:
            autocast_init(this, target_type, enabled=False)
            became = f"torch.autocast({target_type!r}, enabled=False)"
        else:
            autocast_init(this, target_type, dtype=getattr(torch, _torch_name(precision)), enabled=True,
                          cache_enabled=cache_enabled)
            became = f"torch.autocast({target_type!r}, dtype=torch.{_torch_name(precision)})"
        site.note(call, f"{became}: {why}", behaves)

    def generic(site: Site, this: Any, device_type: Any = None, dtype: Any = None, enabled: bool = True,
                cache_enabled: Any = None) -> None:
        autocast_for(site, this, f"torch.autocast('cuda', dtype={dtype})", dtype, enabled, cache_enabled)

    def asks_cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        device_type = args[1] if len(args) > 1 else kwargs.get("device_type")
        return device_type == "cuda"

    def cuda_amp(site: Site, this: Any, enabled: bool = True, dtype: Any = torch.float16,
                 cache_enabled: bool = True) -> None:
        autocast_for(site, this, f"torch.cuda.amp.autocast(dtype={dtype})", dtype, enabled, cache_enabled)

    patches.replace(autocast_mode.autocast, "__init__", scoped(scope, autocast_init, generic, asks_cuda))
    patches.replace(torch.cuda.amp.autocast, "__init__",
                    scoped(scope, torch.cuda.amp.autocast.__init__, cuda_amp))

    def scaler_for(site: Site, this: Any, call: str, kwargs: dict[str, Any]) -> None:
        enabled = kwargs.pop("enabled", True)
        precision, _, why = settle(c, "fp16")
        keep = enabled and precision == "fp16"
        scaler_init(this, target_type, enabled=keep, **kwargs)
        if enabled and not keep:
            site.note(call, f"torch.amp.GradScaler({target_type!r}, enabled=False): fp16 is not used ({why})",
                      "different")
        else:
            site.note(call, f"torch.amp.GradScaler({target_type!r}, enabled={keep})", "same")

    def generic_scaler(site: Site, this: Any, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
        if device != "cuda":
            return scaler_init(this, device, *args, **kwargs)
        kwargs.update(zip(("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"), args))
        scaler_for(site, this, f"torch.amp.GradScaler('cuda', enabled={kwargs.get('enabled', True)})", kwargs)

    def cuda_scaler(site: Site, this: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.update(zip(("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"), args))
        scaler_for(site, this, f"torch.cuda.amp.GradScaler(enabled={kwargs.get('enabled', True)})", kwargs)

    patches.replace(grad_scaler.GradScaler, "__init__", scoped(scope, scaler_init, generic_scaler))
    patches.replace(torch.cuda.amp.GradScaler, "__init__",
                    scoped(scope, torch.cuda.amp.GradScaler.__init__, cuda_scaler))
    _install_flags(c)


def _torch_name(precision: str) -> str:
    return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[precision]


def _install_flags(c: Compat) -> None:
    """``torch.backends.cuda.matmul.allow_tf32 = ...`` and ``torch.backends.cudnn.* = ...``: applied, reported."""
    import torch

    why = c.rt.amp.tf32_reason

    def flag_setter(owner: type, prefix: str) -> None:
        original: Callable[..., None] = owner.__setattr__

        def setter(site: Site, this: Any, attr_name: str, value: Any) -> None:
            original(this, attr_name, value)
            site.note(f"{prefix}.{attr_name} = {value!r}", f"set, without effect on {c.target}: {why}", "none")

        c.patches.replace(owner, "__setattr__", scoped(c.scope, original, setter))

    flag_setter(type(torch.backends.cuda.matmul), "torch.backends.cuda.matmul")
    flag_setter(type(torch.backends.cudnn), "torch.backends.cudnn")
