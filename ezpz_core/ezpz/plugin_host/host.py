"""Plugin discovery and isolation.

Entry points in group ``ezpz`` are listed from a cached index
(:mod:`ezpz.plugin_host.ep_cache`), vetted (:mod:`ezpz.plugin_host.entry_points`)
and each loaded on its own (:mod:`ezpz.plugin_host.isolate`), after the
allow/deny filters (so a denied plugin's module is never imported); pluggy
registers and validates them. A plugin that fails to import, implements
a hook that does not exist, raises inside a hook or returns the wrong type is
quarantined: unregistered, recorded, and reported with one warning. Strict
mode (``EZPZ_STRICT_PLUGINS=1``) raises :class:`~ezpz.errors.PluginError` instead.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Mapping
from typing import Literal, NamedTuple

import pluggy

from ezpz import hookspecs
from ezpz.primitives.logger import get_logger
from ezpz.errors import ConfigError, PluginError
from ezpz.plugin_host.names import normalize_dist, normalize_entries
from ezpz.inputs.settings import PluginSettings

__all__ = ["ENTRY_POINT_GROUP", "PluginHost", "PluginRecord"]

ENTRY_POINT_GROUP = "ezpz"
BUILTIN_PREFIX = "ezpz.builtin."
"""Where ezpz's own plugin modules live; NOT what makes a plugin built-in (see :mod:`ezpz.plugin_host.entry_points`)."""
Status = Literal["loaded", "blocked", "failed", "not-allowed", "refused"]


class PluginRecord(NamedTuple):  # a NamedTuple, not attrs: built at `import ezpz`, which must not load attrs
    """One discovered plugin and what happened to it."""

    name: str
    target: str
    status: Status
    builtin: bool
    reason: str = ""
    error: str | None = None
    stage: str | None = None
    hooks: tuple[str, ...] = ()
    dist_name: str | None = None
    dist_version: str | None = None

    @property
    def distribution(self) -> tuple[str, str]:
        """``(distribution name, version)`` that declares the plugin's entry point.

        From the entry point's own metadata when it was discovered; for a plugin
        registered by hand, the distribution that installed its top-level module.
        """
        if self.dist_name is not None:
            return (self.dist_name, self.dist_version or "unknown")
        return distribution_of(self.target)


def distribution_of(target: str) -> tuple[str, str]:
    top = target.split(":", 1)[0].split(".", 1)[0]
    try:
        dists = importlib.metadata.packages_distributions().get(top, [])
    except Exception:  # pragma: no cover - broken metadata elsewhere in the environment
        dists = []
    if not dists:
        return ("unknown", "unknown")
    name = dists[0]
    try:
        return (name, importlib.metadata.version(name))
    except importlib.metadata.PackageNotFoundError:
        return (name, "unknown")


def _hook_names(pm: pluggy.PluginManager, plugin: object) -> tuple[str, ...]:
    callers = pm.get_hookcallers(plugin) or []
    return tuple(sorted(c.name for c in callers))


class PluginHost:
    """The one pluggy manager, the records of every plugin, and the quarantine."""

    def __init__(self, settings: PluginSettings | None = None) -> None:
        self.settings = settings or PluginSettings()
        self.pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.records: dict[str, PluginRecord] = {}
        self._pending: dict[str, PluginRecord] = {}  # vetted entry points not yet imported
        self._log = get_logger("ezpz.plugins")

    # -- discovery -----------------------------------------------------------------
    def _decide(self, name: str, builtin: bool, dist: str = "") -> tuple[Status | None, str]:
        s = self.settings
        key = name.lower()
        qualified = f"{normalize_dist(dist)}:{key}" if dist else None
        deny, allow = normalize_entries(s.deny) or frozenset(), normalize_entries(s.allow)
        if key in deny or (qualified is not None and qualified in deny) or ("*" in deny and not builtin):
            return "blocked", "named in EZPZ_DISABLE_PLUGINS"
        if builtin:
            return None, "built-in"
        allowed = allow is not None and (key in allow or (qualified is not None and qualified in allow))
        if allow is not None and not allowed:
            return "not-allowed", "not in EZPZ_PLUGINS" if s.autoload else "autoload disabled and not in EZPZ_PLUGINS"
        if not s.autoload and s.allow is None:
            return "not-allowed", "EZPZ_DISABLE_PLUGIN_AUTOLOAD=1 and not named in EZPZ_PLUGINS"
        return None, "allowed" if s.allow is not None else "autoloaded"

    def discover(self) -> None:
        """Find, filter, import and register every plugin in the entry-point group.

        Entry points come from :mod:`importlib.metadata` with the distribution
        that declares each (:mod:`ezpz.plugin_host.entry_points`); refused and filtered ones
        are recorded without being imported; the rest are imported one by one.
        """

        from ezpz.plugin_host import ep_cache
        from ezpz.plugin_host.entry_points import scan

        found = scan(ep_cache.entry_points(ENTRY_POINT_GROUP, enabled=self.settings.entry_point_cache,
                                          write=self.settings.entry_point_cache_writer))
        self.check_controls([(f.distribution, f.name) for f in found])
        wanted: list[importlib.metadata.EntryPoint] = []
        for f in found:
            if f.refused is None:
                status, reason = self._decide(f.name, f.builtin, f.distribution)
            elif f.key.lower() in (normalize_entries(self.settings.deny) or ()) or "*" in self.settings.deny:
                status, reason = "blocked", "named in EZPZ_DISABLE_PLUGINS"  # acknowledged by its qualified name
            else:  # a plain name in the lists means the plugin that owns it, never this one
                status, reason = "refused", f.refused
            record = PluginRecord(name=f.name, target=f.target, status=status or "loaded", builtin=f.builtin,
                                  reason=reason, dist_name=f.distribution, dist_version=f.version)
            if status is None:
                self._pending[f.name] = record
                wanted.append(f.entry_point)
                continue
            self.records[f.key] = record
            if status == "refused":
                self._refuse(record, key=f.key)

        def on_failure(ep: importlib.metadata.EntryPoint, err: BaseException) -> None:
            self.quarantine(ep.name, err, stage="import", target=ep.value)

        from ezpz.plugin_host.isolate import load_isolated  # SystemExit etc. at import: quarantined too

        for ep, plugin in load_isolated(wanted, on_failure):
            pending = self._pending[ep.name]
            self.register(ep.name, plugin, target=pending.target, builtin=pending.builtin, reason=pending.reason)
        self.validate()

    def _refuse(self, record: PluginRecord, *, key: str) -> None:
        """Warn once about an entry point that was not imported because it is not entitled to its name."""
        dist, version = record.distribution
        fix = (f"uninstall {dist} (it tries to replace ezpz's own {record.name!r} plugin), or set "
               f"EZPZ_DISABLE_PLUGINS={key} to acknowledge it")
        if self.settings.strict:
            raise PluginError(f"plugin {record.name!r} from {dist} {version} refused: {record.reason}. "
                              f"Strict mode is on (EZPZ_STRICT_PLUGINS=1): {fix}")
        self._log.warning("plugin_refused", plugin=record.name, distribution=dist, version=version,
                          target=record.target, reason=record.reason, fix=fix)

    def check_controls(self, known: list[tuple[str, str]]) -> None:
        """Warn (raise in strict mode) about allow/deny entries that match no installed plugin."""
        from ezpz.plugin_host.names import entry_problem

        s = self.settings
        for var, entries, wildcard in (("EZPZ_PLUGINS", s.allow or (), False),
                                       ("EZPZ_DISABLE_PLUGINS", s.deny, True)):
            for entry in sorted(entries):
                problem = entry_problem(entry, known, wildcard=wildcard)
                if problem is None:
                    continue
                fix = f"list installed plugins (`ezpz plugins`) in {var}, separated by ',' or spaces"
                if s.strict:
                    raise ConfigError(name=var, value=entry, expected=f"an installed plugin's name ({problem})",
                                      fix=fix)
                self._log.warning("plugin_control_ignored", variable=var, entry=entry, problem=problem, fix=fix)

    def register(self, name: str, plugin: object, *, target: str = "", builtin: bool = False, reason: str = "registered") -> bool:
        """Register one plugin object (a module or instance) under ``name``."""
        target = target or getattr(plugin, "__name__", type(plugin).__name__)
        try:
            self.pm.register(plugin, name=name)
        except KeyboardInterrupt:
            raise
        except BaseException as err:  # PluginValidationError, duplicate names, a module __getattr__ that exits
            self.quarantine(name, err, stage="register", target=target)
            return False
        pending = self._pending.pop(name, None)
        self.records[name] = PluginRecord(
            name=name, target=target, status="loaded", builtin=builtin, reason=reason, hooks=_hook_names(self.pm, plugin),
            dist_name=pending.dist_name if pending else None, dist_version=pending.dist_version if pending else None,
        )
        return True

    def unregister(self, name: str) -> None:
        """Take the plugin registered as ``name`` out again, record and all (one registered for a while, by hand)."""
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        self.records.pop(name, None)

    def validate(self) -> None:
        """Quarantine plugins implementing hooks that no spec defines (typos)."""
        while True:
            try:
                self.pm.check_pending()
                return
            except pluggy.PluginValidationError as err:
                name = self.pm.get_name(err.plugin) or "?"
                self.quarantine(name, err, stage="validate")

    # -- quarantine ----------------------------------------------------------------
    def quarantine(self, name: str, error: BaseException, *, stage: str, target: str | None = None) -> None:
        """Unregister ``name``, record why, warn once; raise instead in strict mode."""
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        old = self.records.get(name) or self._pending.pop(name, None)
        target = target or (old.target if old else name)
        builtin = old.builtin if old else False
        from ezpz.primitives.redact import scrub

        message = scrub(f"{type(error).__name__}: {error}")  # a plugin's message may quote a token
        record = PluginRecord(name=name, target=target, status="failed", builtin=builtin, error=message, stage=stage,
                              reason=f"quarantined at {stage}", hooks=old.hooks if old else (),
                              dist_name=old.dist_name if old else None, dist_version=old.dist_version if old else None)
        self.records[name] = record
        dist, version = record.distribution
        if self.settings.strict:
            raise PluginError(
                f"plugin {name!r} ({dist} {version}) failed at {stage}: {message}. "
                "Strict mode is on (EZPZ_STRICT_PLUGINS=1): fix or uninstall the plugin, "
                f"or exclude it with EZPZ_DISABLE_PLUGINS={name}"
            ) from error
        self._log.warning(
            "plugin_quarantined", plugin=name, distribution=dist, version=version, stage=stage, error=message,
            fix=f"upgrade or uninstall {dist}, or set EZPZ_DISABLE_PLUGINS={name}",
        )

    @property
    def failures(self) -> list[PluginRecord]:
        return [r for r in self.records.values() if r.status == "failed"]

    def loaded(self) -> list[str]:
        return [r.name for r in self.records.values() if r.status == "loaded"]

    def snapshot(self) -> Mapping[str, PluginRecord]:
        return dict(self.records)

    def mark_hooks(self) -> None:
        """Refresh the hook lists of loaded plugins (after late registrations)."""
        for name, rec in list(self.records.items()):
            plugin = self.pm.get_plugin(name)
            if plugin is not None:
                self.records[name] = rec._replace(hooks=_hook_names(self.pm, plugin))


def load_plugins(environ: Mapping[str, str] | None = None) -> PluginHost:
    """Discover plugins with the controls from ``environ`` (default: the process environment)."""
    host = PluginHost(PluginSettings.from_environ(os.environ if environ is None else environ))
    host.discover()
    return host
