"""Entry-module imports that cannot end the process.

A plugin module that raises at import, including ``sys.exit()`` or another
:class:`BaseException`, would otherwise end ``import ezpz`` and with it the
user's script and ``ezpz doctor``. Here every fault but
:class:`KeyboardInterrupt` (the user pressed Ctrl-C) goes to the caller's
callback, so it is quarantined like an exception.

This is the loop of stevedore's ``NamedExtensionManager`` with the wider
``except``; the plugin host lists and vets the entry points itself
(:mod:`ezpz.plugin_host.entry_points`), so importing stevedore, its entry-point
cache and its dependencies at every ``import ezpz`` bought nothing more (the
launch drivers still load through stevedore).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable

__all__ = ["load_isolated"]


def load_isolated(entry_points: Iterable[importlib.metadata.EntryPoint],
                  on_failure: Callable[[importlib.metadata.EntryPoint, BaseException], None],
                  ) -> list[tuple[importlib.metadata.EntryPoint, object]]:
    """``(entry point, loaded object)`` for each entry point that imports; the rest go to ``on_failure``.

    An error raised by ``on_failure`` itself (strict mode) propagates.
    """
    loaded = []
    for ep in entry_points:
        try:
            obj = ep.load()
        except KeyboardInterrupt:
            raise
        except BaseException as err:  # SystemExit, GeneratorExit, AssertionError, ...: a plugin fault
            on_failure(ep, err)
            continue
        loaded.append((ep, obj))
    return loaded
