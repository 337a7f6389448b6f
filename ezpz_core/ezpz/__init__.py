"""ezpz: one call, ``ezpz.hooks.setup()``, picks device, backend, precision and rank layout, and says why.

Importing ezpz discovers plugins (entry-point group ``ezpz``) and nothing more:
no probing, no environment changes, no GPU initialisation.

The original ezpz's names (``ezpz.setup_torch``, ``ezpz.get_rank``, ``ezpz.get_logger``,
...) resolve lazily from :mod:`ezpz.original`; its public modules (``ezpz.distributed``,
``ezpz.log``, ``ezpz.pbs``, ``ezpz.slurm``, and ``ezpz.launch``, its launcher) are
ordinary modules here.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "1.0.0"  # = pyproject.toml; 1.x sorts above the unrelated PyPI "ezpz" 0.1.x

from ezpz.primitives.markers import hookimpl  # noqa: E402  ``@ezpz.hookimpl`` marks a plugin's hook implementations

from ezpz import hooks  # noqa: E402  (needs hookimpl defined for the built-ins)

__all__ = ["__version__", "get_logger", "hookimpl", "hooks"]


#: Where the original ezpz's top-level names live here, in lookup order (imported on first use).
_FORWARDS = ("ezpz.original.compat", "ezpz.original.distributed", "ezpz.original.memory", "ezpz.original.log",
             "ezpz.original.versions", "ezpz.original.scheduler")
#: Submodules that ``ezpz.<name>`` imports on first access, as the original's lazy modules did.
_SUBMODULES = frozenset({"distributed", "examples", "launch", "log", "pbs", "slurm"})


def __getattr__(name: str) -> Any:
    """Resolve the original ezpz's names (``setup_torch``, ``get_rank``, ``get_logger``, ...) on first use.

    Names of the original's training utilities (``History``, ``setup_wandb``,
    ...) raise an AttributeError saying they are not included and what to use.
    """
    if name.startswith("_"):
        raise AttributeError(name)
    if name in _SUBMODULES:
        return importlib.import_module(f"ezpz.{name}")
    for module_name in _FORWARDS:  # importlib, not `from ezpz import`: that would recurse into here
        module = importlib.import_module(module_name)
        if name in module.__all__:
            value = getattr(module, name)
            globals()[name] = value
            return value
    from ezpz.original.migration import missing_attribute

    raise missing_attribute("ezpz", name)
