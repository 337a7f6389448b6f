"""A logger for plugins: structured events through ezpz's logging, rank-filtered like ezpz's own."""

from __future__ import annotations

from typing import Any

__all__ = ["get_logger"]


def get_logger(name: str) -> Any:
    """A structlog-style logger for ``name`` (``log.warning("event", key=value)``, ``bind()``).

    Events go to the standard-library logger ``name`` (structlog's pipeline when the application configured
    structlog), with secrets scrubbed. Once ``setup()`` knows the rank, info and debug events are kept on
    rank 0 only unless ``EZPZ_LOG_ALL_RANKS=1``; warnings and errors pass on every rank, tagged with it. It
    configures nothing: the application decides where logs go.
    """
    from ezpz.primitives.logger import get_logger as _core_logger

    return _core_logger(name)
