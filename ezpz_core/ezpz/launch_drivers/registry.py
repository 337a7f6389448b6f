"""Launch drivers by name, from entry-point group ``ezpz.launchers``, and the order they are tried in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from ezpz.errors import ConfigError, EzpzError
from ezpz.launch_drivers.base import Launcher, Match

__all__ = ["DEFAULT_ORDER", "GROUP", "installed", "load", "select", "selection_order"]

GROUP = "ezpz.launchers"
#: Built-in drivers in the order they are asked whether they apply. Drivers a
#: site installs that are not named here are asked first (sorted by name), so a
#: site launcher for its own scheduler wins without editing ezpz.
DEFAULT_ORDER: tuple[str, ...] = ("flux", "jsrun", "srun", "torchrun", "mpiexec")
#: (``flux`` first: a Flux instance started inside a Slurm job is the innermost scheduler.)


def vetted() -> dict[str, Any]:
    """Driver entry points by name, minus those refused (:mod:`ezpz.plugin_host.entry_points`); nothing is imported.

    A driver is built-in when ezpz's own distribution declares it; another
    distribution's ``flux``, ``jsrun``, ``mpiexec``, ``srun`` or ``torchrun`` (or a second claim on
    a taken name) is refused, so ``--launcher NAME`` always means one driver.
    """
    return {f.name: f for f in scan_drivers() if f.refused is None}


def scan_drivers() -> list[Any]:
    """Every driver entry point with its distribution and, if refused, why."""
    import os

    from ezpz.plugin_host import ep_cache
    from ezpz.plugin_host.entry_points import scan
    from ezpz.inputs.settings import is_first_rank, parse_bool

    eps = ep_cache.entry_points(GROUP, enabled=parse_bool(os.environ, "EZPZ_CACHE", default=True),
                                write=is_first_rank(os.environ))
    return scan(eps, reserved_names=frozenset(DEFAULT_ORDER))


def installed() -> list[str]:
    """Names of the installed launch drivers (entry points only; nothing is imported)."""
    return sorted(vetted())


def selection_order(names: Iterable[str]) -> list[str]:
    names = set(names)
    return sorted(names - set(DEFAULT_ORDER)) + [n for n in DEFAULT_ORDER if n in names]


def load(name: str) -> Launcher:
    """Import and instantiate the driver registered as ``name``."""
    from stevedore import DriverManager
    from stevedore.exception import NoMatches

    def failed(_manager: Any, ep: Any, err: BaseException) -> None:
        raise EzpzError(f"launcher {name!r} ({ep.value}) failed to load: {type(err).__name__}: {err}") from err

    drivers = vetted()  # checked first: stevedore's DriverManager warns about a missing name on its own
    names = sorted(drivers)
    if name not in names:
        raise ConfigError(
            name="--launcher", value=name, expected=f"an installed launcher: {', '.join(names) or 'none installed'}",
            fix=f"pick one of {', '.join(names)}, or install a package that registers {name!r} "
                f"in entry-point group {GROUP!r}",
        )
    chosen = drivers[name].entry_point

    class Vetted(DriverManager):  # type: ignore[type-arg]
        """stevedore, loading only the vetted entry point (never another distribution's under the same name)."""

        def list_entry_points(self) -> list[Any]:
            return [chosen]

    try:
        manager = Vetted(GROUP, name, invoke_on_load=True, on_load_failure_callback=failed)
    except NoMatches as err:  # listed but not loadable (e.g. its distribution's requirements are missing)
        raise EzpzError(f"launcher {name!r} is registered but could not be loaded: {err}") from None
    return cast("Launcher", manager.driver)  # the vetted entry point, instantiated (invoke_on_load)


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
