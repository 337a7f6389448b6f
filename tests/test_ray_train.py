"""ezpz.hooks.setup() inside a real Ray Train TorchTrainer (a local Ray cluster started here, 2 CPU workers).

Ray creates the process group before the training function runs; setup() must adopt it, not rendezvous again.
scripts/test.sh installs ``ray[train]==2.60.0`` (with pyarrow and pandas, about 500 MB); where ray is missing this
skips, naming the install line.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env

SCRIPT = str(Path(__file__).parent / "scripts" / "ray_train_check.py")
pytestmark = [
    pytest.mark.launcher,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason="ray not installed: pip install -c constraints.txt 'ray[train]==2.60.0' "
                              "(scripts/test.sh does)"),
]


def test_setup_inside_torch_trainer_adopts_rays_group(tmp_path):
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], env=clean_env(OMP_NUM_THREADS="1"),
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    rows = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for rank, row in enumerate(rows):
        assert (row["rank"], row["group_rank"], row["world_size"], row["local_rank"]) == (rank, rank, 2, rank)
        assert row["sum"] == 3.0  # 1 + 2: the all-reduce ran over Ray's group
        assert row["adopted"] == f"adopted from Ray Train (gloo, rank {rank} of 2)"
        assert "process_group: adopted from Ray Train" in row["explain"]
        assert row["pg_after_teardown"] is True  # Ray's group is Ray's to destroy
