"""``ezpz kill``: stop the processes ``ezpz launch`` started, found by the marker in their environment.

Only this user's processes whose environment holds ``EZPZ_LAUNCH_ID`` (set by
``ezpz launch`` on the command it runs) are touched: never a match on a name
or command line. The ``ezpz launch`` that started them (``EZPZ_LAUNCHER_PID``,
trusted only if it is their ancestor) is signalled first, so a retry loop
stops instead of starting another attempt. ``--all-nodes`` runs ``ezpz kill``
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
from ezpz.launch_drivers.marked import MARKER, MarkedProcess, ancestors, launcher_of, marked_processes

__all__ = ["SIGNALS", "add_parser", "remote_argv", "run"]

SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL, "INT": signal.SIGINT, "HUP": signal.SIGHUP}
DEFAULT_RSH = "ssh -o BatchMode=yes -o ConnectTimeout=10"
REMOTE_TIMEOUT_S = 60.0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("kill", help="kill the processes `ezpz launch` started (by their environment marker)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="list the processes; signal nothing")
    p.add_argument("--signal", default="TERM", choices=sorted(SIGNALS), help="signal to send (default TERM)")
    p.add_argument("--id", metavar="LAUNCH_ID", help=f"only this launch ({MARKER}; default: every launch of yours)")
    p.add_argument("--all-nodes", action="store_true", help="run on every host of the allocation too")
    p.add_argument("--hostfile", metavar="PATH", help="hosts for --all-nodes (default: Slurm's or PBS's)")
    p.add_argument("--rsh", metavar="COMMAND", default=None,
                   help=f"how --all-nodes reaches a host: COMMAND HOST 'ezpz kill ...' "
                        f"(default: srun under Slurm, else {DEFAULT_RSH!r})")
    p.set_defaults(func=run)


def _targets(launch_id: str | None) -> tuple[list[MarkedProcess], list[int]]:
    mine = ancestors(os.getpid())
    procs = [p for p in marked_processes(launch_id) if p.pid not in mine]
    launchers = sorted({pid for p in procs if (pid := launcher_of(p)) is not None and pid not in mine})
    return procs, launchers


def _local(args: argparse.Namespace) -> int:
    procs, launchers = _targets(args.id)
    if not procs:
        err(f"ezpz kill: no process of yours carries {MARKER}" + (f"={args.id}" if args.id else ""))
        return 0
    rows = [[str(p.pid), p.launch_id, p.attempt or "-", "-" if p.rank is None else str(p.rank), p.cmdline[:120]]
            for p in sorted(procs, key=lambda p: p.pid)]
    rows += [[str(pid), "(ezpz launch)", "-", "-", "the ezpz launch that started them"] for pid in launchers]
    for line in table(rows, header=["PID", "LAUNCH ID", "ATTEMPT", "RANK", "COMMAND"], indent=""):
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
    inner = [sys.executable, "-m", "ezpz", "kill", "--signal", args.signal, *(["--dry-run"] if args.dry_run else []),
             *(["--id", args.id] if args.id else [])]

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
