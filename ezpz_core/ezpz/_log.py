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


def _scrub(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Secrets out of every event value (:mod:`ezpz.redact`), before any renderer sees them."""
    from ezpz.redact import scrub_data

    return {k: scrub_data(v) if isinstance(v, (str, list, tuple, dict)) else v for k, v in event.items()}


def _render(_logger: Any, _method: str, event: dict[str, Any]) -> str:
    name = event.pop("event", "")
    extras = " ".join(f"{k}={v!r}" if isinstance(v, str) and " " in v else f"{k}={v}" for k, v in event.items())
    return f"{name} {extras}".rstrip()


class _Scrubbed:
    """An application-configured structlog logger, given ezpz's events with secrets already scrubbed."""

    _LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "msg", "fatal"})

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def bind(self, **kw: Any) -> _Scrubbed:
        return _Scrubbed(self._inner.bind(**_scrub(None, "", kw)))

    def __getattr__(self, method: str) -> Any:
        target = getattr(self._inner, method)
        if method not in self._LEVELS:
            return target

        def call(event: Any = None, *args: Any, **kw: Any) -> Any:
            clean = _scrub(None, method, {"event": event, **kw})
            return target(clean.pop("event"), *args, **clean)

        return call


def get_logger(name: str = "ezpz") -> Any:
    """A structlog bound logger for ``name`` that respects the rank filter."""
    if structlog.is_configured():
        return _Scrubbed(structlog.get_logger(name).bind())  # application's pipeline, secrets out first
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[_rank_filter, _scrub, _render],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
