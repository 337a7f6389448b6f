"""Built-in launch drivers: ``torchrun`` (one node, or a node of Kubeflow/PAI/SkyPilot), ``mpiexec``, ``srun``.

``flux`` and ``jsrun`` are in :mod:`ezpz.launch_drivers.schedulers`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ezpz.errors import ConfigError
from ezpz.launch_drivers.base import Allocation, Command, Layout, Match
from ezpz.probes.cpu import physical_cores
from ezpz.probes.launcher_tools import mpi_flavor, scheduler, which

__all__ = ["Mpiexec", "Srun", "Torchrun"]


# Variables Open MPI must be told to pass to ranks on other nodes (plus every EZPZ_*), when set.
_EXPORT = frozenset({"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "OMP_NUM_THREADS",
                     "MASTER_ADDR", "MASTER_PORT", "TORCH_DEVICE", "TORCH_BACKEND"})


class Torchrun:
    """``torchrun --standalone`` on this machine; on each node of a Kubeflow, PAI or SkyPilot job, multi-node torchrun."""

    def match(self, environ: Mapping[str, str]) -> Match:
        from ezpz.launch_drivers.node_torchrun import node_job_match

        on_nodes = node_job_match(environ)
        if on_nodes is not None:
            return on_nodes
        found = scheduler(environ)
        if found:
            return Match(False, f"inside a {found[0]} job ({found[1]} is set): the scheduler's launcher places ranks")
        path = which("torchrun", environ)
        if path is None:
            return Match(False, "torchrun is not on PATH")
        return Match(True, f"no scheduler; torchrun is on PATH ({path})")

    def allocation(self, environ: Mapping[str, str]) -> Allocation:
        return Allocation()

    def build(self, argv: Sequence[str], layout: Layout, environ: Mapping[str, str]) -> Command:
        from ezpz.launch_drivers.node_torchrun import node_job_command

        on_nodes = node_job_command(argv, layout, environ)
        if on_nodes is not None:
            return on_nodes
        if layout.nodes > 1:
            raise ConfigError(
                name="--launcher", value="torchrun", expected="a launch on this machine only (torchrun --standalone)",
                fix=f"{layout.nodes} nodes are needed: use --launcher mpiexec or srun, or lower -n/raise --ppn",
            )
        argv = ("torchrun", "--standalone", "--nproc-per-node", str(layout.n), "--no-python", *argv)
        return Command(argv=argv, notes=("--no-python: torchrun runs the command as given",))


class Srun:
    """Slurm's ``srun`` inside an allocation; nodes from ``SLURM_JOB_NODELIST``."""

    def match(self, environ: Mapping[str, str]) -> Match:
        job = environ.get("SLURM_JOB_ID", "").strip()
        if not job:
            return Match(False, "not in a Slurm job (SLURM_JOB_ID is not set)")
        return Match(True, f"Slurm job {job} (SLURM_JOB_ID is set)")

    def allocation(self, environ: Mapping[str, str]) -> Allocation:
        from ezpz.launch_drivers.layout import hosts_from_nodelist

        for var in ("SLURM_JOB_NODELIST", "SLURM_NODELIST"):
            text = environ.get(var, "").strip()
            if text:
                return Allocation(hosts=hosts_from_nodelist(text, var), source=f"{var}={text}")
        return Allocation()

    def build(self, argv: Sequence[str], layout: Layout, environ: Mapping[str, str]) -> Command:
        cmd = ["srun", "-N", str(layout.nodes), "-n", str(layout.n), "--ntasks-per-node", str(layout.ppn)]
        notes = ["--kill-on-bad-exit=1: one failed rank ends the step instead of leaving the rest waiting"]
        if layout.allocation.hostfile:  # an explicit --hostfile: pin the nodes
            cmd.append("--nodelist=" + ",".join(layout.allocation.hosts[: layout.nodes]))
        return Command(argv=(*cmd, "--kill-on-bad-exit=1", *argv), notes=tuple(notes))


class Mpiexec:
    """``mpiexec``: Cray PALS or MPICH under PBS, Open MPI or MPICH locally; flags follow the flavor found."""

    def match(self, environ: Mapping[str, str]) -> Match:
        found = scheduler(environ)
        if found and found[0] == "PBS":
            job = environ.get("PBS_JOBID", "").strip() or "?"
            return Match(True, f"PBS job {job} ({found[1]} is set)")
        path = which("mpiexec", environ)
        if path is None:
            return Match(False, "mpiexec is not on PATH")
        where = f"a {found[0]} job with no launcher of its own installed" if found else "no scheduler"
        return Match(True, f"{where}; mpiexec is on PATH ({path})")

    def allocation(self, environ: Mapping[str, str]) -> Allocation:
        from ezpz.inputs.hostlist import hosts_from_file

        nodefile = environ.get("PBS_NODEFILE", "").strip()
        if not nodefile:
            return Allocation()
        return Allocation(hosts=hosts_from_file(nodefile, "PBS_NODEFILE"), hostfile=nodefile,
                          source=f"PBS_NODEFILE={nodefile}")

    def build(self, argv: Sequence[str], layout: Layout, environ: Mapping[str, str]) -> Command:
        path = which("mpiexec", environ)
        flavor = mpi_flavor(path)
        notes = [f"mpiexec flavor {flavor} ({path or 'mpiexec not on PATH: assumed Cray PALS flags'})"]
        n, ppn, hostfile = str(layout.n), str(layout.ppn), layout.allocation.hostfile
        if flavor == "openmpi":
            cmd = ["mpiexec", "-n", n]
            if hostfile:
                cmd += ["--hostfile", hostfile, "--map-by", f"ppr:{ppn}:node"]
                exported = [k for k in environ if k in _EXPORT or k.startswith("EZPZ_")]
                for name in sorted(exported):
                    cmd += ["-x", name]
                if exported:
                    notes.append(f"-x: Open MPI passes only named variables to other nodes ({len(exported)} exported)")
                if hostfile != environ.get("PBS_NODEFILE", "").strip():
                    cmd += ["-x", f"HOSTFILE={os.path.abspath(hostfile)}"]  # Open MPI tells ranks nothing of the hosts
                    notes.append("-x HOSTFILE: ranks derive the rendezvous (MASTER_ADDR) from its first host")
            else:
                cores = physical_cores()
                if layout.n > cores:
                    cmd.append("--oversubscribe")
                    notes.append(f"--oversubscribe: {layout.n} processes on {cores} core(s)")
            if os.geteuid() == 0:
                cmd.append("--allow-run-as-root")
                notes.append("--allow-run-as-root: running as root")
        elif flavor == "hydra":
            cmd = ["mpiexec", "-n", n, *(["-ppn", ppn, "-f", hostfile] if hostfile else [])]
        else:
            cmd = ["mpiexec", "--np", n, *(["--ppn", ppn, "--hostfile", hostfile] if hostfile else [])]
        return Command(argv=(*cmd, *argv), notes=tuple(notes))
