"""``timeitlogit``: the original ezpz's timing decorator, safe to apply at import time."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["timeitlogit"]

F = TypeVar("F", bound=Callable[..., Any])


def _record(name: str, seconds: float) -> None:
    """``wandb.log`` the timing when the application already imported wandb and started a run; never imports it."""
    wandb = sys.modules.get("wandb")
    run = getattr(wandb, "run", None)
    if run is not None:
        try:
            wandb.log({name: seconds}, commit=False)  # type: ignore[union-attr]
        except Exception:  # timing must never break the timed function
            pass


def timeitlogit(rank: int | None = None, record: bool = True, verbose: bool = False,
                prefix: str | None = None) -> Callable[[F], F]:
    """Decorator factory: time each call of the function; log it when ``verbose``.

    :param rank: The rank this process counts as for logging (the original's
        docs pass ``rank=ezpz.get_rank()``); None reads the rank at each call.
        The timing is logged, at INFO on the ``ezpz.timing`` logger, only when
        that rank is 0.
    :param record: ``wandb.log({"<prefix>/<qualname>": seconds})`` when the
        application has a wandb run (wandb is never imported here).
    :param verbose: Log ``name(args) took 0.0123 s``.
    :param prefix: Metric prefix (default ``"timeit"``).

    Decorating does no work: nothing is read or imported until the function runs.
    """
    label = prefix or "timeit"

    def decorator(func: F) -> F:
        name = getattr(func, "__qualname__", getattr(func, "__name__", "function"))

        @functools.wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            result = func(*args, **kwargs)
            seconds = time.perf_counter() - start
            if record:
                _record(f"{label}/{name}", seconds)
            if verbose:
                from ezpz.original.compat import get_rank

                if (rank if rank is not None else get_rank()) == 0:
                    from ezpz.original.log import get_logger

                    shown = ", ".join([*map(str, args), *(f"{k}={v}" for k, v in kwargs.items())])
                    get_logger("ezpz.timing").info("%s(%s) took %.4f s", name, shown, seconds)
            return result

        return timed  # type: ignore[return-value]

    return decorator
