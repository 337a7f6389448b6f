"""torch.compile per device: the policy record, the pure choice, the user's override and applying it.

Plugins answer :func:`ezpz.hookspecs.ezpz_compile_policy` with a
:class:`CompilePolicy` built by :func:`choose_compile` from their ordered
:class:`CompileOption` list; the core applies ``EZPZ_COMPILE`` /
``setup(compile=...)`` with :func:`apply_compile_request`; ``Runtime.compile``
calls :func:`compile_model`. Nothing here imports torch at module level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import attr
from attr import field

from ezpz.primitives.converters import as_dict, as_tuple
from ezpz.errors import ConfigError, UnavailableError
from ezpz.primitives.frozen_records import frozen
from ezpz.inputs.settings import COMPILE_BACKENDS, COMPILE_CHOICES, parse_compile_request

__all__ = [
    "ALWAYS_AVAILABLE",
    "COMPILE_BACKENDS",
    "COMPILE_CHOICES",
    "CompileOption",
    "CompilePolicy",
    "apply_compile_request",
    "choose_compile",
    "compile_model",
    "no_compile_answer",
    "parse_compile_request",
    "triton_installed",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: Need nothing from the device: ``eager`` only traces with TorchDynamo, ``none`` skips compiling.
ALWAYS_AVAILABLE: Mapping[str, str] = {
    "eager": "TorchDynamo tracing with eager kernels needs no device compiler",
    "none": "not compiling always works",
}


def _explained(instance: object, attribute: attr.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be a non-empty explanation")


@frozen(kw_only=True)
class CompileOption:
    """One torch.compile backend for a device and whether it works there, with why."""

    backend: str = field(validator=attr.validators.in_(COMPILE_BACKENDS))
    available: bool
    reason: str = field(validator=_explained)


@frozen(kw_only=True)
class CompilePolicy:
    """How ``Runtime.compile`` calls ``torch.compile`` on this device.

    ``backend`` is ``"inductor"``, ``"aot_eager"``, ``"eager"`` or ``"none"``
    (leave the model alone). ``mode`` and ``options`` go to ``torch.compile``
    as given (torch accepts one of them, not both). ``alternatives`` are the
    other options the plugin weighed, each with whether it is available.
    """

    backend: str = field(validator=attr.validators.in_(COMPILE_BACKENDS))
    reason: str = field(validator=_explained)
    mode: str | None = None
    options: Mapping[str, Any] = field(factory=dict, converter=as_dict, hash=False)
    alternatives: tuple[CompileOption, ...] = field(default=(), converter=as_tuple)
    device: str | None = None  # how the plugin names the device in messages ("cuda (8x AMD Instinct MI300X ...)")

    @property
    def label(self) -> str:
        extra = f" (mode {self.mode})" if self.mode else ""
        return f"{self.backend}{extra}"


def triton_installed() -> bool:
    """Whether a ``triton`` package is installed (found, not imported): Inductor's GPU code generator.

    The NVIDIA, ROCm and XPU wheels ship it under the same module name
    (``triton``, ``pytorch-triton-rocm``, ``pytorch-triton-xpu``).
    """
    import importlib.util

    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def choose_compile(
    options: Sequence[CompileOption], *, device: str, mode: str | None = None,
    compile_options: Mapping[str, Any] | None = None,
) -> CompilePolicy:
    """The first available option in the plugin's order; the rest are kept as alternatives."""
    if not options:
        raise ValueError("choose_compile needs at least one option")
    tried: list[CompileOption] = []
    for opt in options:
        if opt.available:
            later = [o for o in options if o is not opt and o not in tried]
            reason = opt.reason if not tried else (
                f"{opt.reason} (after {', '.join(t.backend for t in tried)} unavailable)")
            return CompilePolicy(backend=opt.backend, reason=reason, mode=mode if opt.backend != "none" else None,
                                 options=(compile_options or {}) if opt.backend == "inductor" else {},
                                 alternatives=(*tried, *later), device=device)
        tried.append(opt)
    return CompilePolicy(backend="none", reason=f"no torch.compile backend works on {device}: not compiling",
                         alternatives=tried, device=device)


def no_compile_answer(device: str) -> CompilePolicy:
    """What the core uses when no plugin describes torch.compile for the device."""
    return CompilePolicy(backend="none", reason=f"no plugin described torch.compile for {device}: not compiling")


def apply_compile_request(policy: CompilePolicy, requested: str, *, device: str,
                          requested_from: str = "EZPZ_COMPILE", torch_has_compile: bool = True) -> CompilePolicy:
    """The plugin's policy with the user's request applied; a backend the device cannot use raises, naming it.

    ``eager`` needs only TorchDynamo, so it is available wherever ``torch_has_compile`` (torch 2.0+).
    """
    device = policy.device or device
    if requested == "auto" or requested == policy.backend:
        if requested != "auto":
            return attr.evolve(policy, reason=f"requested by {requested_from}={requested}: {policy.reason}")
        return policy
    chosen_as_option = CompileOption(backend=policy.backend, available=True, reason=policy.reason)
    known = [chosen_as_option, *policy.alternatives]
    match = next((o for o in known if o.backend == requested), None)
    if match is None and requested in ALWAYS_AVAILABLE:
        works = torch_has_compile or requested == "none"
        match = CompileOption(backend=requested, available=works,
                              reason=ALWAYS_AVAILABLE[requested] if works else "torch.compile arrived in torch 2.0")
    if match is None or not match.available:
        usable = [o.backend for o in known if o.available] + [
            b for b in ALWAYS_AVAILABLE if b not in [o.backend for o in known] and (torch_has_compile or b == "none")]
        why = f": {match.reason}" if match is not None else ": the device plugin does not offer it"
        raise UnavailableError(
            name=requested_from, value=requested,
            expected=f"a torch.compile backend that works on {device}: {', '.join(dict.fromkeys(usable))}",
            fix=f"{requested} is not usable on {device}{why}; set {requested_from}=auto to let ezpz pick",
        )
    others = [o for o in known if o.backend != requested]
    return CompilePolicy(
        backend=requested, reason=f"requested by {requested_from}={requested}: {match.reason}",
        mode=policy.mode if requested == policy.backend else None,
        options=policy.options if requested == "inductor" and policy.backend == "inductor" else {},
        alternatives=others, device=policy.device,
    )


def compile_model(model: Callable[_P, _R], policy: CompilePolicy, **overrides: Any) -> Callable[_P, _R]:
    """``torch.compile(model, backend=..., mode=..., options=...)`` per ``policy``; keyword overrides win.

    Returns ``model`` unchanged when the policy's backend is ``none`` and no
    ``backend=`` override asks for compiling anyway.
    """
    backend = overrides.pop("backend", policy.backend)
    if backend == "none":
        return model
    import torch

    kwargs: dict[str, Any] = {"backend": backend}
    if "mode" not in overrides and "options" not in overrides and backend == policy.backend:
        if policy.mode is not None:
            kwargs["mode"] = policy.mode
        elif policy.options:
            kwargs["options"] = dict(policy.options)
    kwargs.update(overrides)
    return torch.compile(model, **kwargs)
