"""``ezpz kill``: stop the processes ``ezpz launch`` started, found by the marker in their environment.

Only this user's processes whose environment holds ``EZPZ_LAUNCH_ID`` (set by
``ezpz launch`` on the command it runs) are touched: never a match on a name
or command line. The ``ezpz launch`` that started them (``EZPZ_LAUNCHER_PID``,
trusted only if it is their ancestor) is signalled first, so a retry loop
stops instead of starting another attempt. Run inside a scheduler job
(``SLURM_JOB_ID``, ``PBS_JOBID``...), only that job's launches are touched,
never the same user's launches of another job sharing the node (``--job``
picks another, ``--any-job`` every one). ``--all-nodes`` runs ``ezpz kill``
on every host of the allocation (``srun`` under Slurm, else ``--rsh``, default
ssh); ``--dry-run`` lists and signals nothing.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from ezpz.cli._util import err, table
from ezpz.errors import ConfigError
from ezpz.launch_drivers.layout import hostfile_allocation, hosts_from_nodelist
from ezpz.launch_drivers.marked import (
    MARKER,
    SCHEDULER_JOB_VARS,
    MarkedProcess,
    ancestors,
    launcher_of,
    marked_processes,
    scheduler_job,
)
from ezpz.primitives.frozen_records import frozen

__all__ = ["SIGNALS", "JobScope", "add_parser", "job_scope", "remote_argv", "run", "targets"]

SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL, "INT": signal.SIGINT, "HUP": signal.SIGHUP}
DEFAULT_RSH = "ssh -o BatchMode=yes -o ConnectTimeout=10"
REMOTE_TIMEOUT_S = 60.0
_MAX_JOB_ID = 256


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("kill", help="kill the processes `ezpz launch` started (by their environment marker)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="list the processes; signal nothing")
    p.add_argument("--signal", default="TERM", choices=sorted(SIGNALS), help="signal to send (default TERM)")
    p.add_argument("--id", metavar="LAUNCH_ID", help=f"only this launch ({MARKER}; default: every launch of yours "
                                                     "in this scheduler job, or anywhere outside one)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--job", metavar="JOB_ID", help="only launches started inside this scheduler job (default: the "
                                                      f"job this runs in, from {' or '.join(SCHEDULER_JOB_VARS)})")
    scope.add_argument("--any-job", action="store_true",
                       help="every launch of yours on the node, whichever scheduler job started it")
    p.add_argument("--all-nodes", action="store_true", help="run on every host of the allocation too")
    p.add_argument("--hostfile", metavar="PATH", help="hosts for --all-nodes (default: Slurm's or PBS's)")
    p.add_argument("--rsh", metavar="COMMAND", default=None,
                   help=f"how --all-nodes reaches a host: COMMAND HOST 'ezpz kill ...' "
                        f"(default: srun under Slurm, else {DEFAULT_RSH!r})")
    p.set_defaults(func=run)


@frozen(kw_only=True)
class JobScope:
    """Which scheduler job's launches ``ezpz kill`` touches: ``job`` ("" for every one) and why."""

    job: str
    reason: str

    def holds(self, process: MarkedProcess) -> bool:
        """Whether ``process`` was launched inside this scope's job (always, for the scope of every job)."""
        return not self.job or process.allocation == self.job


def _checked_job(name: str, value: str) -> str:
    job = value.strip()
    if not job or len(job) > _MAX_JOB_ID or not job.isprintable() or any(c.isspace() for c in job):
        raise ConfigError(name=name, value=value, expected=f"a scheduler job id: 1 to {_MAX_JOB_ID} printable "
                          "characters without spaces", fix="pass --job with the job's id, or --any-job for every job")
    return job


def job_scope(job: str | None, any_job: bool, launch_id: str | None, environ: Mapping[str, str]) -> JobScope:
    """The scope: ``--job``'s, every job's (``--any-job``, or ``--id``, which names one launch anywhere), else the
    job this command runs in, read from the scheduler's variable; every job's outside one."""
    if job is not None:
        return JobScope(job=_checked_job("--job", job), reason=f"--job {job.strip()}")
    if any_job:
        return JobScope(job="", reason="--any-job: launches of every scheduler job")
    if launch_id is not None:
        return JobScope(job="", reason="--id names one launch, whichever job started it")
    if (found := scheduler_job(environ)) is not None:
        name = found[0]
        here = _checked_job(name, environ[name])
        return JobScope(job=here, reason=f"this runs in job {here} ({name}); --any-job for every job's launches")
    return JobScope(job="", reason="not inside a scheduler job: every launch of yours")


def targets(launch_id: str | None, scope: JobScope, found: Sequence[MarkedProcess],
            spared: set[int]) -> tuple[list[MarkedProcess], list[MarkedProcess]]:
    """The marked processes ``found`` (less ``spared``: this command and its ancestors) split into those to
    signal and those of other jobs' launches, left alone."""
    chosen = [p for p in found if p.pid not in spared and (launch_id is None or p.launch_id == launch_id)]
    return [p for p in chosen if scope.holds(p)], [p for p in chosen if not scope.holds(p)]


def _local(args: argparse.Namespace) -> int:
    scope = job_scope(args.job, args.any_job, args.id, os.environ)
    mine = ancestors(os.getpid())
    procs, elsewhere = targets(args.id, scope, list(marked_processes(args.id)), mine)
    launchers = sorted({pid for p in procs if (pid := launcher_of(p)) is not None and pid not in mine})
    if elsewhere:
        where = ", ".join(sorted({f"job {p.allocation}" if p.allocation else "outside any job" for p in elsewhere}))
        err(f"ezpz kill: {len(elsewhere)} process(es) of other jobs' launches left alone ({where}): {scope.reason}")
    if not procs:
        err(f"ezpz kill: no process of yours carries {MARKER}" + (f"={args.id}" if args.id else "")
            + (f" in job {scope.job}" if scope.job else ""))
        return 0
    rows = [[str(p.pid), p.launch_id, p.allocation or "-", p.attempt or "-", "-" if p.rank is None else str(p.rank),
             p.cmdline[:120]] for p in sorted(procs, key=lambda p: p.pid)]
    rows += [[str(pid), "(ezpz launch)", "-", "-", "-", "the ezpz launch that started them"] for pid in launchers]
    for line in table(rows, header=["PID", "LAUNCH ID", "JOB", "ATTEMPT", "RANK", "COMMAND"], indent=""):
        print(line, flush=True)
    if args.dry_run:
        err(f"ezpz kill: dry run: {len(procs)} process(es) and {len(launchers)} launcher(s) listed, none signalled")
        return 0
    sig = SIGNALS[args.signal]
    sent = 0
    for pid in [*launchers, *(p.pid for p in procs)]:
        try:
            os.kill(pid, sig)
            sent += 1
        except ProcessLookupError:
            pass
        except PermissionError as error:
            err(f"ezpz kill: cannot signal {pid}: {error}")
    err(f"ezpz kill: SIG{args.signal} sent to {sent} process(es)")
    return 0


def _hosts(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, ...]:
    if args.hostfile:
        return hostfile_allocation(args.hostfile).hosts
    for var in ("SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        if environ.get(var, "").strip():
            return hosts_from_nodelist(environ[var].strip(), var)
    nodefile = environ.get("PBS_NODEFILE", "").strip()
    if nodefile:
        from ezpz.inputs.hostlist import hosts_from_file

        return hosts_from_file(nodefile, "PBS_NODEFILE")
    raise ConfigError(name="--all-nodes", value="", expected="a Slurm or PBS job, or --hostfile",
                      fix="run inside the allocation, or pass --hostfile with the job's hosts")


def remote_argv(host: str, inner: Sequence[str], environ: Mapping[str, str], rsh: str | None) -> list[str]:
    """How to run ``inner`` on ``host``: ``--rsh``, else srun under Slurm, else ssh."""
    if rsh is None and environ.get("SLURM_JOB_ID", "").strip():
        return ["srun", "--overlap", "-N1", "-n1", "-w", host, *inner]
    return [*shlex.split(rsh or DEFAULT_RSH), host, shlex.join(inner)]


def _all_nodes(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    hosts = _hosts(args, environ)
    scope = job_scope(args.job, args.any_job, args.id, environ)  # sent along: ssh does not carry the job's variables
    inner = [sys.executable, "-m", "ezpz", "kill", "--signal", args.signal, *(["--dry-run"] if args.dry_run else []),
             *(["--id", args.id] if args.id else []), *(["--job", scope.job] if scope.job else ["--any-job"])]

    def one(host: str) -> tuple[str, int, str]:
        try:
            done = subprocess.run(remote_argv(host, inner, environ, args.rsh), capture_output=True, text=True,
                                  timeout=REMOTE_TIMEOUT_S, stdin=subprocess.DEVNULL)
            return host, done.returncode, done.stdout + done.stderr
        except (OSError, subprocess.TimeoutExpired) as error:
            return host, 255, f"{type(error).__name__}: {error}"

    worst = 0
    with ThreadPoolExecutor(max_workers=min(32, len(hosts))) as pool:
        for host, rc, said in pool.map(one, hosts):
            for line in said.splitlines():
                print(f"{host}: {line}", flush=True)
            if rc:
                err(f"ezpz kill: {host}: exit {rc}")
                worst = max(worst, 1)
    return worst


def run(args: argparse.Namespace) -> int:
    if args.all_nodes:
        return _all_nodes(args, os.environ)
    return _local(args)
