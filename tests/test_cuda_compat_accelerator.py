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

SCRIPT = ROOT / "tests" / "cuda_projects" / "accelerator_ddp" / "train.py"


@pytest.mark.launcher
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


def test_the_local_rank_index_of_the_chosen_type_is_this_ranks_device():
    import torch

    from ezpz.cuda_compat.devices import DeviceMap

    # rank 1 of 2 on a device with one index per process (as emu; "meta" stands for it): its index 1 is this rank
    emu = DeviceMap(torch.device("meta"), local_rank=1, count=1, local_world_size=2)
    assert emu.asks_cuda("meta:1") and emu.asks_cuda(torch.device("meta", 1)) and emu.asks_cuda("cuda:1")
    assert not emu.asks_cuda("meta:0") and not emu.asks_cuda("cpu")
    assert emu.device("meta:1") == torch.device("meta") and emu.device(torch.device("cuda", 1)) == torch.device("meta")
    # the CPU takes 'cpu:1' as it is: nothing to map; a device with as many indices as ranks: the real index
    assert not DeviceMap(torch.device("cpu"), local_rank=1, count=1, local_world_size=2).asks_cuda("cpu:1")
    assert not DeviceMap(torch.device("meta", 1), local_rank=1, count=2, local_world_size=2).asks_cuda("meta:1")
