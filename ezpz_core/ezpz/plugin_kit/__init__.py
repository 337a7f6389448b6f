"""The plugin kit: the public helpers every device plugin uses, in-tree or third-party.

* :func:`facts_if_ours`: your own facts from a device (or None), without importing your facts module to ask;
* :func:`vendor_then_gloo`, :func:`backend_in_build`, :func:`gloo_fallback`: collective-backend options in
  the order every device plugin uses (your vendor's collectives first, gloo as the fallback);
* :func:`parse_visible_devices` / :class:`VisibleList`: a ``CUDA_VISIBLE_DEVICES``-style list, by one
  documented rule set;
* :func:`parse_bool`: a yes/no environment variable (``1/true/yes/on``, ``0/false/no/off``), a bad value a
  :class:`~ezpz.errors.ConfigError` naming it;
* :func:`get_logger`: structured events that obey ezpz's rank filter; never configures logging;
* :func:`with_ds_accelerator`: tell DeepSpeed which accelerator ezpz chose, from ``ezpz_before_init``.
* :func:`gloo_unsupported_reduce_ops` / :func:`gloo_mesh_support`: the reduce operations gloo lacks on this torch,
  for a plugin whose collectives are gloo or run through it (``ezpz_mesh_support``);
* :func:`with_nccl_hang_budget`: torch's NCCL watchdog (NCCL and RCCL) set from ``EZPZ_TIMEOUT``, from ``ezpz_before_init``;
  :func:`nccl_watchdog_env` and :data:`HEARTBEAT_FLOOR_S`, the settings it applies, for an NCCL-derived library.

``import ezpz.plugin_kit`` costs only the standard library: the records behind the backend options and
the visible-devices list load on first use of those names, so a hook may call :func:`facts_if_ours` before
importing anything else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ezpz.plugin_kit.ownership import facts_if_ours

if TYPE_CHECKING:
    from ezpz.plugin_kit.logs import get_logger
    from ezpz.plugin_kit.backends import backend_in_build, gloo_fallback, vendor_then_gloo
    from ezpz.plugin_kit.gloo_reductions import GLOO_REDUCE_SOURCES, gloo_mesh_support, gloo_unsupported_reduce_ops
    from ezpz.plugin_kit.lifecycle import (
        HEARTBEAT_FLOOR_S, nccl_watchdog_env, with_ds_accelerator, with_nccl_hang_budget,
    )
    from ezpz.plugin_kit.visible import VisibleList, parse_visible_devices
    from ezpz.inputs.settings import parse_bool

__all__ = [
    "GLOO_REDUCE_SOURCES",
    "HEARTBEAT_FLOOR_S",
    "VisibleList",
    "backend_in_build",
    "facts_if_ours",
    "get_logger",
    "gloo_fallback",
    "gloo_mesh_support",
    "gloo_unsupported_reduce_ops",
    "nccl_watchdog_env",
    "parse_bool",
    "parse_visible_devices",
    "vendor_then_gloo",
    "with_ds_accelerator",
    "with_nccl_hang_budget",
]

_LAZY = {
    "get_logger": "ezpz.plugin_kit.logs",
    "backend_in_build": "ezpz.plugin_kit.backends",
    "gloo_fallback": "ezpz.plugin_kit.backends",
    "vendor_then_gloo": "ezpz.plugin_kit.backends",
    "GLOO_REDUCE_SOURCES": "ezpz.plugin_kit.gloo_reductions",
    "gloo_mesh_support": "ezpz.plugin_kit.gloo_reductions",
    "gloo_unsupported_reduce_ops": "ezpz.plugin_kit.gloo_reductions",
    "VisibleList": "ezpz.plugin_kit.visible",
    "parse_visible_devices": "ezpz.plugin_kit.visible",
    "with_ds_accelerator": "ezpz.plugin_kit.lifecycle",
    "with_nccl_hang_budget": "ezpz.plugin_kit.lifecycle",
    "nccl_watchdog_env": "ezpz.plugin_kit.lifecycle",
    "HEARTBEAT_FLOOR_S": "ezpz.plugin_kit.lifecycle",
    "parse_bool": "ezpz.inputs.settings",
}


def __getattr__(name: str) -> Any:
    """The names that need ezpz's records, imported on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
