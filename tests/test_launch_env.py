"""Launch-environment detection: each launcher from recorded variables, named errors, rendezvous, host lists."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import clean_env, need_tool
from ezpz.errors import LaunchEnvError
from ezpz.launch_env import DETECTORS, derive_port, detect_launch_env, expand_nodelist, read_hostfile
from ezpz.launch_env.rendezvous import DEFAULT_PORT, PORT_RANGE

# --- recorded environments (launcher variables only) -------------------------------------------------------------

#: torchrun --nproc-per-node 2 (torch 2.x), rank 1, recorded on this project's CI machine.
TORCHRUN = {
    "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "localhost", "MASTER_PORT": "36125", "RANK": "1", "ROLE_NAME": "default", "ROLE_RANK": "1",
    "ROLE_WORLD_SIZE": "2", "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RESTART_COUNT": "0",
    "TORCHELASTIC_RUN_ID": "3d4b7d57-45b2-40a5-9abf-f31c6c5f71b8", "TORCHELASTIC_USE_AGENT_STORE": "True",
    "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1",
}

#: Open MPI 4.1.4 ``mpiexec -n 2``, rank 1, recorded on this project's CI machine.
OPENMPI = {
    "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "1", "OMPI_UNIVERSE_SIZE": "2",
    "OMPI_MCA_orte_num_nodes": "1", "OMPI_MCA_ess_base_jobid": "2033451009", "OMPI_MCA_ess_base_vpid": "1",
    "OMPI_MCA_orte_ess_num_procs": "2", "OMPI_MCA_orte_ess_node_rank": "1", "OMPI_APP_CTX_NUM_PROCS": "2",
    "PMIX_RANK": "1", "PMIX_NAMESPACE": "2033451009", "PMIX_ID": "2033451009.1", "PMIX_HOSTNAME": "vm",
}

#: PALS mpiexec under PBS on a Cray EX (Aurora style): 2 nodes x 12 ranks, rank 17; names from Slurm's
#: cray_shasta plugin (which emulates PALS) and ALCF scripts.
PALS = {
    "PALS_APID": "9d2f6c1e-4b7a-4c55-8f0e-1a2b3c4d5e6f", "PALS_RANKID": "17", "PALS_LOCAL_RANKID": "5",
    "PALS_NODEID": "1", "PALS_DEPTH": "8", "PALS_SPOOL_DIR": "/var/run/palsd/9d2f6c1e", "PMI_RANK": "17",
    "PMI_SIZE": "24", "PMI_LOCAL_RANK": "5", "PMI_LOCAL_SIZE": "12", "PMI_UNIVERSE_SIZE": "24",
    "PBS_JOBID": "1234567.aurora-pbs-0001.hostmgmt.cm.aurora.alcf.anl.gov",
}

#: MPICH Hydra ``mpiexec -n 8 -ppn 4`` on two hosts, rank 6 (pmip_cb.c sets these).
HYDRA = {"PMI_RANK": "6", "PMI_SIZE": "8", "PMI_FD": "9", "MPI_LOCALRANKID": "2", "MPI_LOCALNRANKS": "4"}

#: ``srun -N3 -n7`` inside an allocation: task 5 on the third node (Slurm env.c names).
SLURM_STEP = {
    "SLURM_JOB_ID": "200505", "SLURM_JOBID": "200505", "SLURM_STEP_ID": "0", "SLURM_STEPID": "0",
    "SLURM_STEP_NUM_TASKS": "7", "SLURM_NTASKS": "7", "SLURM_STEP_NUM_NODES": "3", "SLURM_NNODES": "3",
    "SLURM_STEP_TASKS_PER_NODE": "3,2(x2)", "SLURM_TASKS_PER_NODE": "3,2(x2)", "SLURM_PROCID": "5",
    "SLURM_LOCALID": "0", "SLURM_NODEID": "2", "SLURM_STEP_NODELIST": "gnode[10,20,25]",
    "SLURM_JOB_NODELIST": "gnode[10,20,25,37]", "SLURM_NODELIST": "gnode[10,20,25]",
}

#: The batch script of ``sbatch -N4 --ntasks-per-node=1`` (recorded in a public gist): no srun, one process.
SLURM_BATCH = {
    "SLURM_NODELIST": "gnode[10,20,25,37]", "SLURM_NTASKS_PER_NODE": "4", "SLURM_NNODES": "4",
    "SLURM_JOBID": "200505", "SLURM_NTASKS": "4", "SLURM_TASKS_PER_NODE": "1(x4)", "SLURM_JOB_ID": "200505",
    "SLURM_NODEID": "0", "SLURM_NPROCS": "4", "SLURM_CPUS_ON_NODE": "4", "SLURM_PROCID": "0",
    "SLURM_JOB_NODELIST": "gnode[10,20,25,37]", "SLURM_LOCALID": "0", "SLURM_JOB_CPUS_PER_NODE": "4(x4)",
    "SLURM_GTIDS": "0", "SLURM_JOB_NUM_NODES": "4",
}

#: A PMIx launch (PMIX_RANK only) with the sizes supplied by hand.
PMIX = {"PMIX_RANK": "2", "PMIX_NAMESPACE": "prterun-host-1234@1", "PMIX_ID": "prterun-host-1234@1.2",
        "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4"}


def layout(env) -> tuple[int, int, int, int, int, int]:
    return env.rank, env.world_size, env.local_rank, env.local_world_size, env.node_rank, env.num_nodes


def rejected(env) -> dict[str, str]:
    return {a.name: a.reason for a in env.rejected}


# --- detectors ---------------------------------------------------------------------------------------------------

def test_detection_order_is_data():
    assert [name for name, _ in DETECTORS] == [
        "torchrun", "openmpi", "flux", "jsrun", "pals", "hydra", "pmix", "slurm", "node", "env"]


def test_torchrun_recorded():
    env = detect_launch_env(TORCHRUN)
    assert env.launcher == "torchrun" and layout(env) == (1, 2, 1, 2, 0, 1)
    assert (env.master_addr, env.master_port) == ("localhost", 36125)
    assert env.sources["node_rank"] == "GROUP_RANK" and env.sources["num_nodes"] == "GROUP_WORLD_SIZE"
    assert env.sources["master_port"] == "MASTER_PORT" and env.job_id == TORCHRUN["TORCHELASTIC_RUN_ID"]
    assert "agrees" in rejected(env)["env"]  # RANK/WORLD_SIZE are there too, and say the same


def test_torchrun_multi_node_from_group_rank():
    env = detect_launch_env({**TORCHRUN, "RANK": "13", "WORLD_SIZE": "16", "LOCAL_RANK": "5",
                             "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2",
                             "MASTER_ADDR": "node0"})
    assert layout(env) == (13, 16, 5, 8, 1, 2) and env.master_addr == "node0"


def test_torchrun_marker_without_its_variables_is_not_torchrun():
    env = detect_launch_env({"TORCHELASTIC_RUN_ID": "abc"})
    assert env.launcher == "single"
    assert "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE not" in rejected(env)["torchrun"]


def test_env_by_hand_assumes_one_node_and_says_so():
    env = detect_launch_env({"RANK": "1", "WORLD_SIZE": "3", "MASTER_PORT": "29511"})
    assert env.launcher == "env" and layout(env) == (1, 3, 1, 3, 0, 1)
    assert env.sources["local_world_size"].startswith("assumed")
    assert (env.master_addr, env.master_port) == ("127.0.0.1", 29511)


def test_env_with_local_sizes_derives_node_rank():
    env = detect_launch_env({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
                             "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234"})
    assert layout(env) == (5, 8, 1, 4, 1, 2)
    assert env.sources["node_rank"].startswith("derived: rank // local_world_size")


def test_openmpi_recorded():
    env = detect_launch_env(OPENMPI)
    assert env.launcher == "openmpi" and layout(env) == (1, 2, 1, 2, 0, 1)
    assert env.sources["rank"] == "OMPI_COMM_WORLD_RANK"
    assert env.sources["num_nodes"].startswith("derived: ceil(world_size / local_world_size)")
    assert env.master_addr == "127.0.0.1" and PORT_RANGE[0] <= env.master_port <= PORT_RANGE[1]
    assert env.master_port == derive_port("OMPI_MCA_ess_base_jobid=2033451009")
    assert env.job_id == "2033451009" and env.sources["job_id"] == "OMPI_MCA_ess_base_jobid"
    assert "no job size" in rejected(env)["pmix"]  # Open MPI exports PMIX_RANK too


def test_openmpi_under_slurm_ignores_leaked_slurm_variables():
    # mpirun's remote daemons are started by srun; their SLURM_* leak into the ranks.
    leaked = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1",
              "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "n[2-3]",
              "SLURM_STEP_TASKS_PER_NODE": "1(x2)", "SLURM_JOB_NODELIST": "n[1-3]"}
    env = detect_launch_env({**OPENMPI, **leaked, "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "6",
                             "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
                             "OMPI_MCA_orte_num_nodes": "3"})
    assert env.launcher == "openmpi" and layout(env) == (3, 6, 1, 2, 1, 3)
    assert env.master_addr == "n1" and env.sources["master_addr"] == "derived: first host of SLURM_JOB_NODELIST"
    assert env.master_port == derive_port("OMPI_MCA_ess_base_jobid=2033451009")
    assert "DISAGREES" in rejected(env)["slurm"]


def test_pals_recorded(tmp_path):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("x4102c5s0b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov\nx4102c5s1b0n0.hostmgmt2102.cm.aurora."
                        "alcf.anl.gov\n")
    env = detect_launch_env({**PALS, "PBS_NODEFILE": str(nodefile)})
    assert env.launcher == "pals" and layout(env) == (17, 24, 5, 12, 1, 2)
    assert env.sources["node_rank"] == "PALS_NODEID" and env.sources["world_size"] == "PMI_SIZE"
    assert env.master_addr == "x4102c5s0b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov"
    assert env.hosts == tuple(nodefile.read_text().split()) and env.sources["hosts"] == "PBS_NODEFILE"
    assert env.master_port == derive_port(f"PALS_APID={PALS['PALS_APID']}")
    assert "also present (rank 17 of 24, agrees)" in rejected(env)["hydra"]


def test_pals_accepts_pals_local_size():
    env = detect_launch_env({k: v for k, v in PALS.items() if k != "PMI_LOCAL_SIZE"}
                            | {"PALS_LOCAL_SIZE": "12", "MASTER_ADDR": "x1"})
    assert env.sources["local_world_size"] == "PALS_LOCAL_SIZE" and env.local_world_size == 12


def test_hydra_recorded():
    env = detect_launch_env({**HYDRA, "MASTER_ADDR": "host0"})
    assert env.launcher == "hydra" and layout(env) == (6, 8, 2, 4, 1, 2)
    assert env.sources["local_rank"] == "MPI_LOCALRANKID"
    assert env.master_port is None and env.exchange == "pmi"  # rank 0 publishes the port it binds, over PMI_FD
    assert "published by rank 0" in env.sources["master_port"] and "PMI_FD" in env.sources["master_port"]


def test_hydra_across_nodes_without_host_list_takes_rank_zeros_published_host():
    env = detect_launch_env(HYDRA)
    assert env.master_addr is None and "host name" in env.sources["master_addr"]


def test_hydra_without_pmi_or_master_port_refuses_naming_master_port():
    with pytest.raises(LaunchEnvError, match="MASTER_PORT"):
        detect_launch_env({k: v for k, v in HYDRA.items() if k != "PMI_FD"} | {"MASTER_ADDR": "h0"})


@pytest.mark.parametrize("published", ["None", "h0:None", ":29500", "h0:0"])
def test_a_degenerate_port_exchange_is_refused_where_it_happens(monkeypatch, published):
    """The original ezpz's #211 (v0.26.0): a broadcast MASTER_PORT that came back None reached torch as 'None'.
    Here Hydra ranks read rank 0's host:port over PMI; a value that is no host:port is refused at the exchange."""
    from ezpz.errors import RendezvousError
    from ezpz.launch_env import pmi, pmi_release, store

    class Client:  # what the process manager answers: a key some other writer left degenerate
        def init(self) -> None: ...
        def kvsname(self) -> str: return "kvs_1"
        def barrier(self) -> None: ...
        def get(self, kvs: str, key: str) -> str: return published
        def put(self, kvs: str, key: str, value: str) -> None: ...
        def close(self) -> None: ...

    monkeypatch.setattr(pmi.PmiClient, "connect", classmethod(lambda cls, *a, **k: Client()))
    monkeypatch.setattr(pmi_release, "release_at_exit", lambda *a, **k: None)
    monkeypatch.setattr(store, "_pmi_rendezvous", {})
    launch = detect_launch_env({**HYDRA, "MASTER_ADDR": "h0"})
    assert launch.exchange == "pmi" and launch.rank == 6
    with pytest.raises(RendezvousError, match="not host:port"):
        store.Rendezvous(launch, 5.0, {**HYDRA, "MASTER_ADDR": "h0"})._pmi_exchange()


def test_job_wide_ids_are_no_launch_identity():
    """Two mpiexec in one allocation share SLURM_JOB_ID/PBS_JOBID: deriving a port from them lets them cross-join."""
    for job_wide in ({"SLURM_JOB_ID": "77"}, {"PBS_JOBID": "77.pbs"}):
        with pytest.raises(LaunchEnvError, match="MASTER_PORT"):
            detect_launch_env({"RANK": "0", "WORLD_SIZE": "2"} | job_wide)


def test_hydra_port_mode_is_explained():
    env = detect_launch_env({"PMI_ID": "0", "PMI_PORT": "host:1234"})
    assert env.launcher == "single" and "PMI-port mode" in rejected(env)["hydra"]


def test_pmix_with_sizes_by_hand():
    env = detect_launch_env(PMIX)
    assert env.launcher == "pmix" and layout(env) == (2, 4, 2, 4, 0, 1)
    assert env.master_port == derive_port("PMIX_NAMESPACE=prterun-host-1234@1")


def test_pmix_rank_without_size_is_an_error_that_says_why():
    with pytest.raises(LaunchEnvError) as err:
        detect_launch_env({"PMIX_RANK": "3", "PMIX_NAMESPACE": "x"})
    assert err.value.name == "PMIX_RANK" and "no job size" in str(err.value)


def test_slurm_step_recorded():
    env = detect_launch_env(SLURM_STEP)
    assert env.launcher == "slurm" and layout(env) == (5, 7, 0, 2, 2, 3)
    assert env.sources["local_world_size"] == "SLURM_STEP_TASKS_PER_NODE[SLURM_NODEID]"
    assert env.master_addr == "gnode10" and env.hosts == ("gnode10", "gnode20", "gnode25")
    assert env.job_id == "200505.0" and env.master_port == derive_port("SLURM_JOB_ID.SLURM_STEP_ID=200505.0")


def test_slurm_batch_script_is_one_process_and_says_why():
    env = detect_launch_env(SLURM_BATCH)
    assert env.launcher == "single" and layout(env) == (0, 1, 0, 1, 0, 1)
    why = rejected(env)["slurm"]
    assert "SLURM_STEP_NUM_TASKS is not" in why and "batch script" in why and "SLURM_NTASKS=4" in why
    assert "batch script" in env.reason and env.master_addr is None and env.job_id == "200505"


def test_single_process():
    env = detect_launch_env({"HOME": "/root"})
    assert env.launcher == "single" and not env.distributed and env.master_port is None
    assert set(rejected(env)) == {name for name, _ in DETECTORS}
    assert rejected(env)["openmpi"] == "OMPI_COMM_WORLD_SIZE not set"
    assert env.sources["rank"] == "default: single process"


def test_chosen_launcher_lists_single_as_not_used():
    assert "openmpi describes this process" in rejected(detect_launch_env(OPENMPI))["single"]


def test_blank_values_count_as_unset():
    assert detect_launch_env({"RANK": "", "WORLD_SIZE": " "}).launcher == "single"


# --- named errors ------------------------------------------------------------------------------------------------

MULTI = {"MASTER_ADDR": "node0", "MASTER_PORT": "29500"}

BAD = [
    ({"RANK": "abc", "WORLD_SIZE": "2"}, "RANK", "abc"),
    ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK", "-1"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK", "2"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE", "0"),
    ({"RANK": "0", "WORLD_SIZE": "2.0"}, "WORLD_SIZE", "2.0"),
    ({"RANK": "0", "WORLD_SIZE": "99999999999999"}, "WORLD_SIZE", "99999999999999"),
    ({"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "4", "LOCAL_WORLD_SIZE": "4"}, "LOCAL_RANK", "4"),
    ({"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8"}, "LOCAL_WORLD_SIZE", "8"),
    ({**TORCHRUN, "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "1"}, "GROUP_RANK", "1"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT", "70000"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "http"}, "MASTER_PORT", "http"),
    ({"RANK": "1", "WORLD_SIZE": "2", "MASTER_PORT": "None"}, "MASTER_PORT", "None"),  # str(None): the original's #211
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "0"}, "MASTER_PORT", "0"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "node 0"}, "MASTER_ADDR", "node 0"),
    ({**OPENMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "x"}, "OMPI_COMM_WORLD_LOCAL_SIZE", "x"),
    ({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "0"}, "LOCAL_WORLD_SIZE", "None"),
    ({"GROUP_RANK": "1", "TORCHELASTIC_RUN_ID": "x"}, "GROUP_RANK", "1"),
    ({**PALS, **MULTI, "PALS_NODEID": "24"}, "PALS_NODEID", "24"),
    ({**PALS, **MULTI, "PALS_NODEID": "13"}, "PMI_LOCAL_SIZE", "12"),
    ({**PALS, **MULTI, "PMI_SIZE": "0"}, "PMI_SIZE", "0"),
    ({**HYDRA, **MULTI, "MPI_LOCALRANKID": "٣"}, "MPI_LOCALRANKID", "٣"),
    ({**SLURM_STEP, "SLURM_STEP_TASKS_PER_NODE": "3,2(x)"}, "SLURM_STEP_TASKS_PER_NODE", "3,2(x)"),
    ({**SLURM_STEP, "SLURM_STEP_TASKS_PER_NODE": "3,3(x2)"}, "SLURM_STEP_TASKS_PER_NODE", "3,3(x2)"),
    ({**SLURM_STEP, "SLURM_STEP_TASKS_PER_NODE": "5,2"}, "SLURM_STEP_TASKS_PER_NODE", "5,2"),
    ({**SLURM_STEP, "SLURM_NODEID": "3"}, "SLURM_NODEID", "3"),
    ({**SLURM_STEP, "SLURM_LOCALID": "2"}, "SLURM_LOCALID", "2"),
    ({**SLURM_STEP, "SLURM_STEP_NODELIST": "gnode[10-"}, "SLURM_STEP_NODELIST", "gnode[10-"),
    ({"RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}, "MASTER_ADDR", "None"),
    ({"WORLD_SIZE": "4"}, "WORLD_SIZE", "4"),
    ({"OMPI_COMM_WORLD_RANK": "1"}, "OMPI_COMM_WORLD_RANK", "1"),
]


@pytest.mark.parametrize(("environ", "name", "value"), BAD, ids=[f"{n}={v}" for _, n, v in BAD])
def test_bad_values_name_the_variable_and_value(environ, name, value):
    with pytest.raises(LaunchEnvError) as err:
        detect_launch_env(environ)
    assert err.value.name == name
    assert str(err.value.value) == value
    assert name in str(err.value) and value in str(err.value) and "Fix:" in str(err.value)
    assert err.value.expected and err.value.fix


def test_missing_hostfile_is_named(tmp_path):
    env = {**PALS, "PBS_NODEFILE": str(tmp_path / "gone")}
    with pytest.raises(LaunchEnvError) as err:
        detect_launch_env(env)
    assert err.value.name == "PBS_NODEFILE" and "MASTER_ADDR" in err.value.fix


def test_multi_node_without_address_says_what_to_set():
    with pytest.raises(LaunchEnvError) as err:
        detect_launch_env({**PALS, "PBS_JOBID": "1"} | {"MASTER_PORT": "29511"})
    assert err.value.name == "MASTER_ADDR" and "PBS_NODEFILE" in err.value.expected
    assert "export MASTER_ADDR" in err.value.fix


def test_inconsistent_shadowed_launcher_does_not_stop_the_chosen_one():
    env = detect_launch_env({**TORCHRUN, "SLURM_STEP_NUM_TASKS": "x", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
                             "SLURM_NODEID": "0"})
    assert env.launcher == "torchrun" and "inconsistent" in rejected(env)["slurm"]


# --- rendezvous --------------------------------------------------------------------------------------------------

def test_given_master_addr_and_port_win():
    env = detect_launch_env({**SLURM_STEP, "MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "40000"})
    assert (env.master_addr, env.master_port) == ("10.1.2.3", 40000)
    assert env.sources["master_addr"] == "MASTER_ADDR" and env.sources["master_port"] == "MASTER_PORT"
    assert env.hosts == ()


def test_derived_port_is_stable_and_in_range():
    ports = {derive_port(f"PBS_JOBID={n}.pbs") for n in range(500)}
    assert all(PORT_RANGE[0] <= p <= PORT_RANGE[1] for p in ports) and len(ports) > 400
    # a fixed value, so a change of hash (and mismatched ranks across versions) is noticed
    assert derive_port("SLURM_JOB_ID.SLURM_STEP_ID=200505.0") == derive_port("SLURM_JOB_ID.SLURM_STEP_ID=200505.0")
    code = "from ezpz.launch_env import derive_port; print(derive_port('PALS_APID=abc'))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env=clean_env(PYTHONHASHSEED="123"))
    assert int(other.stdout) == derive_port("PALS_APID=abc")


def test_same_job_same_rendezvous_on_every_rank():
    seen = set()
    for rank, (node, local) in enumerate([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1)]):
        env = detect_launch_env({**SLURM_STEP, "SLURM_PROCID": str(rank), "SLURM_NODEID": str(node),
                                 "SLURM_LOCALID": str(local)})
        seen.add((env.master_addr, env.master_port))
    assert len(seen) == 1


def test_single_node_uses_loopback_even_with_a_node_list():
    env = detect_launch_env({**SLURM_STEP, "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NUM_NODES": "1",
                             "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_PROCID": "1", "SLURM_LOCALID": "1",
                             "SLURM_NODEID": "0"})
    assert env.master_addr == "127.0.0.1" and "one node" in env.sources["master_addr"]


def test_no_identity_and_no_master_port_refuses():
    with pytest.raises(LaunchEnvError, match="MASTER_PORT=None"):
        detect_launch_env({"RANK": "0", "WORLD_SIZE": "2"})


def test_pbs_hostfile_for_hydra(tmp_path):
    nodefile = tmp_path / "aux"
    nodefile.write_text("x3001c0s1b0n0\nx3001c0s1b0n0\nx3001c0s7b1n0\nx3001c0s7b1n0\n")
    env = detect_launch_env({**HYDRA, "PBS_NODEFILE": str(nodefile), "PBS_JOBID": "42.polaris-pbs-01"})
    assert env.master_addr == "x3001c0s1b0n0" and env.hosts == ("x3001c0s1b0n0", "x3001c0s7b1n0")
    # PBS_JOBID is shared by every mpiexec in the job: the port comes from rank 0 over PMI, not from its hash
    assert env.job_id == "42.polaris-pbs-01" and env.master_port is None and env.exchange == "pmi"


def test_openmpi_default_hostfile_variable(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# cluster\nnodeA slots=2\nnodeB slots=2\n")
    env = detect_launch_env({**OPENMPI, "OMPI_COMM_WORLD_SIZE": "4", "OMPI_MCA_orte_num_nodes": "2",
                             "OMPI_MCA_orte_default_hostfile": str(hostfile)})
    assert env.master_addr == "nodeA" and env.node_rank == 0


# --- host lists --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "hosts"), [
    ("nid[001-004,007]", ["nid001", "nid002", "nid003", "nid004", "nid007"]),
    ("a[1-2],b3", ["a1", "a2", "b3"]),
    ("node[8-11]", ["node8", "node9", "node10", "node11"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
    ("x1000c0s0b0n0,x1000c0s0b0n0", ["x1000c0s0b0n0"]),
    ("gpu[3]", ["gpu3"]),
    (" solo ", ["solo"]),
])
def test_expand_nodelist(text, hosts):
    assert expand_nodelist(text) == hosts


@pytest.mark.parametrize("text", ["", "n[1-", "n]1[", "n[2-1]", "n[a-b]", "n[1-2]],x", "a,,b", "n[[1]]",
                                  "n[0-99999999999]", "a b"])
def test_expand_nodelist_rejects_malformed(text):
    with pytest.raises(ValueError):
        expand_nodelist(text)


def test_read_hostfile_formats(tmp_path):
    path = tmp_path / "hf"
    path.write_text("# comment\n\nhostA:4\nhostB slots=8 max_slots=8\nhostA\nfe80::1\n  hostC # trailing\n")
    assert read_hostfile(path) == ["hostA", "hostB", "fe80::1", "hostC"]


# --- a real launcher ---------------------------------------------------------------------------------------------

_PROBE = """
import json, os, sys
from ezpz.launch_env import detect_launch_env
e = detect_launch_env(os.environ)
row = {k: getattr(e, k) for k in ("launcher", "rank", "world_size", "local_rank", "local_world_size", "node_rank",
                                  "num_nodes", "master_addr", "master_port")}
with open(os.path.join(sys.argv[1], f"{os.getpid()}.json"), "w") as fh:
    json.dump(row, fh)
"""


@pytest.mark.launcher
def test_real_openmpi_mpiexec_three_ranks(tmp_path):
    mpiexec = need_tool("mpiexec")
    proc = subprocess.run([mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", "3", sys.executable, "-c", _PROBE,
                           str(tmp_path)], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = sorted((json.loads(p.read_text()) for p in tmp_path.glob("*.json")), key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == [0, 1, 2]
    assert {r["launcher"] for r in rows} == {"openmpi"} and {r["world_size"] for r in rows} == {3}
    assert sorted(r["local_rank"] for r in rows) == [0, 1, 2]
    assert {(r["local_world_size"], r["node_rank"], r["num_nodes"]) for r in rows} == {(3, 0, 1)}
    assert len({(r["master_addr"], r["master_port"]) for r in rows}) == 1
    assert rows[0]["master_addr"] == "127.0.0.1" and PORT_RANGE[0] <= rows[0]["master_port"] <= PORT_RANGE[1]
