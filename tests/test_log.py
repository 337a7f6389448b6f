"""Rank-aware logging, and that the library never configures logging itself."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys

import pytest

from conftest import clean_env, need_tool, run_python
from ezpz.primitives import logger as _log


@pytest.fixture
def records():
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger = logging.getLogger("ezpz.test")
    handler, old_level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield seen
    logger.removeHandler(handler)
    logger.setLevel(old_level)
    _log.set_rank(None, all_ranks=False)


def test_rank_zero_logs_info_other_ranks_only_warnings(records):
    log = _log.get_logger("ezpz.test")
    _log.set_rank(1, all_ranks=False)
    log.info("quiet_on_rank_1")
    log.warning("loud_everywhere", detail="x")
    _log.set_rank(0, all_ranks=False)
    log.info("rank_0_speaks")
    messages = [r.getMessage() for r in records]
    assert messages == ["loud_everywhere detail=x rank=1", "rank_0_speaks rank=0"]


def test_all_ranks_on_request(records):
    _log.set_rank(3, all_ranks=True)
    _log.get_logger("ezpz.test").info("hello")
    assert [r.getMessage() for r in records] == ["hello rank=3"]


def test_importing_ezpz_configures_no_logging():
    code = ("import logging, structlog; before = list(logging.getLogger().handlers); import ezpz; "
            "assert logging.getLogger().handlers == before, 'root handlers changed'; "
            "assert not logging.getLogger('ezpz').handlers; assert not structlog.is_configured(); print('ok')")
    proc = run_python(code, clean_env())
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


@pytest.mark.launcher
@pytest.mark.parametrize("all_ranks", ["0", "1"])
def test_under_torchrun_only_rank_zero_logs_unless_asked(all_ranks):
    torchrun = need_tool("torchrun")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = "import logging, ezpz; logging.basicConfig(level=logging.INFO); ezpz.hooks.setup(); ezpz.hooks.teardown()"
    proc = subprocess.run(
        [torchrun, "--nproc-per-node", "2", "--master-port", str(port), "--no-python", sys.executable, "-c", script],
        env=clean_env(OMP_NUM_THREADS="1", EZPZ_LOG_ALL_RANKS=all_ranks), capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    done = sorted(ln.split("rank=")[1].split()[0] for ln in proc.stderr.splitlines() if "setup_done" in ln)
    assert done == (["0", "1"] if all_ranks == "1" else ["0"])
