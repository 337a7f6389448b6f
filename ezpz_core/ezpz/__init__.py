"""ezpz: one call, ``ezpz.hooks.setup()``, picks device, backend, precision and rank layout, and says why.

Importing ezpz discovers plugins (entry-point group ``ezpz``) and nothing more:
no probing, no environment changes, no GPU initialisation.

The original ezpz's names (``ezpz.setup_torch``, ``ezpz.get_rank``, ...)
resolve lazily from :mod:`ezpz.compat`.
"""

from __future__ import annotations

from typing import Any

import pluggy

__version__ = "1.0.0"  # = pyproject.toml; 1.x sorts above the unrelated PyPI "ezpz" 0.1.x

hookimpl = pluggy.HookimplMarker("ezpz")
"""Marker for plugin hook implementations: ``@ezpz.hookimpl``."""

from ezpz import hooks  # noqa: E402  (needs hookimpl defined for the built-ins)
from ezpz.log import get_logger  # noqa: E402  (stdlib logger; attaches output on first use, not at import)

__all__ = ["__version__", "get_logger", "hookimpl", "hooks"]


#: Where the original ezpz's top-level names live here, in lookup order (imported on first use).
_FORWARDS = ("ezpz.compat", "ezpz.distributed", "ezpz.memory", "ezpz.log", "ezpz.versions")
#: Submodules that ``ezpz.<name>`` imports on first access, as the original's lazy modules did.
_SUBMODULES = frozenset({"compat", "distributed", "examples", "launch", "log", "memory"})


def __getattr__(name: str) -> Any:
    """Resolve the original ezpz's names (``setup_torch``, ``get_rank``, ``timeitlogit``, ...) on first use.

    Names of the original's training utilities (``History``, ``setup_wandb``,
    ...) raise an AttributeError saying they are not included and what to use.
    """
    if name.startswith("_"):
        raise AttributeError(name)
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f"ezpz.{name}")
    for module_name in _FORWARDS:  # importlib, not `from ezpz import`: that would recurse into here
        module = importlib.import_module(module_name)
        if name in module.__all__:
            value = getattr(module, name)
            globals()[name] = value
            return value
    from ezpz.migration import missing_attribute

    raise missing_attribute("ezpz", name)
