"""Exceptions raised by ezpz.

Every error about bad input names the input, the value, what is allowed and
how to fix it, so the message alone is enough to act on.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CheckpointError",
    "ConfigError",
    "EzpzError",
    "JobMismatchError",
    "LaunchEnvError",
    "PluginError",
    "PluginTimeoutError",
    "ProcessGroupMismatchError",
    "RendezvousError",
    "RendezvousTimeoutError",
    "SetupError",
    "UnavailableError",
]


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """Unpickle an ezpz error without calling its keyword-only ``__init__`` again."""
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class EzpzError(Exception):
    """Base class of every error ezpz raises on purpose.

    Errors survive pickling (``multiprocessing``, ``concurrent.futures``, Ray,
    ``torch.multiprocessing.spawn``) with their message and fields: the default
    reduce would call ``cls(*args)``, which keyword-only constructors refuse.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.args, dict(self.__dict__))


class ConfigError(EzpzError, ValueError):
    """Bad input: an environment variable, an argument or an override.

    ``name`` is what the user set (``RANK``, ``EZPZ_DEVICE``, ``setup(device=...)``),
    ``value`` what it held, ``expected`` what is allowed and ``fix`` what to do.
    """

    def __init__(self, *, name: str, value: object, expected: str, fix: str) -> None:
        self.name = name
        self.value = value
        self.expected = expected
        self.fix = fix
        super().__init__(f"{name}={value!r} is not valid: expected {expected}. Fix: {fix}")


class CheckpointError(ConfigError):
    """A checkpoint directory that is missing or incomplete, or a state that does not match the checkpoint."""


class LaunchEnvError(ConfigError):
    """The launcher's variables do not describe a consistent rank layout."""


class UnavailableError(ConfigError):
    """A requested device, backend or precision cannot be provided here."""


class ProcessGroupMismatchError(ConfigError):
    """A process group existed before ``setup()`` and disagrees with the launcher (rank, world size, backend)."""


class RendezvousTimeoutError(EzpzError, TimeoutError):
    """Not every rank arrived at the rendezvous within the timeout."""


class PluginError(EzpzError):
    """A plugin failed while strict plugin mode (``EZPZ_STRICT_PLUGINS=1``) is on."""


class SetupError(EzpzError, RuntimeError):
    """``setup()`` was used wrongly (for example called again with other overrides)."""


class PluginTimeoutError(EzpzError, TimeoutError):
    """A plugin's hook did not return within ``EZPZ_HOOK_TIMEOUT`` seconds.

    Names the plugin, its distribution and version, the hook, the deadline,
    where the plugin's code was entered and the stack it was stuck in, and the
    fix; the plugin is quarantined for the rest of the process.
    """

    def __init__(self, *, plugin: str, distribution: str, version: str, hook: str, timeout_s: float,
                 where: str, stack: str = "") -> None:
        self.plugin, self.distribution, self.version = plugin, distribution, version
        self.hook, self.timeout_s, self.where, self.stack = hook, timeout_s, where, stack
        self.fix = (f"set EZPZ_DISABLE_PLUGINS={plugin} to run without it, fix what it waits for "
                    f"(a wedged device or driver?), or raise EZPZ_HOOK_TIMEOUT if it is only slow")
        message = (f"plugin {plugin!r} ({distribution} {version}) did not return from {hook} within {timeout_s:g}s "
                   f"(EZPZ_HOOK_TIMEOUT), stuck in {where}. Fix: {self.fix}")
        super().__init__(message + (f"\nWhere the hook was stuck:\n{stack.rstrip()}" if stack else ""))


class RendezvousError(EzpzError, RuntimeError):
    """The rendezvous failed for a reason other than a late rank: the store went away or answered wrongly."""


class JobMismatchError(RendezvousError):
    """A process reached a rendezvous store that belongs to another launch (another job's fingerprint)."""
