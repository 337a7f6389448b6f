"""Logging shim. The library never configures logging; the CLI and the application do.

By default events go to the standard-library logger ``ezpz.<name>`` as
``event key=value`` lines, so an application's ``logging`` setup decides where
they go (with none, Python prints warnings and errors to stderr). When the
application has configured structlog itself, its pipeline is used instead.

Rank-aware: once ``setup()`` knows the rank, info and debug events are kept on
rank 0 only unless ``EZPZ_LOG_ALL_RANKS=1``; warnings and errors pass on every
rank, tagged with the rank.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

_state: dict[str, Any] = {"rank": None, "all_ranks": False}
_QUIET_LEVELS = {"debug", "info"}


def set_rank(rank: int | None, *, all_ranks: bool) -> None:
    """Called by ``setup()``/``teardown()``; not part of the public API."""
    _state["rank"] = rank
    _state["all_ranks"] = all_ranks


def _rank_filter(_logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    rank = _state["rank"]
    if rank is None:
        return event
    if rank != 0 and method in _QUIET_LEVELS and not _state["all_ranks"]:
        raise structlog.DropEvent
    event.setdefault("rank", rank)
    return event


def _render(_logger: Any, _method: str, event: dict[str, Any]) -> str:
    name = event.pop("event", "")
    extras = " ".join(f"{k}={v!r}" if isinstance(v, str) and " " in v else f"{k}={v}" for k, v in event.items())
    return f"{name} {extras}".rstrip()


def get_logger(name: str = "ezpz") -> Any:
    """A structlog bound logger for ``name`` that respects the rank filter."""
    if structlog.is_configured():
        return structlog.get_logger(name).bind()  # application's pipeline
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[_rank_filter, _render],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
