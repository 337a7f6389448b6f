"""``DistributedDataParallel(device_ids=[rank])`` under the mode on a device with indices: DDP moves the inputs.

On CUDA, DDP with ``device_ids`` moves the forward's inputs to ``device_ids[0]``; pytorch/examples'
distributed/ddp/example.py relies on it (its input is made on the host). The mode hands DDP the module's own
device (``emu:0``), so the host input reaches emu; before, it passed ``device_ids=None`` and the loss met a host
tensor and an emu one. On the CPU, DDP takes no ``device_ids`` and the inputs are already there.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env
from test_real_launchers import free_port

pytestmark = pytest.mark.launcher
SCRIPT = ROOT / "tests" / "scripts" / "cuda_ddp_host_inputs.py"


def test_ddp_moves_host_inputs_to_emu_as_on_cuda(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
         "-m", "ezpz.cuda_compat", str(SCRIPT)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=clean_env(EZPZ_DEVICE="emu", EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    # The two ranks print to one pipe, so their lines may interleave: read the records, not the lines.
    lines = re.findall(r"rank (\d) output (\S+) loss ([0-9.]+)", proc.stdout)
    assert len(lines) == 6 and {line[1] for line in lines} == {"emu"}, proc.stdout
    for rank in (0, 1):
        rows = {r["call"]: r for r in json.loads((tmp_path / "report" / f"rank-{rank}.json").read_text())["sites"]}
        row = rows[f"DistributedDataParallel(device_ids=[{rank}])"]
        assert row["became"].startswith("DistributedDataParallel(device_ids=['emu:0'])") and row["behaves"] == "same"
