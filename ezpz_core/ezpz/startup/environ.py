"""The environment as hooks see it (a read-only snapshot) and the one way plugins change it.

Probe and detect hooks (``ezpz_probe_devices``, ``ezpz_detect_launch_env``)
are documented as read-only and ``ezpz.hooks.plan()`` as side-effect free, so
they get an :class:`EnvironSnapshot`: a copy taken once per plan, which every
hook sees alike and none can change. A write raises
:class:`EnvironWriteError` inside the hook, so the plugin is quarantined and
named like any other fault. A plugin that needs a variable set returns it in
``LifecycleAction.env_defaults`` from ``ezpz_before_init``; ``setup()`` applies
it with :func:`apply_env_defaults` (a value the user set always wins) and the
trace shows what was set and what was kept.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, NoReturn

__all__ = ["EnvironSnapshot", "EnvironWriteError", "apply_env_defaults", "snapshot"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EnvironWriteError(TypeError):
    """A hook tried to change the environment snapshot it was given."""


class EnvironSnapshot(Mapping[str, str]):
    """An immutable copy of the environment; reading works like ``os.environ``, writing raises."""

    __slots__ = ("_data",)

    def __init__(self, environ: Mapping[str, str]) -> None:
        object.__setattr__(self, "_data", {str(k): str(v) for k, v in environ.items()})

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"EnvironSnapshot({len(self._data)} variables)"

    def copy(self) -> dict[str, str]:
        """A plain, writable dict copy (changing it changes nothing else)."""
        return dict(self._data)

    def _refuse(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise EnvironWriteError(
            "the environment given to ezpz hooks is a read-only snapshot: probe and detect hooks must not change "
            "it (ezpz.hooks.plan() has no side effects). Return the variables your plugin needs from "
            "ezpz_before_init as LifecycleAction(env_defaults={...}); setup() applies them and the trace shows them"
        )

    __setitem__ = __delitem__ = __setattr__ = __delattr__ = _refuse
    pop = popitem = clear = update = setdefault = _refuse


def snapshot(environ: Mapping[str, str]) -> EnvironSnapshot:
    """``environ`` as a read-only snapshot (an existing snapshot is returned as is)."""
    return environ if isinstance(environ, EnvironSnapshot) else EnvironSnapshot(environ)


def bad_env_default(key: object, value: object) -> str | None:
    """Why ``key=value`` cannot be an environment variable, or None."""
    if not isinstance(key, str) or not _NAME.fullmatch(key):
        return f"{key!r} is not a variable name (letters, digits and '_', not starting with a digit)"
    if not isinstance(value, str):
        return f"{key}={value!r} is a {type(value).__name__}, not a str"
    if "\x00" in value:
        return f"{key}'s value contains a NUL byte"
    return None


def apply_env_defaults(env_defaults: Mapping[str, str],
                       environ: MutableMapping[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """Set each variable not already set; return ``(set, kept)`` where ``kept`` maps names to the value that won.

    Entries are checked first (:func:`bad_env_default`); a bad one raises
    TypeError before anything is set, for the caller to blame on the plugin.
    """
    target = os.environ if environ is None else environ
    for key, value in env_defaults.items():
        why = bad_env_default(key, value)
        if why is not None:
            raise TypeError(f"ezpz_before_init returned env_defaults with {why}")
    applied: dict[str, str] = {}
    kept: dict[str, str] = {}
    for key, value in env_defaults.items():
        if key in target:
            kept[key] = target[key]
        else:
            target[key] = value
            applied[key] = value
    return applied, kept
