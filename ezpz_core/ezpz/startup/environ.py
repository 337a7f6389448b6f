"""The environment as hooks see it (a read-only snapshot) and the one way plugins change it.

Probe and detect hooks (``ezpz_probe_devices``, ``ezpz_detect_launch_env``)
are documented as read-only and ``ezpz.hooks.plan()`` as side-effect free, so
they get an :class:`EnvironSnapshot`: a copy taken once per plan, which every
hook sees alike and none can change. A write raises
:class:`EnvironWriteError` inside the hook, so the plugin is quarantined and
named like any other fault. A plugin that needs a variable set returns it in
``LifecycleAction.env_defaults`` from ``ezpz_before_init``; ``setup()`` applies
it with :func:`apply_env_defaults` (a value the user set always wins) and the
trace shows what was set and what was kept. A value a launcher exported on its
own (torchrun's ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1``,
:mod:`ezpz.launch_env.worker_env`) is not the user's: the plugin's value
replaces it, and the trace names the launcher. :func:`decide_env_defaults` is
that decision, pure, so it can be checked against recorded environments.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, NoReturn

from ezpz.launch_env.worker_env import launcher_default
from ezpz.primitives.frozen_records import frozen

__all__ = ["EnvDefault", "EnvironSnapshot", "EnvironWriteError", "apply_env_defaults", "decide_env_defaults",
           "snapshot"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EnvironWriteError(TypeError):
    """A hook tried to change the environment snapshot it was given."""


class EnvironSnapshot(Mapping[str, str]):
    """An immutable copy of the environment; reading works like ``os.environ``, writing raises."""

    __slots__ = ("_data",)
    _data: dict[str, str]

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


@frozen(kw_only=True)
class EnvDefault:
    """One variable a plugin proposed, what it was before, who set that, and whether the proposal applies.

    ``set_by``: ``""`` (unset), ``"user"``, ``"ezpz"`` (set by ``setup()`` for an
    earlier plugin) or the launcher that exported it on its own (then ``why``
    says where that is written).
    """

    name: str
    proposed: str
    current: str | None = None
    set_by: str = ""
    why: str = ""

    @property
    def applies(self) -> bool:
        """Whether ``setup()`` sets ``proposed``: the variable is unset, or holds a launcher's own default."""
        return self.set_by not in ("user", "ezpz")

    @property
    def detail(self) -> str:
        """What happened to the variable, for the lifecycle decision's details."""
        if self.set_by in ("user", "ezpz"):
            return f"kept {self.current!r} (already set)"
        if self.set_by:
            return f"set to {self.proposed!r}, replacing {self.current!r} set by {self.set_by} (not the user)"
        return f"set to {self.proposed!r}"

    @property
    def note(self) -> str:
        """The sentence the lifecycle reason gains, or ``""`` when there is nothing to say."""
        if self.set_by == "user" and self.current != self.proposed:
            return f"{self.name}={self.current} set by the user was kept (the plugin proposed {self.proposed})"
        if self.set_by not in ("", "user", "ezpz"):
            return (f"{self.name}={self.current} was set by {self.set_by}, not by the user ({self.why}): "
                    f"the plugin's {self.name}={self.proposed} applies")
        return ""


def decide_env_defaults(env_defaults: Mapping[str, str], environ: Mapping[str, str],
                        ours: Mapping[str, str] | None = None) -> tuple[EnvDefault, ...]:
    """For each proposed variable: set it, keep the user's value, or replace a launcher's own default. Pure.

    ``ours`` maps the variables ``setup()`` already set (for an earlier plugin) to their values.
    Entries are checked first (:func:`bad_env_default`); a bad one raises TypeError, for the caller
    to blame on the plugin.
    """
    for key, value in env_defaults.items():
        why = bad_env_default(key, value)
        if why is not None:
            raise TypeError(f"ezpz_before_init returned env_defaults with {why}")
    ours = ours or {}
    decided = []
    for key, value in env_defaults.items():
        current = environ.get(key)
        if current is None:
            decided.append(EnvDefault(name=key, proposed=value))
        elif key in ours and ours[key] == current:
            decided.append(EnvDefault(name=key, proposed=value, current=current, set_by="ezpz"))
        else:
            launcher = launcher_default(key, environ)
            set_by, why = launcher if launcher is not None else ("user", "")
            decided.append(EnvDefault(name=key, proposed=value, current=current, set_by=set_by, why=why))
    return tuple(decided)


def apply_env_defaults(env_defaults: Mapping[str, str],
                       environ: MutableMapping[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """Set each variable not already set (or holding a launcher's own default); return ``(set, kept)``.

    ``kept`` maps names to the value that won. Entries are checked first
    (:func:`bad_env_default`); a bad one raises TypeError before anything is
    set, for the caller to blame on the plugin.
    """
    target = os.environ if environ is None else environ
    applied: dict[str, str] = {}
    kept: dict[str, str] = {}
    for change in decide_env_defaults(env_defaults, target):
        if change.applies:
            target[change.name] = change.proposed
            applied[change.name] = change.proposed
        else:
            kept[change.name] = change.current or ""
    return applied, kept
