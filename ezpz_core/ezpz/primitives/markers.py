"""The pluggy markers of project ``ezpz``: ``hookspec`` for the core's hook specs, ``hookimpl`` for plugins.

Plugins write ``@ezpz.hookimpl`` (the same object, re-exported by :mod:`ezpz`).
"""

from __future__ import annotations

import pluggy

__all__ = ["hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker("ezpz")
hookimpl = pluggy.HookimplMarker("ezpz")
