"""The original ezpz's scheduler helpers (get_scheduler, ezpz.pbs, ezpz.slurm, ...) under recorded environments.

The environments are the launch-contract fixtures (tests/fixtures/launch_envs/, sources cited there).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ezpz
from ezpz.errors import ConfigError
from ezpz.original import pbs, slurm
from ezpz.original.machines import MACHINES, machine_of
from ezpz.original.scheduler import get_active_jobid, get_nodelist_of_active_job, get_scheduler
from test_launch_contracts import fake_tools, load, with_files


def recorded(name: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    fixture = load(name)
    return with_files({**fixture["environ"], **extra}, fixture.get("files", {}), tmp_path)


@pytest.mark.parametrize("name, scheduler, jobid", [
    ("pals_no_size", "PBS", "1234567"),
    ("slurm_step", "SLURM", "200505"),
    ("flux", "FLUX", "ƒ2VsyBmr2"),
    ("lsf_jsrun", "LSF", "1234567"),
    ("kubeflow_trainer_v2", "KUBEFLOW", None),
    ("pai", "PAI", None),
    ("skypilot", "SKYPILOT", "sky-2026-11-23-21-40-00-123456_mycluster_1"),
])
def test_scheduler_and_job_id(name, scheduler, jobid, tmp_path):
    environ = recorded(name, tmp_path)
    assert get_scheduler(environ=environ) == scheduler
    assert get_active_jobid(environ=environ) == jobid


def test_scheduler_override_and_argument_win(tmp_path):
    environ = recorded("slurm_step", tmp_path, EZPZ_SCHEDULER="pbs")
    assert get_scheduler(environ=environ) == "PBS"
    assert get_scheduler("flux", environ=environ) == "FLUX"


def test_flux_batch_script_is_flux_too():
    """A flux batch script has no FLUX_JOB_ID (flux-core src/broker/runat.c), only FLUX_ENCLOSING_ID and FLUX_URI."""
    launch = load("flux")["launch"]["environ"]
    assert get_scheduler(environ=launch) == "FLUX" and get_active_jobid(environ=launch) == "ƒ2VsyBmr2"


@pytest.mark.parametrize("name, hosts", [
    ("pals_no_size", ["x4102c1s0b0n0", "x4102c1s1b0n0"]),
    ("slurm_step", ["gnode10", "gnode20", "gnode25", "gnode37"]),
    ("lsf_jsrun", ["a01n01", "a01n02", "a01n03"]),
    ("skypilot", ["10.128.0.5", "10.128.0.6"]),
    ("pai", None),
])
def test_nodelist_of_active_job(name, hosts, tmp_path):
    assert get_nodelist_of_active_job(environ=recorded(name, tmp_path)) == hosts


def test_flux_nodelist_comes_from_flux_resource_list(tmp_path):
    bindir = fake_tools(tmp_path / "bin", {"flux": "tuo[1001-1002]"})
    environ = recorded("flux", tmp_path, PATH=str(bindir))
    assert get_nodelist_of_active_job(environ=environ) == ["tuo1001", "tuo1002"]


def test_outside_a_job_there_is_no_job(tmp_path):
    empty = {"PATH": str(tmp_path)}
    assert get_active_jobid(environ=empty) is None and get_nodelist_of_active_job(environ=empty) is None


def test_top_level_names_are_the_helpers():
    assert ezpz.get_scheduler is get_scheduler and ezpz.get_active_jobid is get_active_jobid
    assert ezpz.get_nodelist_of_active_job is get_nodelist_of_active_job
    assert ezpz.get_machine("x4102c1s0b0n0") == "Aurora" and ezpz.distributed.get_machine is ezpz.get_machine


def test_import_ezpz_pbs_and_slurm_in_a_fresh_interpreter():
    code = ("import ezpz.pbs, ezpz.slurm, ezpz.original.pbs, ezpz.original.slurm, ezpz\n"
            "assert ezpz.pbs is ezpz.original.pbs and ezpz.slurm is ezpz.original.slurm\n"
            "from ezpz.pbs import get_pbs_jobid_of_active_job\nfrom ezpz.slurm import get_slurm_jobid_of_active_job\n"
            "print(ezpz.pbs.__name__, ezpz.slurm.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ezpz.original.pbs", "ezpz.original.slurm"]


# --- ezpz.pbs / ezpz.slurm under recorded jobs ----------------------------------------------------------------------


def test_pbs_helpers(tmp_path):
    environ = recorded("pals_no_size", tmp_path)
    assert pbs.get_pbs_jobid_of_active_job(environ=environ) == "1234567"
    assert pbs.get_running_jobs_from_qstat(environ=environ) == [1234567]
    assert pbs.get_pbs_nodefile(environ=environ) == environ["PBS_NODEFILE"]
    assert pbs.get_pbs_nodelist_from_jobid("1234567.aurora-pbs-0001", environ=environ) == ["x4102c1s0b0n0",
                                                                                           "x4102c1s1b0n0"]
    assert pbs.get_pbs_running_jobs_for_user(environ=environ) == {"1234567": ["x4102c1s0b0n0", "x4102c1s1b0n0"]}
    with pytest.raises(ConfigError, match="jobid=999.*PBS_JOBID=1234567"):
        pbs.get_pbs_nodefile_from_jobid(999, environ=environ)


def test_pbs_launch_cmd_is_palss_mpiexec(tmp_path):
    bindir = fake_tools(tmp_path / "bin", {"mpiexec": "mpiexec version 1.3.3 (HPE Cray PALS)"})
    environ = recorded("pals_no_size", tmp_path, PATH=str(bindir), EZPZ_DEVICE="cpu")
    cmd = pbs.get_pbs_launch_cmd(ngpu_per_host=12, cpu_bind="depth", environ=environ)
    assert cmd == f"mpiexec --np 24 --ppn 12 --hostfile {environ['PBS_NODEFILE']} --cpu-bind=depth"
    info = pbs.get_pbs_launch_info(environ=environ)
    assert (info["NHOSTS"], info["HOSTS"]) == ("2", "[x4102c1s0b0n0, x4102c1s1b0n0]")


def test_slurm_helpers(tmp_path, monkeypatch):
    environ = recorded("slurm_step", tmp_path, EZPZ_DEVICE="cpu")
    assert slurm.get_slurm_jobid_of_active_job(environ=environ) == "200505"
    assert slurm.get_slurm_running_jobs(environ=environ) == ["200505"]
    hosts = ["gnode10", "gnode20", "gnode25", "gnode37"]
    assert slurm.get_nodelist_from_slurm_jobid(200505, environ=environ) == hosts
    monkeypatch.chdir(tmp_path)
    nodefile = Path(slurm.get_slurm_nodefile_of_active_job(environ=environ))
    assert nodefile == tmp_path / "nodefile-200505" and nodefile.read_text().split() == hosts
    assert slurm.build_launch_cmd(ngpus=8, ngpu_per_host=2, environ=environ) == \
        "srun -N 4 -n 8 --ntasks-per-node 2 --kill-on-bad-exit=1"
    with pytest.raises(ConfigError, match="jobid=1"):
        slurm.get_nodelist_from_slurm_jobid(1, environ=environ)


# --- machine names -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host, machine", [
    ("x4102c1s0b0n0", "Aurora"), ("aurora-uan-0010", "Aurora"), ("x1921c0s0b0n0", "SunSpot"),
    ("x3005c0s13b0n0", "Polaris"), ("x3005c0s13b0n0.sirius", "Sirius"), ("frontier08101", "Frontier"),
    ("nid001234", "Perlmutter"), ("sophia-gpu-07", "Sophia"), ("my-laptop", "my-laptop"),
])
def test_machine_names(host, machine):
    assert machine_of(host) == machine


def test_every_machine_rule_has_a_source():
    assert all(prefix and machine and "1229a17" in source for prefix, machine, source in MACHINES)
