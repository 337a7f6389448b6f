"""Launch drivers for schedulers with a launcher of their own: ``flux run`` (Flux), ``jsrun`` (LSF).

Sources:

* Flux: ``flux run -N NODES -n TASKS`` (flux-core ``doc/man1/flux-run.rst``).
  A batch script or ``flux alloc`` shell runs as the new instance's initial
  program, whose environment has ``FLUX_URI`` and ``FLUX_ENCLOSING_ID`` but no
  ``FLUX_JOB_*``/``FLUX_TASK_*`` (flux-core ``src/broker/runat.c`` blocklists
  them), so the nodes come from ``flux resource list`` (:mod:`ezpz.probes.flux`).
* LSF: ``jsrun --nrs N --rs_per_host 1 --tasks_per_rs P --cpu_per_rs ALL_CPUS
  --gpu_per_rs ALL_GPUS`` (IBM jsrun; one resource set per node holding its P
  ranks and all its CPUs and GPUs). The hosts are ``LSB_DJOB_RANKFILE``'s, less
  its first line, the launch node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ezpz.errors import ConfigError
from ezpz.launch_drivers.base import Allocation, Command, Layout, Match
from ezpz.probes.launcher_tools import which

__all__ = ["Flux", "Jsrun"]


def _get(environ: Mapping[str, str], name: str) -> str:
    return (environ.get(name) or "").strip()


class Flux:
    """``flux run`` inside a Flux instance (a ``flux batch`` script or ``flux alloc`` shell)."""

    def match(self, environ: Mapping[str, str]) -> Match:
        for var in ("FLUX_URI", "FLUX_ENCLOSING_ID", "FLUX_JOB_ID"):
            if _get(environ, var):
                return Match(True, f"inside a Flux instance ({var} is set)")
        return Match(False, "not in a Flux instance (FLUX_URI, FLUX_ENCLOSING_ID and FLUX_JOB_ID are not set)")

    def allocation(self, environ: Mapping[str, str]) -> Allocation:
        from ezpz.inputs.hostlist import expand_nodelist
        from ezpz.probes.flux import resource_nodelist

        found = resource_nodelist(environ)
        if found is None:
            return Allocation()
        text, source = found
        try:
            hosts = tuple(dict.fromkeys(expand_nodelist(text)))
        except ValueError as err:
            raise ConfigError(name="flux resource list", value=text, expected=f"a Flux host list ({err})",
                              fix="pass --hostfile with the job's hosts, one per line") from None
        return Allocation(hosts=hosts, source=source)

    def build(self, argv: Sequence[str], layout: Layout, environ: Mapping[str, str]) -> Command:
        if layout.n % layout.nodes:
            raise ConfigError(
                name="-n", value=layout.n, expected=f"a multiple of the {layout.nodes} node(s): Flux tells a task "
                "no per-node count, so ezpz needs the same number on every node",
                fix=f"pass -n {layout.nodes * layout.ppn}, or --ppn alone")
        cmd = ["flux", "run", "-N", str(layout.nodes), "-n", str(layout.n)]
        notes = [f"-N {layout.nodes} -n {layout.n}: {layout.n // layout.nodes} task(s) on each node (block task map)"]
        if layout.allocation.hostfile:
            notes.append("--hostfile sizes the launch only: Flux places the tasks on the instance's nodes itself")
        return Command(argv=(*cmd, *argv), notes=tuple(notes))


class Jsrun:
    """``jsrun`` in an LSF job with IBM's Job Step Manager (Summit-class machines)."""

    def match(self, environ: Mapping[str, str]) -> Match:
        job = _get(environ, "LSB_JOBID")
        if not job:
            return Match(False, "not in an LSF job (LSB_JOBID is not set)")
        path = which("jsrun", environ)
        if path is None:
            return Match(False, f"LSF job {job} but jsrun is not on PATH (no Job Step Manager: mpiexec instead)")
        return Match(True, f"LSF job {job} (LSB_JOBID is set); jsrun is on PATH ({path})")

    def allocation(self, environ: Mapping[str, str]) -> Allocation:
        from ezpz.inputs.hostlist import rankfile_hosts

        path = _get(environ, "LSB_DJOB_RANKFILE")
        if not path:
            return Allocation()
        try:
            hosts = tuple(rankfile_hosts(path))
        except (OSError, ValueError) as err:
            raise ConfigError(name="LSB_DJOB_RANKFILE", value=path, expected=f"LSF's readable rank file ({err})",
                              fix="pass --hostfile with the job's compute hosts, one per line") from None
        return Allocation(hosts=hosts, source=f"LSB_DJOB_RANKFILE={path} (less its first line, the launch node)")

    def build(self, argv: Sequence[str], layout: Layout, environ: Mapping[str, str]) -> Command:
        if layout.n != layout.nodes * layout.ppn:
            raise ConfigError(
                name="-n", value=layout.n, expected=f"{layout.nodes} x {layout.ppn}: jsrun starts the same number "
                "of ranks in every resource set (one per node)", fix=f"pass -n {layout.nodes * layout.ppn}, or --ppn alone")
        cmd = ["jsrun", "--nrs", str(layout.nodes), "--rs_per_host", "1", "--tasks_per_rs", str(layout.ppn),
               "--cpu_per_rs", "ALL_CPUS", "--gpu_per_rs", "ALL_GPUS"]
        notes = [f"one resource set per node with {layout.ppn} rank(s) and all its CPUs and GPUs"]
        return Command(argv=(*cmd, *argv), notes=tuple(notes))
