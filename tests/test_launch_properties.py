"""Property tests: any environment gives a consistent layout or a LaunchEnvError; real layouts round-trip."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ezpz.errors import LaunchEnvError
from ezpz.facts import LaunchEnv
from ezpz.launch_env import detect_launch_env, expand_nodelist
from ezpz.launch_env.rendezvous import DEFAULT_PORT, PORT_RANGE

pytestmark = pytest.mark.one_torch  # launch plumbing: launch environment properties: runs on the pinned torch only (docs/ci.md)

NAMES = {
    "torchrun": ["TORCHELASTIC_RUN_ID", "GROUP_RANK", "GROUP_WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                 "LOCAL_WORLD_SIZE"],
    "openmpi": ["OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_num_nodes", "OMPI_MCA_ess_base_jobid", "PMIX_RANK"],
    "pals": ["PALS_RANKID", "PALS_LOCAL_RANKID", "PALS_NODEID", "PALS_LOCAL_SIZE", "PALS_APID", "PMI_SIZE",
             "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE", "PMI_RANK"],
    "hydra": ["PMI_RANK", "PMI_SIZE", "PMI_ID", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_LOCAL_RANK"],
    "pmix": ["PMIX_RANK", "PMIX_NAMESPACE", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"],
    "slurm": ["SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS",
              "SLURM_NNODES", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_NODES", "SLURM_STEP_TASKS_PER_NODE",
              "SLURM_TASKS_PER_NODE"],
    "rendezvous": ["MASTER_ADDR", "MASTER_PORT", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
                   "PBS_JOBID", "PBS_NODEFILE", "HOSTFILE", "OMPI_MCA_orte_default_hostfile"],
}
ALL_NAMES = sorted({n for names in NAMES.values() for n in names})
HOSTFILE_VARS = {"PBS_NODEFILE", "HOSTFILE", "OMPI_MCA_orte_default_hostfile"}

GARBAGE = st.sampled_from(["", " ", "-1", "+2", " 3 ", "0x10", "1e3", "2.0", "٣", "abc", "70000", "65536",
                           "99999999999999999999", "nid[001-004]", "a[1-2],b3", "2(x3),1", "1(x0)", "n[2-1]", "[",
                           "h 1", "4(x2", "0", "localhost"])
SMALL = st.integers(-1, 9).map(str)
VALUES = st.one_of(SMALL, SMALL, SMALL, GARBAGE, st.text(max_size=6))


@pytest.fixture(scope="module")
def hostfiles(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("hostfiles")
    good = root / "nodes"
    good.write_text("n0\nn0\nn1\n")
    empty = root / "empty"
    empty.write_text("# nothing\n")
    return [str(good), str(empty), str(root / "missing"), str(root)]


def check_consistent(env: LaunchEnv) -> None:
    assert 0 <= env.rank < env.world_size
    assert 0 <= env.local_rank < env.local_world_size <= env.world_size
    assert 0 <= env.node_rank < env.num_nodes <= env.world_size
    if env.world_size > 1 and env.exchange == "pmi":  # rank 0 publishes host:port through the process manager
        assert env.master_port is None and "published by rank 0" in env.sources["master_port"]
        assert env.master_addr is None or not any(ch.isspace() for ch in env.master_addr)
    elif env.world_size > 1:
        assert env.master_addr and not any(ch.isspace() for ch in env.master_addr)
        assert env.master_port is not None and 1 <= env.master_port <= 65535
    else:
        assert env.master_addr is None and env.master_port is None
    for field in ("rank", "world_size", "local_rank", "local_world_size", "node_rank", "num_nodes"):
        assert env.sources[field]


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(data=st.data())
def test_any_environment_gives_a_consistent_layout_or_a_named_error(data, hostfiles):
    family = data.draw(st.sampled_from(sorted(NAMES)), label="family")
    keys = st.sampled_from(NAMES[family] + NAMES["rendezvous"]) if data.draw(st.booleans()) else \
        st.sampled_from(ALL_NAMES)
    environ = data.draw(st.dictionaries(keys, VALUES, max_size=14), label="environ")
    for name in HOSTFILE_VARS & set(environ):
        environ[name] = data.draw(st.sampled_from(hostfiles))
    try:
        env = detect_launch_env(environ)
    except LaunchEnvError as err:
        assert err.name and err.expected and err.fix
        assert err.name in str(err)
        return
    check_consistent(env)


# --- consistent layouts round-trip ---------------------------------------------------------------------------------

def compress(counts: list[int]) -> str:
    """[2, 2, 2, 1] -> "2(x3),1" (Slurm's SLURM_TASKS_PER_NODE form)."""
    out: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        out.append(f"{counts[i]}(x{j - i})" if j - i > 1 else str(counts[i]))
        i = j
    return ",".join(out)


def ranks_of(counts: list[int]) -> list[tuple[int, int, int]]:
    """(rank, node, local) for every rank, placed in blocks."""
    return [(sum(counts[:node]) + local, node, local) for node, n in enumerate(counts) for local in range(n)]


def build_env(launcher: str, counts: list[int], rank: int, node: int, local: int) -> dict[str, str]:
    world, nodes, lworld = sum(counts), len(counts), counts[node]
    hosts = f"n[00-{nodes - 1:02d}]" if nodes > 1 else "n00"
    s = str
    if launcher == "torchrun":
        return {"TORCHELASTIC_RUN_ID": "job", "RANK": s(rank), "WORLD_SIZE": s(world), "LOCAL_RANK": s(local),
                "LOCAL_WORLD_SIZE": s(lworld), "GROUP_RANK": s(node), "GROUP_WORLD_SIZE": s(nodes),
                "MASTER_ADDR": "n00", "MASTER_PORT": "29400"}
    if launcher == "env":
        return {"RANK": s(rank), "WORLD_SIZE": s(world), "LOCAL_RANK": s(local), "LOCAL_WORLD_SIZE": s(lworld),
                "MASTER_ADDR": "n00", "MASTER_PORT": "29500"}
    if launcher == "openmpi":
        return {"OMPI_COMM_WORLD_RANK": s(rank), "OMPI_COMM_WORLD_SIZE": s(world),
                "OMPI_COMM_WORLD_LOCAL_RANK": s(local), "OMPI_COMM_WORLD_LOCAL_SIZE": s(lworld),
                "OMPI_MCA_orte_num_nodes": s(nodes), "OMPI_MCA_ess_base_jobid": "777", "PMIX_RANK": s(rank),
                "SLURM_JOB_NODELIST": hosts}
    if launcher == "pals":
        return {"PALS_RANKID": s(rank), "PALS_LOCAL_RANKID": s(local), "PALS_NODEID": s(node), "PALS_APID": "ap",
                "PMI_RANK": s(rank), "PMI_SIZE": s(world), "PMI_LOCAL_RANK": s(local), "PMI_LOCAL_SIZE": s(lworld),
                "MASTER_ADDR": "n00"}
    if launcher == "hydra":
        return {"PMI_RANK": s(rank), "PMI_SIZE": s(world), "MPI_LOCALRANKID": s(local),
                "MPI_LOCALNRANKS": s(lworld), "SLURM_JOB_NODELIST": hosts, "SLURM_JOB_ID": "9", "PMI_FD": "7"}
    if launcher == "pmix":
        return {"PMIX_RANK": s(rank), "PMIX_NAMESPACE": "ns", "WORLD_SIZE": s(world), "LOCAL_RANK": s(local),
                "LOCAL_WORLD_SIZE": s(lworld), "MASTER_ADDR": "n00"}
    assert launcher == "slurm"
    return {"SLURM_JOB_ID": "55", "SLURM_STEP_ID": "1", "SLURM_PROCID": s(rank), "SLURM_LOCALID": s(local),
            "SLURM_NODEID": s(node), "SLURM_STEP_NUM_TASKS": s(world), "SLURM_STEP_NUM_NODES": s(nodes),
            "SLURM_STEP_TASKS_PER_NODE": compress(counts), "SLURM_STEP_NODELIST": hosts}


UNIFORM = st.builds(lambda nodes, ppn: [ppn] * nodes, st.integers(1, 5), st.integers(1, 6))
ANY_SPLIT = st.lists(st.integers(1, 6), min_size=1, max_size=6)


def roundtrip(launcher: str, counts: list[int]) -> None:
    rendezvous = set()
    for rank, node, local in ranks_of(counts):
        env = detect_launch_env(build_env(launcher, counts, rank, node, local))
        assert env.launcher == launcher
        assert (env.rank, env.world_size, env.local_rank, env.local_world_size, env.node_rank, env.num_nodes) == \
            (rank, sum(counts), local, counts[node], node, len(counts))
        check_consistent(env)
        rendezvous.add((env.master_addr, env.master_port))
    assert len(rendezvous) == 1  # every rank agrees
    addr, port = rendezvous.pop()
    if sum(counts) == 1:
        assert (addr, port) == (None, None)
        return
    given_addr = "MASTER_ADDR" in build_env(launcher, counts, 0, 0, 0)
    assert addr == ("n00" if given_addr or len(counts) > 1 else "127.0.0.1")
    if launcher == "hydra":  # rank 0 binds a free port at setup and publishes it through PMI
        assert port is None
        return
    assert port == {"torchrun": 29400, "env": DEFAULT_PORT}.get(launcher, port)
    assert PORT_RANGE[0] <= port <= PORT_RANGE[1] or launcher in ("torchrun", "env")


@settings(max_examples=60, deadline=None)
@given(launcher=st.sampled_from(["torchrun", "env", "openmpi", "pals", "hydra", "pmix", "slurm"]), counts=UNIFORM)
def test_uniform_layouts_round_trip_for_every_launcher(launcher, counts):
    roundtrip(launcher, counts)


@settings(max_examples=60, deadline=None)
@given(counts=ANY_SPLIT)
def test_slurm_uneven_layouts_round_trip(counts):
    roundtrip("slurm", counts)


@settings(max_examples=400, deadline=None)
@given(data=st.data(), launcher=st.sampled_from(["torchrun", "env", "openmpi", "pals", "hydra", "pmix", "slurm"]),
       counts=ANY_SPLIT)
def test_perturbed_launcher_environments_stay_consistent_or_raise_named_errors(data, launcher, counts):
    """A real layout with some variables dropped, changed to other values or garbage, or added."""
    rank, node, local = data.draw(st.sampled_from(ranks_of(counts)), label="rank")
    environ = build_env(launcher, counts, rank, node, local)
    for name in data.draw(st.lists(st.sampled_from(sorted(environ)), max_size=3, unique=True), label="changed"):
        if data.draw(st.booleans()):
            del environ[name]
        else:
            environ[name] = data.draw(VALUES, label=name)
    environ.update(data.draw(st.dictionaries(st.sampled_from(ALL_NAMES), VALUES, max_size=2), label="added"))
    for name in HOSTFILE_VARS & set(environ):
        environ[name] = "/nonexistent/hostfile"
    try:
        env = detect_launch_env(environ)
    except LaunchEnvError as err:
        assert err.name and err.name in str(err) and err.fix
        return
    check_consistent(env)


def test_hydra_without_pmi_connection_or_master_port_refuses():
    with pytest.raises(LaunchEnvError, match="MASTER_PORT"):
        detect_launch_env({"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2"})


# --- host lists ----------------------------------------------------------------------------------------------------

@st.composite
def nodelists(draw):
    """A Slurm node list and its expansion."""
    items, expected = [], []
    for _ in range(draw(st.integers(1, 3))):
        prefix = draw(st.text("abcxyz-", min_size=1, max_size=4))
        if draw(st.booleans()):
            items.append(prefix)
            expected.append(prefix)
            continue
        width = draw(st.integers(1, 3))
        parts, names = [], []
        for _ in range(draw(st.integers(1, 3))):
            lo = draw(st.integers(0, 10 ** width - 1))
            hi = draw(st.integers(lo, min(lo + 5, 10 ** width - 1)))
            parts.append(f"{lo:0{width}d}-{hi:0{width}d}" if hi > lo else f"{lo:0{width}d}")
            names += [f"{prefix}{n:0{width}d}" for n in range(lo, hi + 1)]
        items.append(f"{prefix}[{','.join(parts)}]")
        expected += names
    return ",".join(items), list(dict.fromkeys(expected))


@given(nodelists())
def test_expand_nodelist_matches_a_plain_expansion(case):
    text, expected = case
    assert expand_nodelist(text) == expected


@given(st.text(alphabet="ab01-[],x( )", max_size=20))
def test_expand_nodelist_only_raises_value_error(text):
    try:
        hosts = expand_nodelist(text)
    except ValueError:
        return
    assert hosts and all(h and "[" not in h and "," not in h for h in hosts)


def test_hostfile_fixture_is_used(hostfiles):
    assert Path(hostfiles[0]).read_text().startswith("n0")
