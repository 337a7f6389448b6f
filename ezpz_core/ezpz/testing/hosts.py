"""Fresh, isolated plugin hosts and side-effect-free plans for tests.

The process-wide host (``ezpz.hooks.get_plugin_host()``) holds every installed
plugin; tests usually want only the built-ins plus the plugin under test.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Mapping
from types import ModuleType

from ezpz.plugin_host.calls import Hooks
from ezpz.decisions import SetupPlan
from ezpz.facts import TorchBuild
from ezpz.plugin_host.entry_points import is_builtin
from ezpz.plugin_host.host import ENTRY_POINT_GROUP, PluginHost
from ezpz.inputs.settings import PluginSettings, SetupSettings

__all__ = ["builtin_plugins", "make_host", "make_plan", "plugin_name"]


def builtin_plugins() -> dict[str, ModuleType]:
    """The built-in plugins (``cpu``, ``mps``, ``launchers``, ...) by entry-point name, imported."""
    found: dict[str, ModuleType] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if is_builtin(ep) and ep.name not in found:  # declared by ezpz's own distribution
            found[ep.name] = importlib.import_module(ep.value.split(":", 1)[0])
    return found


def plugin_name(plugin: object) -> str:
    """The name a plugin object is registered under by default: its module name."""
    return str(getattr(plugin, "__name__", None) or type(plugin).__name__)


def make_host(
    *plugins: object, builtins: bool = True, settings: PluginSettings | None = None,
    names: Mapping[str, object] | None = None,
) -> PluginHost:
    """A new :class:`~ezpz.plugin_host.host.PluginHost` holding the built-ins (unless ``builtins=False``) and ``plugins``.

    No entry points are scanned, so installed third-party plugins stay out.
    ``plugins`` register under their module name; ``names`` maps explicit
    names to plugin objects. Unknown hooks are quarantined (``host.failures``)
    exactly as in discovery.
    """
    host = PluginHost(settings or PluginSettings())
    if builtins:
        for name, module in builtin_plugins().items():
            host.register(name, module, target=module.__name__, builtin=True, reason="built-in")
    for plugin in plugins:
        if host.pm.is_registered(plugin):
            continue
        host.register(plugin_name(plugin), plugin)
    for name, plugin in (names or {}).items():
        if not host.pm.is_registered(plugin):
            host.register(name, plugin)
    host.validate()
    return host


def make_plan(
    host: PluginHost, *, environ: Mapping[str, str] | None = None, build: TorchBuild | None = None,
    device: str | None = None, backend: str | None = None, precision: str | None = None, timeout: float | None = None,
) -> SetupPlan:
    """Decide what ``setup()`` would with ``host``'s plugins, without side effects.

    Like :func:`ezpz.hooks.plan` but for any host. ``environ`` defaults to an
    empty mapping (a single process with no overrides), not ``os.environ``,
    so results do not depend on the shell running the tests; pass
    ``environ=os.environ`` for the real thing. ``build`` defaults to the
    installed torch.
    """
    from ezpz.startup.planning import plan_setup
    from ezpz.probes.torch_build import probe_torch_build

    env: Mapping[str, str] = {} if environ is None else environ
    settings = SetupSettings.resolve(env, device=device, backend=backend, precision=precision, timeout=timeout)
    return plan_setup(Hooks(host), settings, env, build or probe_torch_build())

