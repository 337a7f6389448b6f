"""DeepSpeed config from ezpz's decisions (pure): precision sections from the AMP policy, nothing re-detected.

``Runtime.deepspeed_config`` calls :func:`deepspeed_config` with its plan. DeepSpeed itself
is never imported here; ``setup()`` has already set ``DS_ACCELERATOR`` (from
the device plugin's lifecycle answer) and created the process group that
``deepspeed.initialize`` then finds and reuses.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ezpz.errors import ConfigError, UnavailableError
from ezpz.plugin_kit.lifecycle import with_ds_accelerator  # kept here for existing callers; the kit owns it

if TYPE_CHECKING:
    from ezpz.decisions import SetupPlan

__all__ = ["PRECISION_SECTIONS", "deepspeed_config", "precision_sections", "with_ds_accelerator"]

#: DeepSpeed config section -> ezpz precision name.
PRECISION_SECTIONS: Mapping[str, str] = {"bf16": "bf16", "fp16": "fp16"}
DYNAMIC_LOSS_SCALE = 0  # DeepSpeed: fp16.loss_scale 0 means dynamic loss scaling


def _enabled(base: Mapping[str, Any], section: str) -> bool | None:
    """The user's ``<section>.enabled``: True/False, or None when unset or ``"auto"`` (ezpz fills it)."""
    value = base.get(section)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(name=f"deepspeed config {section!r}", value=value, expected="a dict such as {'enabled': True}",
                          fix=f"give {section!r} as a dict, or leave it out to have ezpz fill it")
    enabled = value.get("enabled", None)
    if enabled is None or enabled == "auto":
        return None
    if not isinstance(enabled, bool):
        raise ConfigError(name=f"deepspeed config {section}.enabled", value=enabled, expected="true, false or 'auto'",
                          fix=f"set {section}.enabled to a boolean, or 'auto' to have ezpz decide")
    return enabled


def precision_sections(
    base: Mapping[str, Any], *, dtype: str, grad_scaler: bool, device: str,
    supports: Callable[[str], str | None],
) -> dict[str, Any]:
    """``base`` with ``bf16``/``fp16`` filled from the AMP decision (pure: no torch, no DeepSpeed).

    ``dtype``/``grad_scaler`` are the AMP policy's; ``supports(dtype)`` returns
    None when the device can do ``dtype``, else why not. A section the user
    enabled for a dtype the device cannot do raises, naming the key; both
    enabled raises too (DeepSpeed accepts one). Sections the user left out or
    set to ``"auto"`` follow the policy; everything else the user set is kept.
    """
    if base is not None and not isinstance(base, Mapping):
        raise ConfigError(name="deepspeed_config(base=...)", value=type(base).__name__,
                          expected="a dict (the DeepSpeed config to complete) or None",
                          fix="pass the DeepSpeed config as a dict, e.g. json.load(open('ds_config.json'))")
    config: dict[str, Any] = copy.deepcopy(dict(base or {}))
    user = {section: _enabled(config, section) for section in PRECISION_SECTIONS}
    for section, enabled in user.items():
        if enabled:
            why_not = supports(PRECISION_SECTIONS[section])
            if why_not is not None:
                raise UnavailableError(
                    name=f"deepspeed config {section}.enabled", value=True,
                    expected=f"a precision {device} supports (ezpz chose {dtype})",
                    fix=f"{why_not}; remove the {section!r} section (ezpz fills it) or set {section}.enabled to false",
                )
    if all(user.values()):
        raise ConfigError(name="deepspeed config bf16.enabled and fp16.enabled", value=True,
                          expected="at most one of them enabled (DeepSpeed trains in one low precision)",
                          fix="drop one of the two sections, or both to have ezpz choose")
    user_chose = any(user.values())
    for section, precision in PRECISION_SECTIONS.items():
        if user[section] is not None:
            filled = dict(config[section])
        else:
            filled = dict(config.get(section) or {})
            filled["enabled"] = (not user_chose) and dtype == precision
        if section == "fp16" and filled["enabled"]:
            filled.setdefault("loss_scale", DYNAMIC_LOSS_SCALE if grad_scaler else 1.0)
        config[section] = filled
    return config


def deepspeed_config(plan: SetupPlan, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``plan``'s AMP policy as DeepSpeed ``bf16``/``fp16`` sections over ``base``.

    Whether the device can do a dtype the user enabled is read from the
    per-dtype support the device plugin gave when the plan was made
    (:meth:`~ezpz.decisions.AmpPolicy.why_unsupported`), so the reason in the
    error is the plugin's and no plugin is asked again.
    """
    amp, label = plan.amp, plan.device.candidate.label

    def supports(precision: str) -> str | None:
        return None if precision == amp.dtype else amp.why_unsupported(precision, label)

    return precision_sections(base if base is not None else {}, dtype=amp.dtype, grad_scaler=amp.grad_scaler,
                              device=label, supports=supports)
