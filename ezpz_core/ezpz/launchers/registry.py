"""Launch drivers by name, from entry-point group ``ezpz.launchers``, and the order they are tried in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ezpz.errors import ConfigError, EzpzError
from ezpz.launchers.base import Launcher, Match

__all__ = ["DEFAULT_ORDER", "GROUP", "installed", "load", "select", "selection_order"]

GROUP = "ezpz.launchers"
#: Built-in drivers in the order they are asked whether they apply. Drivers a
#: site installs that are not named here are asked first (sorted by name), so a
#: site launcher for its own scheduler wins without editing ezpz.
DEFAULT_ORDER: tuple[str, ...] = ("srun", "torchrun", "mpiexec")


def installed() -> list[str]:
    """Names of the installed launch drivers (entry points only; nothing is imported)."""
    from stevedore import NamedExtensionManager

    lister = NamedExtensionManager(GROUP, names=[], on_missing_entrypoints_callback=None)
    return sorted({ep.name for ep in lister.list_entry_points()})


def selection_order(names: Iterable[str]) -> list[str]:
    names = set(names)
    return sorted(names - set(DEFAULT_ORDER)) + [n for n in DEFAULT_ORDER if n in names]


def load(name: str) -> Launcher:
    """Import and instantiate the driver registered as ``name``."""
    from stevedore import DriverManager
    from stevedore.exception import NoMatches

    def failed(_manager: Any, ep: Any, err: BaseException) -> None:
        raise EzpzError(f"launcher {name!r} ({ep.value}) failed to load: {type(err).__name__}: {err}") from err

    names = installed()  # checked first: stevedore's DriverManager warns about a missing name on its own
    if name not in names:
        raise ConfigError(
            name="--launcher", value=name, expected=f"an installed launcher: {', '.join(names) or 'none installed'}",
            fix=f"pick one of {', '.join(names)}, or install a package that registers {name!r} "
                f"in entry-point group {GROUP!r}",
        )
    try:
        manager = DriverManager(GROUP, name, invoke_on_load=True, on_load_failure_callback=failed)
    except NoMatches as err:  # listed but not loadable (e.g. its distribution's requirements are missing)
        raise EzpzError(f"launcher {name!r} is registered but could not be loaded: {err}") from None
    return manager.driver


def select(environ: Mapping[str, str]) -> tuple[str, Launcher, Match, tuple[tuple[str, str], ...]]:
    """The first driver, in :func:`selection_order`, that applies; plus each one passed over and why."""
    passed: list[tuple[str, str]] = []
    for name in selection_order(installed()):
        try:
            driver = load(name)
        except EzpzError as err:
            passed.append((name, str(err)))
            continue
        found = driver.match(environ)
        if found.applies:
            return name, driver, found, tuple(passed)
        passed.append((name, found.reason))
    tried = "; ".join(f"{n}: {why}" for n, why in passed) or "no launcher installed"
    raise ConfigError(
        name="launcher", value=None, expected="a launcher that applies here",
        fix=f"none did ({tried}); install torchrun or an MPI, or name one with --launcher",
    )
