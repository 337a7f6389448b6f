"""The C++ compiler check is remembered per binary: a changed, broken or untrusted record means a real check.

The "compiler" is a real executable script that counts its runs, named by
``CXX`` as a user would; the record lives under a private ``XDG_CACHE_HOME``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ezpz.builtin import cxx


@pytest.fixture
def compiler(tmp_path, monkeypatch):
    """A compiler script that appends to ``runs`` each time it is run."""
    runs = tmp_path / "runs"
    script = tmp_path / "bin" / "fake-g++"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\necho run >> {runs}\necho 'fake-g++ (test) 1.0'\n")
    script.chmod(0o755)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cxx._run_version.cache_clear()
    yield script, runs
    cxx._run_version.cache_clear()


def _probe(script: Path, **env: str) -> cxx.CxxFacts:
    cxx._run_version.cache_clear()  # a new process
    return cxx.probe_cxx({"CXX": str(script), **env}, platform="linux")


def _runs(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_a_passing_check_is_remembered_for_the_same_binary(compiler):
    script, runs = compiler
    first = _probe(script)
    assert first.works and first.version == "fake-g++ (test) 1.0" and _runs(runs) == 1
    assert _probe(script) == first and _runs(runs) == 1  # remembered: not run again


def test_a_changed_binary_is_checked_again(compiler):
    script, runs = compiler
    _probe(script)
    script.write_text(script.read_text().replace("1.0", "2.0"))
    assert _probe(script).version == "fake-g++ (test) 2.0" and _runs(runs) == 2


def test_a_failing_compiler_is_never_remembered(compiler):
    script, runs = compiler
    script.write_text(f"#!/bin/sh\necho run >> {runs}\nexit 3\n")
    assert not _probe(script).works
    assert not _probe(script).works and _runs(runs) == 2


@pytest.mark.parametrize("damage", [
    lambda f: f.write_text("{not json"),
    lambda f: f.chmod(0o666),
    lambda f: f.write_text(json.dumps({"key": "forged", "version": "evil"})),
])
def test_a_corrupt_or_untrusted_record_means_a_real_check(compiler, damage):
    script, runs = compiler
    _probe(script)
    (record,) = (Path(os.environ["XDG_CACHE_HOME"]) / "ezpz" / "probes").glob("cxx-*.json")
    damage(record)
    assert _probe(script).version == "fake-g++ (test) 1.0" and _runs(runs) == 2


def test_switched_off_or_not_rank_0_nothing_is_written(compiler):
    script, runs = compiler
    _probe(script, EZPZ_CACHE="0")
    _probe(script, RANK="3")
    assert not (Path(os.environ["XDG_CACHE_HOME"]) / "ezpz" / "probes").exists()
    assert _runs(runs) == 2
