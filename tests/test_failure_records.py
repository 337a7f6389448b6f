"""Failure records: the file format, hostile files, and the settings that place them."""

from __future__ import annotations

import json

import pytest

from ezpz.errors import ConfigError
from ezpz.failures.record import MAX_RECORD_BYTES, FailureRecord, read_failures, read_failures_verbose, write_failure
from ezpz.inputs.settings import parse_attempt, parse_failure_dir


def _record(**kw) -> FailureRecord:
    base = dict(rank=1, host="node-b", attempt=0, kind="lost_peer", first_line="peer went away\nmore",
                missing_ranks=(3, 2), missing_hosts=("node-c",), exception_type="DistBackendError", pid=42, time=1.5)
    base.update(kw)
    return FailureRecord(**base)


def test_round_trip_is_atomic_and_sorted(tmp_path):
    path = write_failure(_record(), tmp_path / "attempt-0")
    assert path.name == "rank-1.json"
    assert [p.name for p in path.parent.iterdir()] == ["rank-1.json"]  # no temporary file left behind
    write_failure(_record(rank=0, kind="timeout"), path.parent)
    got = read_failures(path.parent)
    assert [r.rank for r in got] == [0, 1]
    assert got[1] == _record()
    assert got[1].first_line == "peer went away" and got[1].missing_ranks == (2, 3)


def test_first_line_is_scrubbed(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijkl")
    rec = _record(first_line="failed with https://user:pw@host/x?token=zzz hf_abcdefghijkl")
    assert "hf_abcdefghijkl" not in rec.first_line and "pw@" not in rec.first_line and "zzz" not in rec.first_line


@pytest.mark.parametrize("bad", [{"kind": "meltdown"}, {"rank": -1}, {"attempt": True}])
def test_bad_fields_refused(bad):
    with pytest.raises(ValueError):
        _record(**bad)


@pytest.mark.parametrize("content, why", [
    (b"{not json", "JSONDecodeError"),
    (b"[1, 2]", "JSON object"),
    (json.dumps({**_record().to_dict(), "rank": "1"}).encode(), "'rank'"),
    (json.dumps({**_record().to_dict(), "kind": "meltdown"}).encode(), "meltdown"),
    (json.dumps({**_record().to_dict(), "missing_ranks": ["x"]}).encode(), "missing_ranks"),
    (json.dumps({**_record().to_dict(), "rank": 7}).encode(), "name says otherwise"),
    (b"[" * 100000, "RecursionError|JSONDecodeError|bytes"),
    (b"\xff\xfe", "UnicodeDecodeError"),
    (b" " * (MAX_RECORD_BYTES + 1), "bytes, more than"),
])
def test_hostile_files_skipped_with_reason(tmp_path, content, why):
    import re

    write_failure(_record(rank=0), tmp_path)
    (tmp_path / "rank-1.json").write_bytes(content)
    (tmp_path / "notes.txt").write_text("ignored")
    records, skipped = read_failures_verbose(tmp_path)
    assert [r.rank for r in records] == [0]
    assert len(skipped) == 1 and skipped[0].path.name == "rank-1.json"
    assert re.search(why, skipped[0].reason), skipped[0].reason


def test_read_failures_logs_what_it_skipped(tmp_path, caplog):
    (tmp_path / "rank-4.json").write_text("{oops")
    with caplog.at_level("WARNING", logger="ezpz.failures"):
        assert read_failures(tmp_path) == []
    assert "failure_record_skipped" in caplog.text and "rank-4.json" in caplog.text


def test_missing_directory_reads_empty(tmp_path):
    assert read_failures(tmp_path / "nope") == []


def test_attempt_sums_ezpz_and_torchrun():
    assert parse_attempt({}).number == 0
    got = parse_attempt({"EZPZ_ATTEMPT": "2", "TORCHELASTIC_RESTART_COUNT": "1"})
    assert got.number == 3 and "EZPZ_ATTEMPT=2" in got.source and "TORCHELASTIC_RESTART_COUNT=1" in got.source
    assert parse_attempt({"TORCHELASTIC_RESTART_COUNT": "0"}).number == 0


@pytest.mark.parametrize("name", ["EZPZ_ATTEMPT", "TORCHELASTIC_RESTART_COUNT"])
@pytest.mark.parametrize("value", ["-1", "x", "1.5", "٣", "99999999999"])
def test_bad_attempt_names_the_variable(name, value):
    with pytest.raises(ConfigError) as err:
        parse_attempt({name: value})
    assert err.value.name == name and err.value.value == value


def test_failure_dir(tmp_path):
    assert parse_failure_dir({}) is None and parse_failure_dir({"EZPZ_FAILURE_DIR": " "}) is None
    assert parse_failure_dir({"EZPZ_FAILURE_DIR": str(tmp_path / "new")}) == str(tmp_path / "new")
    file = tmp_path / "f"
    file.write_text("x")
    with pytest.raises(ConfigError) as err:
        parse_failure_dir({"EZPZ_FAILURE_DIR": str(file)})
    assert err.value.name == "EZPZ_FAILURE_DIR"
    with pytest.raises(ConfigError):
        parse_failure_dir({"EZPZ_FAILURE_DIR": "a\0b"})
