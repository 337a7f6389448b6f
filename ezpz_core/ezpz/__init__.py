"""ezpz: one call, ``ezpz.hooks.setup()``, picks device, backend, precision and rank layout, and says why.

Importing ezpz discovers plugins (entry-point group ``ezpz``) and nothing more:
no probing, no environment changes, no GPU initialisation.

The original ezpz's names (``ezpz.setup_torch``, ``ezpz.get_rank``, ``ezpz.get_logger``,
...) resolve lazily from :mod:`ezpz.original`. Modules that moved keep their old
import paths through :data:`MOVED_MODULES`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

__version__ = "1.0.0"  # = pyproject.toml; 1.x sorts above the unrelated PyPI "ezpz" 0.1.x

from ezpz.markers import hookimpl  # noqa: E402  ``@ezpz.hookimpl`` marks a plugin's hook implementations

#: Old import path -> where the module lives now. A package entry also maps its submodules
#: (``ezpz.launch.rendezvous`` -> ``ezpz.launch_env.rendezvous``). Both names give the same module object.
MOVED_MODULES: dict[str, str] = {
    # the original ezpz's public modules
    **{f"ezpz.{m}": f"ezpz.original.{m}" for m in (
        "compat", "distributed", "hostfile", "log", "memory", "meshes", "migration", "pbs", "slurm", "timing",
        "versions")},
    # launch-environment detection and launch drivers
    "ezpz.launch": "ezpz.launch_env",
    "ezpz.launchers": "ezpz.launch_drivers",
    "ezpz.launchers.probe": "ezpz.probes.launcher_tools",
    "ezpz.store": "ezpz.launch_env.store",
    "ezpz.pmi": "ezpz.launch_env.pmi",
    "ezpz.builtin.launchers": "ezpz.builtin.launch_env",
    # the plugin host and setup steps
    "ezpz.plugins": "ezpz.plugin_host.host",
    "ezpz.calls": "ezpz.plugin_host.calls",
    "ezpz.deadline": "ezpz.plugin_host.deadline",
    "ezpz.entry_points": "ezpz.plugin_host.entry_points",
    "ezpz.plugin_names": "ezpz.plugin_host.names",
    "ezpz.probe": "ezpz.probes.torch_build",
    "ezpz.environ": "ezpz.startup.environ",
    "ezpz.planning": "ezpz.startup.planning",
    "ezpz.threads": "ezpz.startup.threads",
    "ezpz.process_group": "ezpz.startup.process_group",
    "ezpz.integrations.deepspeed": "ezpz.deepspeed_config",
}


def _moved_target(name: str) -> str | None:
    if name in MOVED_MODULES:
        return MOVED_MODULES[name]
    head, _, tail = name.rpartition(".")
    while head.startswith("ezpz."):
        if head in MOVED_MODULES:
            return f"{MOVED_MODULES[head]}.{name[len(head) + 1:]}"
        head, _, tail = head.rpartition(".")
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old module path as the module at its new path (one object under both names)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the target module ran when it was imported."""


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Answers only for the old paths in :data:`MOVED_MODULES`; every other import passes by."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not name.startswith("ezpz."):
            return None
        new = _moved_target(name)
        if new is None:
            return None
        return importlib.util.spec_from_loader(name, _Alias(new))


if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModuleFinder())

from ezpz import hooks  # noqa: E402  (needs hookimpl defined for the built-ins)

__all__ = ["MOVED_MODULES", "__version__", "get_logger", "hookimpl", "hooks"]


#: Where the original ezpz's top-level names live here, in lookup order (imported on first use).
_FORWARDS = ("ezpz.original.compat", "ezpz.original.distributed", "ezpz.original.memory", "ezpz.original.log",
             "ezpz.original.versions", "ezpz.original.scheduler")
#: Submodules that ``ezpz.<name>`` imports on first access, as the original's lazy modules did.
_SUBMODULES = frozenset({"compat", "distributed", "examples", "launch", "log", "memory", "pbs", "slurm"})


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
