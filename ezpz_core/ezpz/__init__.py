"""ezpz: one call, ``ezpz.hooks.setup()``, picks device, backend, precision and rank layout, and says why.

Importing ezpz discovers plugins (entry-point group ``ezpz``) and nothing more:
no probing, no environment changes, no GPU initialisation.
"""

from __future__ import annotations

import pluggy

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("ezpz")
"""Marker for plugin hook implementations: ``@ezpz.hookimpl``."""

from ezpz import hooks  # noqa: E402  (needs hookimpl defined for the built-ins)

__all__ = ["__version__", "hookimpl", "hooks"]
