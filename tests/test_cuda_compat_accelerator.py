"""``torch.accelerator`` code under a 2-rank launch, on the CPU and on ``emu``: the device count fits the launch.

``tests/cuda_projects/accelerator_ddp/train.py`` needs two devices (``torch.accelerator.device_count() >= 2``),
binds ``<accelerator>:<local_rank>``, asks ``get_default_backend_for_device`` and passes ``device_id=``; without
the mode it stops at once on the CPU ("needs an accelerator") and on ``emu`` (one device per process). Under it,
both complete with the same losses, on the chosen device, with the chosen backend.
"""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, last_json
from test_cuda_compat_launchers import torchrun

pytestmark = pytest.mark.launcher

SCRIPT = ROOT / "tests" / "cuda_projects" / "accelerator_ddp" / "train.py"


def test_accelerator_style_ddp_needing_two_devices_runs_on_cpu_and_emu(tmp_path):
    runs = {}
    for device in ("cpu", "emu"):
        (tmp_path / device).mkdir()
        proc = torchrun(["-m", "ezpz.cuda_compat", str(SCRIPT), str(tmp_path / device / "ckpt.pt")], tmp_path / device,
                        EZPZ_DEVICE=device)
        runs[device] = last_json(proc.stdout)
        rows = json.loads((tmp_path / device / "report" / "rank-1.json").read_text())["sites"]
        calls = {r["call"]: r["became"] for r in rows}
        assert calls["torch.accelerator.device_count()"].startswith("2: 2 process(es) on this host")
        assert "torch.accelerator.set_device_index(1)" in calls
    cpu, emu = runs["cpu"], runs["emu"]
    assert (cpu["count"], cpu["backend"], cpu["params_on"], cpu["index"]) == (2, "gloo", "cpu", 0)
    assert (emu["count"], emu["backend"], emu["params_on"], emu["index"]) == (2, "emuccl", "emu", 0)
    assert emu["losses"] == cpu["losses"] and len(cpu["losses"]) == 3
