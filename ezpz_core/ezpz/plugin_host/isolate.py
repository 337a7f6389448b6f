"""Entry-module imports that cannot end the process.

stevedore hands a plugin's import failure to ``on_load_failure_callback`` only
for :class:`Exception` (and re-raises ``AssertionError``); a plugin module that
calls ``sys.exit()`` or raises another :class:`BaseException` at import would
end ``import ezpz`` and with it the user's script and ``ezpz doctor``. Here
every fault but :class:`KeyboardInterrupt` (the user pressed Ctrl-C) goes to
the same callback, so it is quarantined like an exception.
"""

from __future__ import annotations

from typing import Any

from stevedore import NamedExtensionManager

__all__ = ["IsolatingExtensionManager"]


class IsolatingExtensionManager(NamedExtensionManager):  # type: ignore[type-arg]
    """A :class:`~stevedore.named.NamedExtensionManager` that reports every import fault but Ctrl-C.

    Same loop and bookkeeping as stevedore's ``_load_plugins`` (base and named),
    with the wider ``except``; an error raised by the callback itself (strict
    mode) propagates once.
    """

    def _load_plugins(self, invoke_on_load: bool, invoke_args: Any, invoke_kwds: Any) -> list[Any]:
        extensions = []
        for ep in self.list_entry_points():
            try:
                ext = self._load_one_plugin(ep, invoke_on_load, invoke_args, invoke_kwds)
            except KeyboardInterrupt:
                raise
            except BaseException as err:  # SystemExit, GeneratorExit, AssertionError, ...: a plugin fault
                if self._on_load_failure_callback is None:
                    raise
                self._on_load_failure_callback(self, ep, err)
                continue
            if ext:
                extensions.append(ext)
        self._missing_names = set(self._names) - {e.name for e in extensions}
        if self._missing_names and self._on_missing_entrypoints_callback:
            self._on_missing_entrypoints_callback(self._missing_names)
        return extensions
