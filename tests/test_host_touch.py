"""The stand-in pass's selection (tests/host_touch.py): what the core pass records, and what is then left out.

Only a test that passed without touching the host may be left out of the stand-in pass; one that started
a process, listed the installed distributions, used a plugin host, or skipped is rerun, and so is one
the record does not name.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import clean_env

TESTS = Path(__file__).resolve().parent

SAMPLE = '''
import importlib.metadata, subprocess, sys
import pytest

def test_pure():
    assert sum([1, 2]) == 3

def test_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_lists_distributions():
    assert list(importlib.metadata.distributions())

def test_plugin_host():
    import ezpz.hooks
    assert ezpz.hooks.get_plugin_host().loaded()

def test_skipped():
    pytest.skip("skips here")
'''

CONFTEST = f'''
import sys
sys.path.insert(0, {str(TESTS)!r})
import host_touch

def pytest_configure(config):
    host_touch.register(config)
'''


def _pytest(where: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-c", str(where / "pytest.ini"), "--rootdir", str(where), str(where / "test_sample.py"),
                           *args], cwd=where, env=clean_env(**env), capture_output=True, text=True, timeout=120)


def test_the_record_names_how_each_test_touched_the_host_and_the_stand_in_pass_reruns_all_but_the_untouched(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    record = tmp_path / "record"

    done = _pytest(tmp_path, EZPZ_TEST_HOST_RECORD=str(record))
    assert done.returncode == 0, done.stdout + done.stderr
    import host_touch

    seen = {nodeid.split("::")[1]: how for nodeid, how in host_touch.read_record(record).items()}
    assert seen["test_pure"] == host_touch.UNTOUCHED
    assert seen["test_child"].startswith("started python")
    assert seen["test_lists_distributions"] == "listed the installed distributions"
    assert seen["test_plugin_host"] in ("used a plugin host", "called a plugin hook")
    assert seen["test_skipped"] == "did not pass"

    chosen = _pytest(tmp_path, "--co", EZPZ_TEST_HOST_ONLY=str(record))
    assert chosen.returncode == 0, chosen.stdout + chosen.stderr
    assert "test_pure" not in chosen.stdout and "1 deselected" in chosen.stdout
    for rerun in ("test_child", "test_lists_distributions", "test_plugin_host", "test_skipped"):
        assert f"test_sample.py::{rerun}" in chosen.stdout

    everything = _pytest(tmp_path, "--co", EZPZ_TEST_HOST_ONLY=str(tmp_path / "no-record-here"))
    assert "test_sample.py::test_pure" in everything.stdout and "deselected" not in everything.stdout
