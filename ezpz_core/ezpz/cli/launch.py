"""``ezpz launch``: run a command as N processes with the launcher that fits here.

Under PBS (``PBS_NODEFILE``): ``mpiexec`` with the node file and processes per
node. Under Slurm (``SLURM_JOB_ID``): ``srun -N -n --ntasks-per-node``. With no
scheduler: ``torchrun --standalone`` if it is on PATH, else ``mpiexec -n``.
Why the launcher was chosen, the layout and any added flags go to stderr; the
command goes to stdout with ``--dry-run`` (and is not run), else to stderr just
before it runs. The exit status is the command's (128+N if killed by signal N).

Supervision (see docs/failures.md): ``--timeout S`` ends a job silent for S
seconds (exit 124, as GNU timeout); ``--retries N`` runs it again after a
failure, with backoff; ``--auto-retry`` splits the allocation into active hosts
and ``--spare-nodes`` and swaps a host the evidence blames for a spare. Each
attempt's output and failure records are kept under ``--job-dir``. Every
process started carries ``EZPZ_LAUNCH_ID`` in its environment: ``ezpz kill``
finds them by it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ezpz.cli._util import err
from ezpz.cli.device_slots import planned_device_slots
from ezpz.cli.stage import add_stage_flags, stage_for_launch
from ezpz.cli.supervise import supervise
from ezpz.errors import ConfigError
from ezpz.launch_drivers import LaunchPlan, prepare
from ezpz.launch_drivers.marked import launch_markers
from ezpz.launch_drivers.run import run as run_command
from ezpz.launch_drivers.supervisor import AUTO_RETRY_TIMEOUT_S, BACKOFF_CAP_S, new_launch_id
from ezpz.inputs.settings import seconds_in_range

__all__ = ["GRACE_RANGE_S", "add_launch_flags", "add_parser", "add_supervision_flags", "describe", "execute", "run",
           "supervised"]

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


def _spares(text: str) -> str:
    if text != "auto" and not (text.isdigit()):
        raise argparse.ArgumentTypeError(f"--spare-nodes {text!r}: expected 'auto' or a number of hosts, 0 or more")
    return text


def _non_negative(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = -1
        if not value >= 0 or value != value:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a number, 0 or more")
        return value
    return parse


def _positive_int(text: str) -> int:
    value = _non_negative(int)(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid: expected a whole number, 1 or more")
    return value


def add_supervision_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("supervision (docs/failures.md)")
    g.add_argument("--timeout", type=_non_negative(float), metavar="SECONDS",
                   help="end the job if it prints nothing for this long; exit 124 as GNU timeout "
                        f"(default: off; {AUTO_RETRY_TIMEOUT_S:g} with --auto-retry; 0 turns it off)")
    g.add_argument("--kill-after", type=_non_negative(float), default=10.0, metavar="SECONDS",
                   help="after the watchdog's SIGTERM, SIGKILL the job if still running this long (default 10)")
    g.add_argument("--failure-grace", type=_non_negative(float), default=15.0, metavar="SECONDS",
                   help="once a rank has written a failure record, end a job still running this long after "
                        "(a launcher waiting on a node it cannot reach); 0: never (default 15)")
    g.add_argument("--retries", type=_non_negative(int), default=0, metavar="N",
                   help="run again on the same hosts after a failure (incl. exit 124), up to N times, unless it cannot "
                        "succeed there (a code error; the launcher unable to start the job) (default 0)")
    g.add_argument("--retry-delay", type=_non_negative(float), default=5.0, metavar="SECONDS",
                   help=f"backoff before retry k: SECONDS x 2^(k-1), at most {BACKOFF_CAP_S:g} (default 5)")
    g.add_argument("--auto-retry", action="store_true",
                   help="bad-host failover: split the allocation into active hosts and spares; after a failure "
                        "exclude the host the failure records (or, failing them, the log) blame and swap in a spare; "
                        "stop on success, a code error, walltime, no progress twice, or no spares")
    g.add_argument("-nh", "--nhosts", type=int, metavar="N", help="active hosts for --auto-retry (default: from --np)")
    g.add_argument("--spare-nodes", type=_spares, metavar="N|auto",
                   help="hosts kept as spares for --auto-retry (default auto: every host not active)")
    g.add_argument("--replace-stragglers", type=_positive_int, metavar="M",
                   help="with --auto-retry: end, exclude and replace by a spare a host that is a straggler in M "
                        "consecutive straggler reports (docs/stragglers.md)")
    g.add_argument("--min-nodes", type=int, metavar="K",
                   help="with --auto-retry: when a host is excluded and no spare is left, go on with the healthy hosts "
                        "left (K or more; ranks renumbered, processes per node unchanged; the script resumes from its "
                        "last complete checkpoint); below K stop, naming the hosts lost (default: stop with no spare)")
    g.add_argument("--readmit", action="store_true",
                   help="with --auto-retry: a host excluded earlier becomes a spare again once it has sat out an "
                        "attempt (default: an excluded host is never taken again within the job)")
    g.add_argument("--max-failover-retries", type=_non_negative(int), default=10, metavar="N",
                   help="at most this many --auto-retry retries (default 10)")
    g.add_argument("--expect-ezpz", action="store_true",
                   help="the command calls ezpz's setup() on every rank: an exit 0 with ranks that never started is a "
                        "failure (false_success) even when no rank left a marker (docs/failures.md)")
    g.add_argument("--job-dir", metavar="PATH",
                   help="where each attempt's log, failure records and verdict are kept "
                        "(default ./ezpz-jobs/<launch id>: the current directory, which ranks on every node can reach)")


def supervised(args: argparse.Namespace) -> bool:
    """Whether the run goes through the attempt loop (any supervision flag given)."""
    return bool(args.timeout or args.retries or args.auto_retry or args.job_dir or args.expect_ezpz)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("launch", help="run a command as N processes with the right launcher",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                       usage="ezpz launch [options] -- COMMAND [ARGS...]")
    p.add_argument("--dry-run", action="store_true", help="print the command on stdout and exit")
    add_launch_flags(p)
    add_supervision_flags(p)
    g = p.add_argument_group("environment staging (docs/staging.md)")
    g.add_argument("--stage-env", action="store_true",
                   help="before the ranks start, copy the Python environment to node-local storage on every node "
                        "(fan-out over the nodes; reused while unchanged) and run the ranks with that interpreter")
    g.add_argument("--stage-src", metavar="PATH",
                   help="with --stage-env: the directory or tarball to stage (default: the active venv/conda env)")
    add_stage_flags(g)
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


def execute(plan: LaunchPlan, prefix: str, grace: float, *, job_stdout_to_stderr: bool = False,
            environ: Mapping[str, str] | None = None) -> int:
    """Run a prepared launch, mapping a missing launcher binary to status 127."""
    grace = seconds_in_range(grace, "--grace", GRACE_RANGE_S,
                             fix="pass --grace SECONDS, from 0 to 86400 (how long an interrupted job may take to exit)")
    err(f"{prefix}: running: {plan.command.shell()}")
    try:
        return run_command(plan.command, environ=environ, grace_s=grace,
                           stdout=sys.stderr if job_stdout_to_stderr else None)
    except OSError as error:
        err(f"{prefix}: error: cannot run {plan.command.argv[0]!r}: {error.strerror or error}. "
            f"Fix: put it on PATH (load your MPI or Slurm module), or pick another with --launcher")
        return 127


def run(args: argparse.Namespace) -> int:
    seconds_in_range(args.grace, "--grace", GRACE_RANGE_S, fix="pass --grace SECONDS, from 0 to 86400")
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    devices = lambda: planned_device_slots(os.environ)  # noqa: E731
    if args.auto_retry and args.retries:
        raise ConfigError(name="--retries", value=args.retries, expected="0 with --auto-retry",
                          fix="--retries reruns on the same hosts, --auto-retry swaps bad hosts: pick one")
    if args.replace_stragglers is not None and not args.auto_retry:
        raise ConfigError(name="--replace-stragglers", value=args.replace_stragglers, expected="used with --auto-retry",
                          fix="add --auto-retry (it knows the spares a straggler's host is replaced by)")
    if args.min_nodes is not None and args.min_nodes < 1:
        raise ConfigError(name="--min-nodes", value=args.min_nodes, expected="a whole number of hosts, 1 or more",
                          fix="pass --min-nodes K with K the fewest hosts the job may go on with, e.g. half the active "
                              "hosts")
    if args.min_nodes is not None and not (args.auto_retry or args.stage_env):
        raise ConfigError(name="--min-nodes", value=args.min_nodes, expected="used with --auto-retry or --stage-env",
                          fix="add --auto-retry (it excludes the bad hosts the job then goes on without) or "
                              "--stage-env (a node that fails to stage is left out), or drop --min-nodes")
    if args.readmit and not args.auto_retry:
        raise ConfigError(name="--readmit", value=True, expected="used with --auto-retry",
                          fix="add --auto-retry (only it excludes hosts), or drop --readmit")
    if (args.nhosts is not None or args.spare_nodes is not None) and not args.auto_retry:
        raise ConfigError(name="--nhosts/--spare-nodes", value=args.nhosts if args.nhosts is not None
                          else args.spare_nodes, expected="used with --auto-retry",
                          fix="add --auto-retry, or give the layout with -n/--ppn/--hostfile")
    if args.stage_env and not args.dry_run:
        staged = stage_for_launch(args, command, os.environ)
        if isinstance(staged, int):
            return staged
        command, args.hostfile = staged
    if supervised(args) and not args.dry_run:
        return supervise(args, command, os.environ, devices,
                         lambda plan: describe(plan, "ezpz launch", verbose=args.verbose > 0))
    env = {**os.environ, **launch_markers(new_launch_id(), os.environ)}
    plan = prepare(command, launcher=args.launcher, n=args.n, ppn=args.ppn, hostfile=args.hostfile, environ=env,
                   devices=devices)
    describe(plan, "ezpz launch", verbose=args.verbose > 0)
    if args.dry_run:
        print(plan.command.shell(), flush=True)
        return 0
    return execute(plan, "ezpz launch", args.grace, environ=env)
