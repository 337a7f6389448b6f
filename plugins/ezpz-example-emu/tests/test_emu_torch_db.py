"""The kit's torch-database check on emu (check_plugin(..., ops=True)): a slice of named entries in CI (the ones that
crashed, raised or differed before: fft.hfft*, the RNN modules, take_along_dim, as_strided's partial views); the
whole of op_db and module_db with EZPZ_LONG_TESTS=1 (about 6 minutes on 2 loaded cores)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ezpz.testing import check_plugin

pytest.importorskip("expecttest", reason="torch's test databases need expecttest (pip install 'ezpz[kit]')")

ENV = {"EZPZ_EXAMPLE_EMU": "1"}
SLICE = ["fft.hfft", "fft.hfft2", "nn.LSTM", "nn.GRUCell", "take_along_dim", "as_strided.partial_views"]


def test_a_slice_of_torchs_databases_equals_the_cpu(tmp_path: Path) -> None:
    report = check_plugin("example-emu", environ=ENV, isolated_import=False, ops=True, ops_only=SLICE,
                          ops_json=tmp_path / "emu.json", ops_deadline_s=120)
    for name in ("torch databases", "torch ops", "torch modules"):
        assert report[name].passed, report[name].detail
    assert "0 crashed" in report["torch ops"].detail and "2/2 modules equal" in report["torch modules"].detail
    assert (tmp_path / "emu.json").is_file()


@pytest.mark.skipif(os.environ.get("EZPZ_LONG_TESTS") != "1", reason="the whole databases: set EZPZ_LONG_TESTS=1")
def test_every_module_and_99_percent_of_op_samples_equal_the_cpu(tmp_path: Path) -> None:
    report = check_plugin("example-emu", environ=ENV, ops=True, ops_json=tmp_path / "emu.json", ops_deadline_s=1200)
    assert report.passed, str(report)
