"""Launch detectors whose modules load only when their launcher's variables are set.

A gated detector's ``absent`` answer must be exactly what the real detector says
whenever none of its gate variables is set; else ``ezpz doctor`` would read
differently depending on what happened to be imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from ezpz.launch_env.detectors import DETECTORS, GatedDetector

GATED = {name: d for name, d in DETECTORS if isinstance(d, GatedDetector)}
# every variable any detector reads first, plus neighbours that must not open a gate on their own
POOL = sorted({g for d in GATED.values() for g in d.gate} | {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMIX_RANK",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_SIZE", "PALS_LOCAL_RANKID", "PALS_NODEID",
    "FLUX_JOB_SIZE", "JSM_NAMESPACE_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NODELIST", "PET_NPROC_PER_NODE",
    "SKYPILOT_NUM_NODES", "TORCHELASTIC_RUN_ID", "GROUP_RANK", "PBS_NODEFILE"})
VALUES = st.sampled_from(["0", "1", "2", "4", "", "x", "node[1-2]"])


def test_the_gated_launchers_are_the_ones_with_modules_of_their_own():
    assert set(GATED) == {"openmpi", "flux", "jsrun", "pals", "hydra", "slurm", "node"}


@settings(max_examples=300, deadline=None)
@given(env=st.dictionaries(st.sampled_from(POOL), VALUES, max_size=8))
def test_a_closed_gate_answers_what_the_detector_would(env):
    for name, gated in GATED.items():
        if all(not env.get(g) for g in gated.gate):
            assert gated(env) == gated.absent
            assert gated.load()(env) == gated.absent, (name, env)


def test_an_open_gate_asks_the_detector():
    env = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    found = GATED["openmpi"](env)
    assert (found.launcher, found.rank, found.world_size) == ("openmpi", 1, 2)


def test_a_single_process_and_a_torchrun_rank_import_no_other_launchers_module():
    code = ("import json, sys; from ezpz.launch_env.detectors import detect_layout; "
            "envs = [{}, {'TORCHELASTIC_RUN_ID': 'x', 'GROUP_RANK': '0', 'RANK': '1', 'WORLD_SIZE': '2', "
            "'LOCAL_RANK': '1', 'LOCAL_WORLD_SIZE': '2', 'MASTER_ADDR': 'h', 'MASTER_PORT': '1'}]; "
            "print(json.dumps([[detect_layout(e).launcher for e in envs], "
            "sorted(m for m in sys.modules if m.startswith('ezpz.launch_env.'))]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    launchers, modules = json.loads(out.stdout)
    assert launchers == ["single", "torchrun"]
    loaded = {m.rsplit(".", 1)[1] for m in modules}
    assert not loaded & {"mpi", "flux", "lsf", "slurm", "node_job"}, modules
