"""Logging shim. The library never configures logging; the CLI and the application do.

By default events go to the standard-library logger ``ezpz.<name>`` as
``event key=value`` lines, so an application's ``logging`` setup decides where
they go (with none, Python prints warnings and errors to stderr). When the
application has configured structlog itself, its pipeline is used instead.

Rank-aware: once ``setup()`` knows the rank, info and debug events are kept on
rank 0 only unless ``EZPZ_LOG_ALL_RANKS=1``; warnings and errors pass on every
rank, tagged with the rank.

structlog is imported only when the application has configured it: the
default path renders the same lines straight to :mod:`logging`, and an event
whose level the logger would drop costs one ``isEnabledFor`` check.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

_state: dict[str, Any] = {"rank": None, "all_ranks": False}


def set_rank(rank: int | None, *, all_ranks: bool) -> None:
    """Called by ``setup()``/``teardown()``; not part of the public API."""
    _state["rank"] = rank
    _state["all_ranks"] = all_ranks


def log_rank() -> tuple[int | None, bool]:
    """The one answer to "which rank am I, and do all ranks log?": ``(rank, all_ranks)`` as ``setup()`` set them.

    ``rank`` is None before ``setup()`` and after ``teardown()``. Both ezpz's own events and the original
    ezpz's ``ezpz.get_logger`` read this.
    """
    return _state["rank"], _state["all_ranks"]


def keeps(level: int, rank: int | None, all_ranks: bool) -> bool:
    """The one rank filter: warnings and errors pass everywhere; below WARNING, only rank 0 (or an unknown
    rank) logs, unless all ranks do (``EZPZ_LOG_ALL_RANKS=1``)."""
    return level >= logging.WARNING or rank is None or rank == 0 or all_ranks


def _scrub(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Secrets out of every event value (:mod:`ezpz.primitives.redact`), before any renderer sees them."""
    from ezpz.primitives.redact import scrub_data

    return {k: scrub_data(v) if isinstance(v, (str, list, tuple, dict)) else v for k, v in event.items()}


def _render(_logger: Any, _method: str, event: dict[str, Any]) -> str:
    name = event.pop("event", "")
    extras = " ".join(f"{k}={v!r}" if isinstance(v, str) and " " in v else f"{k}={v}" for k, v in event.items())
    return f"{name} {extras}".rstrip()


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
           "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL, "fatal": logging.CRITICAL}


def _structlog_configured() -> bool:
    """True when the application configured structlog (which needs it imported: never import it to ask)."""
    structlog = sys.modules.get("structlog")
    return structlog is not None and structlog.is_configured()


class _Logger:
    """A structlog-style bound logger (``log.info("event", key=value)``, ``bind()``) that needs no structlog.

    With structlog configured by the application, every call goes through its pipeline instead.
    """

    __slots__ = ("_context", "_name", "_std")

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name, self._context, self._std = name, context or {}, logging.getLogger(name)

    def bind(self, **values: Any) -> _Logger:
        return _Logger(self._name, {**self._context, **values})

    def new(self, **values: Any) -> _Logger:
        return _Logger(self._name, values)

    def _emit(self, method: str, event: str, kw: dict[str, Any]) -> None:
        if _structlog_configured():
            import structlog

            scrubbed = _Scrubbed(structlog.get_logger(self._name).bind(**_scrub(None, "", self._context)))
            getattr(scrubbed, method)(event, **kw)
            return
        level = _LEVELS[method]
        if not self._std.isEnabledFor(level):
            return
        exc_info = kw.pop("exc_info", method == "exception")
        values: dict[str, Any] = {"event": event, **self._context, **kw}
        rank, all_ranks = log_rank()
        if not keeps(level, rank, all_ranks):
            return
        if rank is not None:
            values.setdefault("rank", rank)
        line = _render(self._std, method, _scrub(None, method, values))
        self._std.log(level, line, exc_info=exc_info, stacklevel=3)

    def debug(self, event: str, **kw: Any) -> None:
        self._emit("debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        self._emit("info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._emit("warning", event, kw)

    warn = warning

    def error(self, event: str, **kw: Any) -> None:
        self._emit("error", event, kw)

    def exception(self, event: str, **kw: Any) -> None:
        self._emit("exception", event, kw)

    def critical(self, event: str, **kw: Any) -> None:
        self._emit("critical", event, kw)

    fatal = critical


def get_logger(name: str = "ezpz") -> Any:
    """A bound logger for ``name`` that respects the rank filter (structlog's API; structlog loaded only if configured)."""
    return _Logger(name)


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

