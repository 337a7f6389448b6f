"""``ezpz submit``: write the batch job that runs ``ezpz launch -- CMD`` and submit it with ``sbatch`` or ``qsub``.

The script (:mod:`ezpz.launch_drivers.batch_scripts`) is kept as
``./ezpz-jobs/submit-<stamp>.sh``; the job's output goes to the ``.out`` file
beside it. The scheduler is the one given (``--scheduler``), else the one
whose submit command is on PATH. ``--dry-run`` prints the script and submits
nothing. Prints the job id and the output file on stdout. Bad values exit 2
with one line naming the value and the fix.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ezpz.cli._util import err
from ezpz.errors import EzpzError
from ezpz.launch_drivers.batch_scripts import SCHEDULERS, BatchJob, batch_script, walltime_seconds

__all__ = ["add_parser", "choose_scheduler", "job_from_args", "run"]

_SUBMIT = {"slurm": "sbatch", "pbs": "qsub"}
SUBMIT_TIMEOUT_S = 120.0
"""How long ``sbatch``/``qsub`` may take to answer (a busy controller), without ``--wait``."""
WAIT_MARGIN_S = 600.0
"""With ``--wait``: the job's walltime plus this (queueing, start-up) before ezpz stops waiting."""
WAIT_NO_WALLTIME_S = 86400.0


class SubmitError(EzpzError):
    """A refused ``ezpz submit`` input: one line with the value, what is allowed and the fix."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("submit", help="write and submit the batch job that runs `ezpz launch -- CMD`",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                       usage="ezpz submit [-N NODES] [-t TIME] [-A ACCOUNT] [-q QUEUE] [--scheduler slurm|pbs] "
                             "[--dry-run] [--wait] -- COMMAND [ARGS...]")
    p.add_argument("-N", "--nodes", default="1", metavar="NODES", help="nodes to ask for (default 1)")
    p.add_argument("-t", "--time", metavar="TIME", help="walltime: MM, HH:MM:SS or D-HH:MM:SS (default: the queue's)")
    p.add_argument("-A", "--account", metavar="ACCOUNT", help="project to charge")
    p.add_argument("-q", "--queue", metavar="QUEUE", help="queue (PBS) or partition (Slurm)")
    p.add_argument("--scheduler", metavar="slurm|pbs", help="default: the one whose sbatch/qsub is on PATH")
    p.add_argument("--filesystems", metavar="LIST", help="PBS Pro `-l filesystems=` (ALCF sites, e.g. flare:home)")
    p.add_argument("--name", default="ezpz", help="job name (default ezpz)")
    p.add_argument("-n", "--np", dest="n", metavar="N", help="`ezpz launch -n`: total processes")
    p.add_argument("--ppn", metavar="N", help="`ezpz launch --ppn`: processes per node")
    p.add_argument("--dry-run", action="store_true", help="print the script on stdout; submit nothing")
    p.add_argument("--wait", action="store_true", help="return when the job ends, with its exit status")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command `ezpz launch` runs, after --")
    p.set_defaults(func=run)


def _count(flag: str, text: str | None, what: str) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise SubmitError(f"{flag} {text!r} is not valid: expected {what}, 1 or more. Fix: pass e.g. {flag} 2")
    return value


def choose_scheduler(given: str | None, which: Callable[[str], str | None] = shutil.which) -> tuple[str, str]:
    """The scheduler and why: ``given`` when valid, else the one whose submit command ``which`` finds."""
    if given is not None:
        if given not in SCHEDULERS:
            raise SubmitError(f"--scheduler {given!r} is not valid: expected one of {', '.join(SCHEDULERS)}. "
                              f"Fix: pass --scheduler slurm or --scheduler pbs")
        return given, "--scheduler"
    found = [s for s in SCHEDULERS if which(_SUBMIT[s])]
    if len(found) == 1:
        return found[0], f"{_SUBMIT[found[0]]} is on PATH"
    if not found:
        raise SubmitError("no scheduler here: neither sbatch nor qsub is on PATH. Fix: run on the cluster's login "
                          "node (load its Slurm/PBS module), or pass --scheduler slurm|pbs with --dry-run to see the "
                          "script")
    raise SubmitError("both sbatch and qsub are on PATH: which scheduler is meant is unclear. Fix: pass --scheduler "
                      "slurm or --scheduler pbs")


def _activate(prefix: str, base_prefix: str) -> str | None:
    """The venv's ``bin/activate`` when this Python runs in one (its tools on PATH in the job), else None."""
    path = Path(prefix) / "bin" / "activate"
    return str(path) if prefix != base_prefix and path.is_file() else None


def job_from_args(args: argparse.Namespace, scheduler: str, output: str, workdir: str) -> BatchJob:
    """Check the flags and build the :class:`BatchJob` (refusals name the value and the fix)."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise SubmitError("no command given: expected `ezpz submit [options] -- COMMAND [ARGS...]`. "
                          "Fix: put the command after --, e.g. ezpz submit -N 1 -- python train.py")
    nodes = _count("-N/--nodes", args.nodes, "a whole number of nodes")
    walltime = None
    if args.time is not None:
        walltime = walltime_seconds(args.time)
        if walltime is None:
            raise SubmitError(f"-t/--time {args.time!r} is not valid: expected MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                              f"D-HH:MM:SS (as Slurm), more than zero. Fix: pass e.g. -t 01:00:00 for one hour")
    n = _count("-n/--np", args.n, "a whole number of processes")
    ppn = _count("--ppn", args.ppn, "a whole number of processes per node")
    launch_args = [*(["-n", str(n)] if n else []), *(["--ppn", str(ppn)] if ppn else [])]
    return BatchJob(scheduler=scheduler, nodes=nodes or 1, command=command, workdir=workdir, python=sys.executable,
                    output=output, walltime_s=walltime, account=args.account, queue=args.queue, name=args.name,
                    activate=_activate(sys.prefix, sys.base_prefix), filesystems=args.filesystems,
                    ntasks=n, ppn=ppn, launch_args=launch_args)


def _submit_argv(scheduler: str, script: str, wait: bool) -> list[str]:
    if scheduler == "slurm":
        return ["sbatch", "--parsable", *(["--wait"] if wait else []), script]
    return ["qsub", *(["-W", "block=true"] if wait else []), script]


def _job_id(scheduler: str, stdout: str) -> str:
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    first = lines[0] if lines else "?"
    return first.split(";")[0] if scheduler == "slurm" else first


def run(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    scheduler, why = choose_scheduler(args.scheduler)
    workdir = os.getcwd()
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    base = Path(workdir) / "ezpz-jobs" / f"submit-{stamp}"
    job = job_from_args(args, scheduler, f"{base}.out", workdir)
    text = batch_script(job)
    if args.dry_run:
        print(text, end="", flush=True)
        return 0
    submit = _SUBMIT[scheduler]
    if shutil.which(submit, path=environ.get("PATH")) is None:
        raise SubmitError(f"--scheduler {scheduler!r}: {submit} is not on PATH here. Fix: run on the cluster's login "
                          f"node (load its scheduler module), or add --dry-run to print the script")
    base.parent.mkdir(parents=True, exist_ok=True)
    script = f"{base}.sh"
    Path(script).write_text(text, encoding="utf-8")
    err(f"ezpz submit: scheduler {scheduler} ({why}); script {script}")
    timeout = (job.walltime_s or WAIT_NO_WALLTIME_S) + WAIT_MARGIN_S if args.wait else SUBMIT_TIMEOUT_S
    try:
        done = subprocess.run(_submit_argv(scheduler, script, args.wait), capture_output=True, text=True,
                              timeout=timeout, cwd=workdir, env=dict(environ))
    except subprocess.TimeoutExpired:
        err(f"ezpz submit: {submit} did not answer within {timeout:g} s (script {script})")
        return 1
    if done.stderr.strip():
        err(done.stderr.strip())
    job_id = _job_id(scheduler, done.stdout)
    if done.returncode and not (args.wait and job_id != "?"):
        err(f"ezpz submit: {submit} failed (exit {done.returncode}); script {script}")
        return 1
    print(f"job {job_id}", flush=True)
    print(f"output {job.output}", flush=True)
    return done.returncode
