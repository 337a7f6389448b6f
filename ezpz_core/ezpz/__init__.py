"""ezpz: one call, ``ezpz.hooks.setup()``, picks device, backend, precision and rank layout, and says why.

Importing ezpz discovers plugins (entry-point group ``ezpz``) and nothing more:
no probing, no environment changes, no GPU initialisation.

The original ezpz's names (``ezpz.setup_torch``, ``ezpz.get_rank``, ...)
resolve lazily from :mod:`ezpz.compat`.
"""

from __future__ import annotations

from typing import Any

import pluggy

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("ezpz")
"""Marker for plugin hook implementations: ``@ezpz.hookimpl``."""

from ezpz import hooks  # noqa: E402  (needs hookimpl defined for the built-ins)
from ezpz.log import get_logger  # noqa: E402  (stdlib logger; attaches output on first use, not at import)

__all__ = ["__version__", "get_logger", "hookimpl", "hooks"]


def __getattr__(name: str) -> Any:
    """Resolve the original ezpz's helpers (``setup_torch``, ``get_rank``, ...) from ezpz.compat."""
    if name.startswith("_"):
        raise AttributeError(name)
    import importlib

    compat = importlib.import_module("ezpz.compat")  # not `from ezpz import`: that would recurse into here
    if name in compat.__all__:
        return getattr(compat, name)
    raise AttributeError(f"module 'ezpz' has no attribute {name!r}")
