"""ezpz.get_logger: a stdlib logger whose INFO lines show on rank 0 when the application configured no logging."""

from __future__ import annotations

import logging
import re

import pytest

import ezpz
from conftest import clean_env, run_python
from ezpz.errors import ConfigError

pytestmark = pytest.mark.one_torch  # ezpz's own output: its logger: runs on the pinned torch only (docs/ci.md)

LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\]\[I\]\[__main__:\d+\] step 3 loss=0.250$")
SCRIPT = """
import ezpz
logger = ezpz.get_logger(__name__)
logger.info("step %d loss=%.3f", 3, 0.25)
logger.debug("debug is below the default level")
logger.warning("a warning from every rank")
try:
    {}["missing"]
except KeyError:
    logger.error("lookup failed", exc_info=True)
"""


def run(env: dict[str, str], prelude: str = "") -> tuple[list[str], str]:
    proc = run_python(prelude + SCRIPT, env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines(), proc.stderr


def test_info_shows_formatted_on_stdout_with_no_logging_configured():
    out, err = run(clean_env())
    assert LINE.match(out[0]), out
    assert out[1].endswith("[W]" + out[1].split("[W]")[1]) and "a warning from every rank" in out[1]
    assert "lookup failed" in out[2] and "KeyError: 'missing'" in "\n".join(out[3:])
    assert not any("debug is below" in ln for ln in out) and err == ""


def test_other_ranks_keep_warnings_only_unless_all_ranks_asked():
    partial = {"RANK": "1"}  # a partial launcher environment: the original read rank 1 from it, so do we
    out, _ = run(clean_env(**partial))
    assert [ln for ln in out if "step 3" in ln] == [] and any("a warning from every rank" in ln for ln in out)
    out, _ = run(clean_env(EZPZ_LOG_ALL_RANKS="1", **partial))
    assert out[0].startswith("[r1][") and out[0].endswith("step 3 loss=0.250")


def test_level_from_argument_and_environment():
    out, _ = run(clean_env(EZPZ_LOG_LEVEL="DEBUG"))
    assert any("debug is below the default level" in ln for ln in out)
    proc = run_python("import ezpz; ezpz.get_logger('x', level='bogus')", clean_env())
    assert proc.returncode == 1 and "get_logger(level=...)" in proc.stderr and "'bogus'" in proc.stderr


def test_application_logging_wins_and_nothing_is_printed_twice():
    prelude = "import logging, sys; logging.basicConfig(stream=sys.stdout, level=logging.INFO, format='APP %(message)s')\n"
    out, _ = run(clean_env(), prelude)
    assert out.count("APP step 3 loss=0.250") == 1 and not any(LINE.match(ln) for ln in out)


def test_import_and_first_use_leave_root_logging_alone():
    code = ("import logging; import ezpz; root = logging.getLogger(); assert not root.handlers; "
            "log = ezpz.get_logger('user.mod'); assert not root.handlers and log.propagate; "
            "assert isinstance(log, logging.Logger) and len(log.handlers) == 1; "
            "assert ezpz.get_logger('user.mod').handlers == log.handlers; print('ok')")
    proc = run_python(code, clean_env())
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_is_a_stdlib_logger_that_takes_handlers_and_levels():
    log = ezpz.get_logger("ezpz.test.user", level="WARNING")
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    keep = Keep()
    log.addHandler(keep)
    try:
        log.info("hidden %s", 1)
        log.warning("shown %s", 2)
        assert seen == ["shown 2"] and log.getEffectiveLevel() == logging.WARNING
        ezpz.get_logger("ezpz.test.user", level=logging.DEBUG, rank_zero_only=False).debug("now %s", 3)
        assert seen[-1] == "now 3"
    finally:
        log.removeHandler(keep)


def test_bad_all_ranks_value_is_named_at_get_logger(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EZPZ_LOG_ALL_RANKS", "maybe")
    with pytest.raises(ConfigError, match="EZPZ_LOG_ALL_RANKS"):
        ezpz.get_logger("ezpz.test.bad")


def test_default_name_is_the_originals_and_leaves_ezpz_events_alone():
    code = ("import ezpz; log = ezpz.get_logger(); assert log.name == 'ezpz.log', log.name; "
            "ezpz.hooks.setup(); log.info('mine %s', 1)")
    proc = run_python(code, clean_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("[ezpz.log:1] mine 1") and "setup_done" not in proc.stdout + proc.stderr


def test_one_rank_filter_for_ezpz_events_and_get_logger(monkeypatch: pytest.MonkeyPatch):
    """After setup(), ezpz.get_logger asks the same (rank, all ranks?) as ezpz's own events: ezpz.primitives.logger's."""
    import logging

    from ezpz.primitives import logger as _log
    from ezpz.original import log as original_log

    monkeypatch.setenv("EZPZ_LOG_ALL_RANKS", "0")  # what setup() recorded wins over the environment
    info = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    warning = logging.LogRecord("x", logging.WARNING, __file__, 1, "m", None, None)
    rank_filter = original_log._RankZeroFilter()
    try:
        for rank, all_ranks in ((0, False), (1, False), (1, True), (3, True)):
            _log.set_rank(rank, all_ranks=all_ranks)
            assert rank_filter.filter(info) is _log.keeps(logging.INFO, rank, all_ranks) is (rank == 0 or all_ranks)
            assert rank_filter.filter(warning) and _log.keeps(logging.WARNING, rank, all_ranks)
    finally:
        _log.set_rank(None, all_ranks=False)
