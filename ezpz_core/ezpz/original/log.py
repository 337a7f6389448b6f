"""``ezpz.get_logger``: a standard-library logger for scripts, visible on rank 0 out of the box.

Scripts written for the original ezpz do::

    logger = ezpz.get_logger(__name__)
    logger.info("loss=%s", loss)

and expect to see that line on rank 0. This module gives them a plain
:class:`logging.Logger` (``%``-style arguments, ``exc_info``, levels and
handlers all work as usual) with two additions, made on the first call of
:func:`get_logger` for a name and never at import time:

* **output when the application configured none**: one shared stdout
  handler is attached to the returned logger. It stands down by itself,
  record by record, whenever the root logger has handlers (the application
  called ``logging.basicConfig`` or ``dictConfig``), so there is never a
  second copy of a line;
* **rank filter**: with ``rank_zero_only=True`` (the default) records
  below WARNING are dropped on ranks other than 0, unless
  ``EZPZ_LOG_ALL_RANKS`` is on. It is ezpz's one rank filter
  (:func:`ezpz.primitives.logger.keeps`), asked when a record is emitted: the rank and
  the all-ranks switch ``setup()`` recorded (:func:`ezpz.primitives.logger.log_rank`),
  before ``setup()`` the launcher's rank and the environment's switch.

``import ezpz`` configures nothing; ezpz's own internal events still go
through structlog to the ``ezpz.*`` loggers, which get no handler from here.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from ezpz.primitives.logger import keeps, log_rank

__all__ = ["get_logger", "getLogger", "silence_noisy_loggers"]

#: ``[time][L][name:line] message``; ``[rN]`` leads when every rank logs.
LINE_FORMAT = "[%(asctime)s][%(levelname).1s][%(name)s:%(lineno)d] %(message)s"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_DEFAULT_NOISY = ("urllib3", "filelock", "httpx", "huggingface_hub", "datasets")
_rank_cache: dict[str, int] = {}


def _env_all_ranks(strict: bool = False) -> bool:
    """``EZPZ_LOG_ALL_RANKS``; a bad value raises only when ``strict`` (get_logger), never while logging."""
    from ezpz.errors import ConfigError
    from ezpz.inputs.settings import parse_bool

    try:
        return parse_bool(os.environ, "EZPZ_LOG_ALL_RANKS")
    except ConfigError:
        if strict:
            raise
        return False


def _launcher_rank() -> int:
    """Before ``setup()``: the launcher's rank (read once); 0 if unreadable."""
    if "rank" not in _rank_cache:
        try:
            from ezpz.original.compat import get_rank

            _rank_cache["rank"] = get_rank()
        except Exception:  # a log call must never fail because the launch layout is odd
            _rank_cache["rank"] = 0
    return _rank_cache["rank"]


def _rank_and_all_ranks() -> tuple[int, bool]:
    """What ``setup()`` recorded for ezpz's own events; before it, the launcher's rank and the environment."""
    rank, all_ranks = log_rank()
    if rank is None:
        return _launcher_rank(), _env_all_ranks()
    return rank, all_ranks


class _RankZeroFilter(logging.Filter):
    """ezpz's rank filter (:func:`ezpz.primitives.logger.keeps`) on a standard-library logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:  # no rank needed to decide
            return True
        return keeps(record.levelno, *_rank_and_all_ranks())


class _FallbackHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """stdout output used only while the application has configured no logging of its own."""

    def __init__(self) -> None:
        super().__init__(sys.stdout)
        self.setFormatter(_Formatter(LINE_FORMAT, TIME_FORMAT))

    def handle(self, record: logging.LogRecord) -> bool:
        if logging.getLogger().handlers:  # the application configured logging: it decides
            return False
        self.stream = sys.stdout  # follow redirections (pytest capture, contextlib.redirect_stdout)
        return bool(super().handle(record))


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        rank, all_ranks = _rank_and_all_ranks()
        return f"[r{rank}]{text}" if all_ranks else text


_handler: _FallbackHandler | None = None
_rank_filter = _RankZeroFilter()


def _level(level: str | int | None) -> int:
    if level is None:
        level = os.environ.get("EZPZ_LOG_LEVEL", "").strip() or "INFO"
    if isinstance(level, int):
        return level
    value = logging.getLevelName(str(level).strip().upper())
    if not isinstance(value, int):
        from ezpz.errors import ConfigError

        raise ConfigError(name="get_logger(level=...) / EZPZ_LOG_LEVEL", value=level,
                          expected="DEBUG, INFO, WARNING, ERROR, CRITICAL or a number",
                          fix="pass level='INFO' (or set EZPZ_LOG_LEVEL=INFO)")
    return value


def get_logger(
    name: str | None = None, level: str | int | None = None, rank_zero_only: bool = True,
    rank: int | str | None = None, colored_logs: bool | None = None,
) -> logging.Logger:
    """The standard-library logger ``name``, set up so a script's INFO lines show on rank 0.

    :param name: Logger name (``__name__`` in a script); None means ``"ezpz.log"`` (as the original), which
        leaves ezpz's own ``ezpz.*`` event loggers without output.
    :param level: Level for this logger; default ``EZPZ_LOG_LEVEL``, else INFO.
    :param rank_zero_only: Keep records below WARNING on rank 0 only.
    :param rank: Accepted for compatibility and ignored: the rank is read when a record is emitted.
    :param colored_logs: Accepted for compatibility and ignored (output is plain text).

    Attaches ezpz's fallback stdout handler (see the module docstring) on the
    first call for each name; calling again changes only the level and filter.
    """
    global _handler
    del rank, colored_logs
    logger = logging.getLogger(name if name is not None else "ezpz.log")  # the original's name, not where it lives
    logger.setLevel(_level(level))
    _env_all_ranks(strict=True)
    if rank_zero_only:
        if _rank_filter not in logger.filters:
            logger.addFilter(_rank_filter)
    else:
        logger.removeFilter(_rank_filter)
    if _handler is None:
        _handler = _FallbackHandler()
    if _handler not in logger.handlers:
        logger.addHandler(_handler)
    return logger


getLogger = get_logger  # the original's alias


def silence_noisy_loggers(*, extra: Sequence[str] | None = None, level: int = logging.WARNING, **_ignored: Any) -> None:
    """Raise chatty third-party loggers (urllib3, filelock, httpx, huggingface_hub, datasets, ``extra``) to ``level``."""
    for name in (*_DEFAULT_NOISY, *(extra or ())):
        logging.getLogger(name).setLevel(level)
