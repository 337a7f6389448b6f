"""Exceptions raised by ezpz.

Every error about bad input names the input, the value, what is allowed and
how to fix it, so the message alone is enough to act on.
"""

from __future__ import annotations


class EzpzError(Exception):
    """Base class of every error ezpz raises on purpose."""


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


class LaunchEnvError(ConfigError):
    """The launcher's variables do not describe a consistent rank layout."""


class UnavailableError(ConfigError):
    """A requested device, backend or precision cannot be provided here."""


class RendezvousTimeoutError(EzpzError, TimeoutError):
    """Not every rank arrived at the rendezvous within the timeout."""


class PluginError(EzpzError):
    """A plugin failed while strict plugin mode (``EZPZ_STRICT_PLUGINS=1``) is on."""


class SetupError(EzpzError, RuntimeError):
    """``setup()`` was used wrongly (for example called again with other overrides)."""


class RendezvousError(EzpzError, RuntimeError):
    """The rendezvous failed for a reason other than a late rank: the store went away or answered wrongly."""


class JobMismatchError(RendezvousError):
    """A process reached a rendezvous store that belongs to another launch (another job's fingerprint)."""
