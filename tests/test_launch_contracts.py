"""Every scheduler's launch contract, from recorded environments: the layout, the rendezvous and `ezpz launch`.

Each fixture in ``tests/fixtures/launch_envs/`` is one process's environment
(and the files its variables name), the scheduler's sources, the ground truth
those sources document, and what ``ezpz launch --dry-run`` must print there.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from conftest import clean_env
from ezpz.errors import LaunchEnvError
from ezpz.launch_env import detect_launch_env
from ezpz.launch_env.rendezvous import PORT_RANGE
from test_cli_support import ezpz, path_without

pytestmark = pytest.mark.one_torch  # launch plumbing: launch environments: runs on the pinned torch only (docs/ci.md)

FIXTURES = Path(__file__).parent / "fixtures" / "launch_envs"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))
FIELDS = ("launcher", "rank", "world_size", "local_rank", "local_world_size", "node_rank", "num_nodes", "master_addr",
          "master_port", "exchange")


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def with_files(environ: dict[str, str], files: dict[str, str], where: Path) -> dict[str, str]:
    """``environ`` plus each named file written under ``where`` and its variable pointing at it."""
    out = dict(environ)
    for var, text in files.items():
        path = where / var.lower()
        path.write_text(text)
        out[var] = str(path)
    return out


def resolve(fixture: dict, tmp_path: Path, **overrides: str):
    environ = with_files({**fixture["environ"], **overrides}, fixture.get("files", {}), tmp_path)
    return detect_launch_env(environ)


def test_every_contract_has_a_fixture():
    launchers = {load(n)["contract"] for n in NAMES}
    assert {"flux", "pals", "jsrun", "kubeflow", "pai", "skypilot", "torchrun"} <= launchers
    assert {"flux_libpals", "pals_no_size", "lsf_jsrun", "kubeflow_pytorchjob_v1", "kubeflow_trainer_v2",
            "kubeflow_trainer_v2_torchrun", "pai_torchrun", "skypilot", "tpu_vm_torchrun"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_cites_its_sources(name):
    fixture = load(name)
    assert fixture["sources"] and all(len(s) > 20 for s in fixture["sources"]), "each rule names where it comes from"
    assert fixture["recorded"]


@pytest.mark.parametrize("name", NAMES)
def test_contract_resolves_to_the_documented_layout(name, tmp_path):
    fixture = load(name)
    env = resolve(fixture, tmp_path)
    want = fixture["expected"]
    got = {f: getattr(env, f) for f in FIELDS}
    if want["master_port"] == "derived":  # a hash of the launch's identity: in range, and the same on rank 0
        assert PORT_RANGE[0] <= got["master_port"] <= PORT_RANGE[1]
        assert env.sources["master_port"].startswith("derived: hash of")
        rank0 = resolve(fixture, tmp_path, **fixture["rank0"])
        assert (rank0.rank, rank0.master_addr, rank0.master_port) == (0, got["master_addr"], got["master_port"])
        got["master_port"] = "derived"
    assert got == want
    for field, source in fixture.get("expected_sources", {}).items():
        assert env.sources[field] == source
    for rejected, words in fixture.get("expected_rejected", {}).items():
        assert words in {a.name: a.reason for a in env.rejected}[rejected]


def test_lsf_jsrun_is_rank_5_of_12(tmp_path):
    """The issue's case: every jsrun task trained alone as rank 0 of 1."""
    env = resolve(load("lsf_jsrun"), tmp_path)
    assert (env.launcher, env.rank, env.world_size) == ("jsrun", 5, 12)
    assert env.sources["rank"] == "JSM_NAMESPACE_RANK" and env.sources["world_size"] == "JSM_NAMESPACE_SIZE"


def test_flux_wins_over_its_partial_pals_set(tmp_path):
    """libpals sets PALS_RANKID/PALS_NODEID but unsets PALS_LOCAL_RANKID: the PALS detector alone cannot place it."""
    fixture = load("flux_libpals")
    env = resolve(fixture, tmp_path)
    assert env.launcher == "flux"
    assert "shadowed" not in env.reason
    without_flux = {k: v for k, v in fixture["environ"].items() if not k.startswith("FLUX_")}
    with pytest.raises(LaunchEnvError):  # PALS_RANKID=5 with no complete launcher set: an error, never rank 0 of 1
        detect_launch_env(without_flux)


def test_an_mpiexec_inside_a_flux_task_is_not_flux(tmp_path):
    """Hydra's PMI_RANK/PMI_SIZE over the Flux task's: the inner launcher describes the process."""
    environ = {**load("flux")["environ"], "PMI_RANK": "6", "PMI_SIZE": "8", "MPI_LOCALRANKID": "2",
               "MPI_LOCALNRANKS": "4", "MASTER_ADDR": "tuo1001", "MASTER_PORT": "29400"}
    environ.update(FLUX_TASK_RANK="0", FLUX_TASK_LOCAL_ID="0", FLUX_JOB_SIZE="1", FLUX_JOB_NNODES="1")
    env = detect_launch_env(environ)
    assert (env.launcher, env.rank, env.world_size) == ("hydra", 6, 8)
    assert "another launcher" in {a.name: a.reason for a in env.rejected}["flux"]


def test_flux_with_uneven_tasks_per_node_is_a_named_error():
    environ = {**load("flux")["environ"], "FLUX_JOB_SIZE": "7", "PMI_SIZE": "7"}
    with pytest.raises(LaunchEnvError, match="FLUX_JOB_SIZE=7.*multiple of FLUX_JOB_NNODES=2"):
        detect_launch_env(environ)


def test_pals_without_a_size_or_node_file_names_pals_size():
    environ = {k: v for k, v in load("pals_no_size")["environ"].items()}
    with pytest.raises(LaunchEnvError, match="PALS_SIZE=None") as info:
        detect_launch_env(environ)
    assert "PBS_NODEFILE" in str(info.value)


def test_pals_size_given_wins_over_the_node_file(tmp_path):
    env = resolve(load("pals_no_size"), tmp_path, PALS_SIZE="24")
    assert (env.world_size, env.sources["world_size"]) == (24, "PALS_SIZE")


@pytest.mark.parametrize("name, variable", [("kubeflow_trainer_v2", "PET_NPROC_PER_NODE"),
                                            ("pai", "NPROC_PER_NODE")])
def test_a_node_entry_point_asked_for_several_processes_is_not_rank_0_of_1(name, variable):
    """Kubeflow/PAI start one process per node; with 4 per node wanted it must start them, not train alone."""
    environ = {**load(name)["environ"], variable: "4"}
    with pytest.raises(LaunchEnvError, match=f"{variable}=4.*ezpz launch"):
        detect_launch_env(environ)


def test_skypilot_node_ips_must_match_the_node_count():
    environ = {**load("skypilot")["environ"], "SKYPILOT_NUM_NODES": "3"}
    with pytest.raises(LaunchEnvError, match="SKYPILOT_NODE_IPS"):
        detect_launch_env(environ)


@pytest.mark.parametrize("environ, name", [
    ({"FLUX_TASK_RANK": "3"}, "FLUX_TASK_RANK"),
    ({"JSM_NAMESPACE_RANK": "5", "JSM_NAMESPACE_SIZE": "12"}, "JSM_NAMESPACE_RANK"),
    ({"SKYPILOT_NODE_RANK": "1"}, "SKYPILOT_NODE_RANK"),
])
def test_partial_scheduler_rank_variables_are_an_error_not_a_single_process(environ, name):
    with pytest.raises(LaunchEnvError, match=name):
        detect_launch_env(environ)


def test_rank_0_of_an_incomplete_set_is_still_single_only_when_nothing_says_several():
    env = detect_launch_env({"FLUX_TASK_RANK": "0", "FLUX_JOB_SIZE": "1"})
    assert env.launcher == "single" and "FLUX_TASK_LOCAL_ID" in {a.name: a.reason for a in env.rejected}["flux"]


# --- ezpz launch --dry-run in each recorded environment ------------------------------------------------------------


def fake_tools(bindir: Path, tools: dict[str, str]) -> Path:
    """Executables that print the recorded output (``mpiexec --version``, ``flux resource list``)."""
    bindir.mkdir(parents=True, exist_ok=True)
    for tool, text in tools.items():
        script = bindir / tool
        quoted = text.replace("'", "'\\''")
        script.write_text(f"#!/bin/sh\nprintf '%s\\n' '{quoted}'\n")  # builtins only: PATH may lack coreutils
        script.chmod(0o755)
    return bindir


LAUNCHES = [n for n in NAMES if "launch" in load(n)]


@pytest.mark.parametrize("name", LAUNCHES)
def test_launch_dry_run_prints_the_schedulers_own_command(name, tmp_path):
    launch = load(name)["launch"]
    environ = with_files(launch["environ"], launch.get("files", {}), tmp_path)
    bindir = fake_tools(tmp_path / "bin", launch.get("tools", {}))
    proc = ezpz("launch", "--dry-run", *launch["args"],
                env=clean_env(**environ, PATH=path_without("flux", "jsrun", "mpiexec", prepend=bindir)))
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    argv = shlex.split(line)
    want = [w.format(**environ, port="{port}") for w in launch["argv"]]
    if "{port}" in want:  # a derived port: its place in the line, a number in range
        at = want.index("{port}")
        assert re.fullmatch(r"\d+", argv[at]) and PORT_RANGE[0] <= int(argv[at]) <= PORT_RANGE[1]
        want[at] = argv[at]
    assert argv == want
    assert not {"-x", "--map-by", "--oversubscribe", "--allow-run-as-root"} & set(argv), "no Open MPI flags"


def test_doctor_names_the_contract_and_its_variables(tmp_path):
    fixture = load("lsf_jsrun")
    environ = with_files(fixture["environ"], fixture["files"], tmp_path)
    proc = ezpz("doctor", env=clean_env(**environ, EZPZ_DEVICE="cpu"))
    assert "launch: jsrun: rank 5/12, local 1/4, node 1/3" in proc.stdout, proc.stdout
    assert "rank: 5 (from JSM_NAMESPACE_RANK)" in proc.stdout
    assert "JSM_NAMESPACE_SIZE=12" in proc.stdout  # the deciding variables are listed


def test_hand_set_rank_variables_in_a_pod_are_not_a_pytorchjob():
    """mp.spawn-style RANK/WORLD_SIZE in a Kubernetes pod: only MASTER_ADDR=<job>-master-0 says PyTorchJob."""
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost",
               "MASTER_PORT": "29500"}
    env = detect_launch_env(environ)
    assert (env.launcher, env.local_rank, env.local_world_size) == ("env", 1, 2)
    assert "not a PyTorchJob master" in {a.name: a.reason for a in env.rejected}["node"]
