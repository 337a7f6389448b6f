"""The kit's torch-database check (ezpz.testing.torch_db): verdicts counted, a crash is a result, bounded, refused
without torch's test dependencies. The run on emu is plugins/ezpz-example-emu/tests/test_emu_torch_db.py."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from ezpz.testing import torch_db
from ezpz.testing.torch_db import TorchDbReport, run_torch_db


def _row(kind: str, name: str, status: str, sample: int = 0) -> dict[str, object]:
    return {"kind": kind, "name": name, "sample": sample, "status": status, "detail": "", "seconds": 0.0}


def test_the_summary_counts_samples_and_entries() -> None:
    rows = [_row("op", "add", "equal"), _row("op", "add", "equal", 1), _row("op", "fft.hfft", "crashed"),
            _row("op", "empty", "skipped"), _row("module", "nn.LSTM", "equal"), _row("module", "nn.GRU", "raised")]
    report = TorchDbReport(plugin="p", device="emu:0", seconds=3.0, results=rows, json_path="/x.json")
    assert report.equal_fraction("op") == pytest.approx(2 / 3)  # skipped samples are not compared
    assert report.entries_equal("op") == (1, 2) and report.entries_equal("module") == (1, 2)
    assert report.not_equal("op") == ["fft.hfft"] and report.not_equal("module") == ["nn.GRU"]
    assert "ops: 2/3 samples equal (66.7%), 0 different, 0 raised, 1 crashed, 1 skipped, 0 not run; 1/2 ops equal" \
        in report.summary
    assert "modules: 1/2 samples equal" in report.summary and report.summary.endswith("JSON /x.json")


def test_without_torchs_test_dependencies_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setattr(torch_db, "TEST_DEPENDENCIES", ("expecttest", "surely_not_installed_x"))
    report = run_torch_db("p", "ezpz.builtin.cpu", json_path=tmp_path / "r.json")
    assert report.error and "surely_not_installed_x" in report.summary and "ezpz[kit]" in report.summary
    assert not (tmp_path / "r.json").exists()


_CRASHING = '''
"""A stand-in plugin: the built-in cpu device, where the first hardshrink call kills the process (once: a marker
file in EZPZ_TEST_KILL_ONCE says it happened; later calls compute hardshrink by its definition)."""
import os
import signal

import torch

from ezpz import hookimpl
from ezpz.builtin import cpu


def _hardshrink(x, lambd=0.5):
    try:
        os.close(os.open(os.environ["EZPZ_TEST_KILL_ONCE"], os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return torch.where(x.abs() > lambd, x, torch.zeros_like(x))
    os.kill(os.getpid(), signal.SIGSEGV)


if os.environ.get("EZPZ_TEST_KILL_ONCE"):
    _lib = torch.library.Library("aten", "IMPL")
    _lib.impl("hardshrink", _hardshrink, "CPU")


@hookimpl
def ezpz_probe_devices(build, environ):
    return cpu.ezpz_probe_devices(build=build, environ=environ)
'''


def test_a_crash_is_a_verdict_and_a_new_worker_goes_on(tmp_path: Path) -> None:
    pytest.importorskip("expecttest", reason="torch's test databases need expecttest (pip install 'ezpz[kit]')")
    (tmp_path / "crashing_cpu.py").write_text(textwrap.dedent(_CRASHING))
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    out = tmp_path / "verdicts.json"
    report = run_torch_db("crashing", "crashing_cpu", environ={"PYTHONPATH": path,
                                                              "EZPZ_TEST_KILL_ONCE": str(tmp_path / "killed")},
                          only=["nn.functional.hardshrink", "abs"], workers=1, json_path=out)
    assert not report.error, report.summary
    shrink = [r for r in report.results if r["name"] == "nn.functional.hardshrink"]
    assert shrink[0]["status"] == "crashed" and "killed by SIGSEGV" in shrink[0]["detail"], shrink[0]
    assert "Fatal Python error" in shrink[0]["detail"]
    # a new worker went on with the next samples, and with the next entry
    assert [r["status"] for r in shrink[1:]] == ["equal", "equal"]
    assert {r["status"] for r in report.results if r["name"] == "abs"} == {"equal"}
    assert report.counts("op")["crashed"] == 1 and report.device == "cpu"
    saved = json.loads(out.read_text())
    assert saved["summary"] == report.summary.removesuffix(f"; JSON {out}")
    assert saved["results"] == list(report.results) and report.json_path == str(out)

