"""``ezpz.primitives.bookkeeping_dir``: the configured place, else a checked per-user fallback, else nowhere; said
once. (The read-only node end to end: tests/test_bookkeeping_readonly.py.)"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest

from ezpz.primitives import bookkeeping_dir


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temporary directory (tempfile.gettempdir()), and no decision remembered from another test."""
    base = tmp_path / "tmp"
    base.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    bookkeeping_dir.forget()
    yield base
    bookkeeping_dir.forget()


def _said(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ezpz.bookkeeping" and r.levelno == level]


def _unwritable(tmp_path: Path) -> Path:
    blocker = tmp_path / "file"
    blocker.write_text("")  # nothing can be created under a regular file, even by root
    return blocker / "ezpz-jobs" / "run"


def test_a_writable_place_is_used_and_nothing_is_said(tmp, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="ezpz.bookkeeping"):
        got = bookkeeping_dir.usable_dir(tmp_path / "jobs" / "run", what="report")
    assert got == tmp_path / "jobs" / "run" and got.is_dir()
    assert not _said(caplog, logging.INFO) and not _said(caplog) and list(got.iterdir()) == []  # the probe is gone


def test_an_unwritable_place_moves_to_the_mirrored_fallback_said_once(tmp, tmp_path, caplog):
    wanted = _unwritable(tmp_path)
    with caplog.at_level(logging.WARNING, logger="ezpz.bookkeeping"):
        first = bookkeeping_dir.usable_dir(wanted, what="CUDA-compat report", fix="set EZPZ_CUDA_COMPAT_DIR")
        again = bookkeeping_dir.usable_dir(wanted, what="CUDA-compat report")
    root = tmp / f"ezpz-{os.getuid()}"
    assert first == again == root / str(wanted).lstrip("/") and first.is_dir()
    assert root.stat().st_mode & 0o777 == 0o700
    [said] = _said(caplog)
    assert said.startswith("ezpz_files_redirected") and f"path={wanted}" in said and f"instead={first}" in said
    assert "Not a directory" in said and "EZPZ_CUDA_COMPAT_DIR" in said
    assert bookkeeping_dir.fallback_of(wanted) == first


@pytest.mark.parametrize("hostile", ["symlink", "other owner", "open mode", "a file"])
def test_a_fallback_root_that_is_not_this_users_own_is_refused_and_the_files_dropped(tmp, tmp_path, caplog, hostile):
    root = tmp / f"ezpz-{os.getuid()}"
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir(mode=0o700)
    if hostile == "symlink":
        root.symlink_to(elsewhere)
    elif hostile == "a file":
        root.write_text("")
    else:
        root.mkdir(mode=0o700)
        if hostile == "open mode":
            root.chmod(0o777)
        elif os.getuid() == 0:
            os.chown(root, 4242, 4242)
        else:
            pytest.skip("only root can give a directory to another user")
    with caplog.at_level(logging.WARNING, logger="ezpz.bookkeeping"):
        assert bookkeeping_dir.usable_dir(_unwritable(tmp_path), what="failure records") is None
    [said] = _said(caplog)
    assert said.startswith("ezpz_files_dropped") and "the run goes on without them" in said
    why = {"symlink": "symbolic link", "other owner": "owned by uid 4242", "open mode": "open to group or others",
           "a file": "not a directory"}[hostile]
    assert why in said and str(root) in said, said
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    assert bookkeeping_dir.fallback_of(tmp_path / "x") is None


def test_no_temporary_directory_at_all_drops_the_files_with_the_reason(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(tempfile, "_get_default_tempdir", lambda: (_ for _ in ()).throw(
        FileNotFoundError(2, "No usable temporary directory found in ['/tmp']")))
    bookkeeping_dir.forget()
    with caplog.at_level(logging.WARNING, logger="ezpz.bookkeeping"):
        assert bookkeeping_dir.usable_dir(_unwritable(tmp_path), what="straggler report") is None
    [said] = _said(caplog)
    assert "No usable temporary directory" in said
    bookkeeping_dir.forget()


def test_a_group_warns_once_then_tells_at_info(tmp, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="ezpz.bookkeeping"):
        a = bookkeeping_dir.usable_dir(_unwritable(tmp_path) / "entry-points", what="cache", group="cache")
        b = bookkeeping_dir.usable_dir(_unwritable(tmp_path) / "probes", what="cache", group="cache")
    assert a is not None and b is not None and a != b
    assert len(_said(caplog)) == 1 and len(_said(caplog, logging.INFO)) == 1


def test_a_failed_write_is_said_once_per_directory(tmp, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="ezpz.bookkeeping"):
        for _ in range(3):
            bookkeeping_dir.write_failed(tmp_path / "d" / "stragglers.json", what="straggler report",
                                         error=OSError(28, "No space left on device"))
    [said] = _said(caplog)
    assert said.startswith("ezpz_file_not_written") and "No space left on device" in said
