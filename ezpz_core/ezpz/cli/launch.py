"""``ezpz launch``: run a command as N processes with the launcher that fits here.

Under PBS (``PBS_NODEFILE``): ``mpiexec`` with the node file and processes per
node. Under Slurm (``SLURM_JOB_ID``): ``srun -N -n --ntasks-per-node``. With no
scheduler: ``torchrun --standalone`` if it is on PATH, else ``mpiexec -n``.
Why the launcher was chosen, the layout and any added flags go to stderr; the
command goes to stdout with ``--dry-run`` (and is not run), else to stderr just
before it runs. The exit status is the command's (128+N if killed by signal N).
"""

from __future__ import annotations

import argparse
import os
import sys

from ezpz.cli._util import err
from ezpz.cli.device_slots import planned_device_slots
from ezpz.launch_drivers import LaunchPlan, prepare
from ezpz.launch_drivers.run import run as run_command
from ezpz.settings import seconds_in_range

__all__ = ["GRACE_RANGE_S", "add_launch_flags", "add_parser", "describe", "execute", "run"]

GRACE_RANGE_S = (0.0, 86400.0)
"""``--grace``: from no grace at all to a day."""


def add_launch_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--launcher", metavar="NAME", help="use this launch driver (see `ezpz plugins`) instead of choosing")
    p.add_argument("-n", "--np", dest="n", type=int, metavar="N",
                   help="total processes (launch default: per node x nodes; test default: 1)")
    p.add_argument("--ppn", type=int, metavar="N",
                   help="processes per node (default: -n spread over the nodes, else one per accelerator)")
    p.add_argument("--hostfile", metavar="PATH", help="hosts to run on, one per line (default: the scheduler's)")
    p.add_argument("--grace", type=float, default=30.0, metavar="SECONDS",
                   help="after an interrupt, wait this long for the job to exit before killing it (default 30)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("launch", help="run a command as N processes with the right launcher",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                       usage="ezpz launch [options] -- COMMAND [ARGS...]")
    p.add_argument("--dry-run", action="store_true", help="print the command on stdout and exit")
    add_launch_flags(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to launch, after --")
    p.set_defaults(func=run)


def describe(plan: LaunchPlan, prefix: str, verbose: bool = False) -> None:
    """Tell the user (stderr) which launcher, why, the layout and what was added."""
    err(f"{prefix}: launcher {plan.launcher}: {plan.reason}")
    if verbose:
        for name, why in plan.passed_over:
            err(f"{prefix}:   not {name}: {why}")
    err(f"{prefix}: layout: {plan.layout.why}")
    for note in plan.command.notes:
        err(f"{prefix}: note: {note}")


def execute(plan: LaunchPlan, prefix: str, grace: float, *, job_stdout_to_stderr: bool = False) -> int:
    """Run a prepared launch, mapping a missing launcher binary to status 127."""
    grace = seconds_in_range(grace, "--grace", GRACE_RANGE_S,
                             fix="pass --grace SECONDS, from 0 to 86400 (how long an interrupted job may take to exit)")
    err(f"{prefix}: running: {plan.command.shell()}")
    try:
        return run_command(plan.command, grace_s=grace, stdout=sys.stderr if job_stdout_to_stderr else None)
    except OSError as error:
        err(f"{prefix}: error: cannot run {plan.command.argv[0]!r}: {error.strerror or error}. "
            f"Fix: put it on PATH (load your MPI or Slurm module), or pick another with --launcher")
        return 127


def run(args: argparse.Namespace) -> int:
    seconds_in_range(args.grace, "--grace", GRACE_RANGE_S, fix="pass --grace SECONDS, from 0 to 86400")
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    plan = prepare(command, launcher=args.launcher, n=args.n, ppn=args.ppn, hostfile=args.hostfile, environ=os.environ,
                   devices=lambda: planned_device_slots(os.environ))
    describe(plan, "ezpz launch", verbose=args.verbose > 0)
    if args.dry_run:
        print(plan.command.shell(), flush=True)
        return 0
    return execute(plan, "ezpz launch", args.grace)
