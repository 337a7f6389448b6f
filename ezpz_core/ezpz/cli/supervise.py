"""``ezpz launch --timeout/--retries/--auto-retry``: run the job in attempts, each watched, logged and judged.

Every attempt ``k`` (0, 1, ...) gets ``EZPZ_ATTEMPT=k`` and
``EZPZ_FAILURE_DIR=<job dir>/attempt-<k>/failures``, where its ranks write
failure records; its merged output is kept in ``attempt-<k>/output.log`` and
the verdict in ``attempt-<k>/verdict.json``. ``--retries N`` runs up to N more
attempts on the same hosts after any failure; ``--auto-retry`` asks the pure
policy :func:`ezpz.launch_drivers.retry.classify` and swaps bad hosts for spares.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ezpz.cli._util import err, jsonable
from ezpz.errors import ConfigError
from ezpz.failures.record import read_failures, read_failures_verbose
from ezpz.launch_drivers import LaunchPlan, load, prepare, select
from ezpz.launch_drivers.allocation_split import HostPool, active_hosts_wanted, split_allocation
from ezpz.launch_drivers.attempt import AttemptResult, Interrupts, run_attempt
from ezpz.launch_drivers.first_failure import first_failure
from ezpz.launch_drivers.layout import hostfile_allocation
from ezpz.launch_drivers.log_signatures import LAUNCHER_SIGNATURES
from ezpz.launch_drivers.marked import LAUNCHER_PID_VAR, MARKER
from ezpz.launch_drivers.retry import AttemptFacts, Verdict, backoff_s, classify, log_hits, records_name_hosts
from ezpz.launch_drivers.straggler_charts import chart_lines, chart_svg
from ezpz.launch_drivers.straggler_report import ReportFollower, summary_lines
from ezpz.steps.straggler_exchange import REPORT_NAME

__all__ = ["AUTO_RETRY_TIMEOUT_S", "BACKOFF_CAP_S", "default_job_dir", "new_launch_id", "supervise"]

AUTO_RETRY_TIMEOUT_S = 1800.0
"""``--timeout`` under ``--auto-retry`` when not given (the original's FAILOVER_IDLE_TIMEOUT): silent hangs
otherwise burn the whole walltime."""
BACKOFF_CAP_S = 60.0
_LOG_TAIL = 4 << 20
P = "ezpz launch"


def new_launch_id() -> str:
    """One id per ``ezpz launch`` run: host, pid and a random part."""
    return f"{socket.gethostname().split('.')[0]}-{os.getpid()}-{secrets.token_hex(3)}"


def default_job_dir(launch_id: str, cwd: str | None = None) -> Path:
    """``./ezpz-jobs/<launch id>`` under the current directory: ranks on other nodes must reach it, and the
    current directory of a batch job is normally on the shared filesystem, where ``$TMPDIR`` is node-local."""
    return Path(cwd or os.getcwd()) / "ezpz-jobs" / launch_id


def _signatures() -> list:
    try:
        from ezpz.hooks import get_plugin_host
        from ezpz.plugin_host.calls import Hooks

        return [*LAUNCHER_SIGNATURES, *Hooks(get_plugin_host()).failure_signatures()]
    except Exception as error:  # a broken plugin host must not stop the retry loop
        err(f"{P}: note: plugins' failure signatures unavailable ({type(error).__name__}: {error})")
        return list(LAUNCHER_SIGNATURES)


def _log_text(path: Path | None) -> str:
    if path is None or not path.is_file():
        return ""
    with path.open("rb") as fh:
        size = path.stat().st_size
        fh.seek(max(0, size - _LOG_TAIL))
        return fh.read().decode("utf-8", "replace")


def _rank_hosts(plan: LaunchPlan) -> dict[int, str]:
    """Rank -> host for the block placement the drivers ask for (``ppn`` consecutive ranks per host)."""
    layout = plan.layout
    hosts = layout.allocation.hosts[: layout.nodes] or (socket.gethostname(),)
    return {r: hosts[min(r // layout.ppn, len(hosts) - 1)] for r in range(layout.n)}


def _write_hostfile(path: Path, hosts: tuple[str, ...], ppn: int) -> str:
    """One line per slot (PBS style): Open MPI counts repeats as slots; MPICH, PALS and ezpz collapse them."""
    path.write_text("".join(f"{h}\n" * ppn for h in hosts))
    return str(path)


def _allocation_hosts(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    if args.hostfile:
        alloc = hostfile_allocation(args.hostfile)
    else:
        driver = load(args.launcher) if args.launcher else select(environ)[1]
        alloc = driver.allocation(environ)
    if not alloc.hosts:
        raise ConfigError(name="--auto-retry", value="", expected="an allocation of several hosts (Slurm, PBS, or "
                          "--hostfile) to split into active hosts and spares",
                          fix="run inside a Slurm/PBS job, or pass --hostfile; on one machine use --retries")
    return alloc.hosts, alloc.source


def _say_timeout(result: AttemptResult, records: list, rank_hosts: Mapping[int, str], timeout_s: float) -> None:
    err(f"{P}: attempt {result.attempt}: no output for {result.idle_s:.0f} s (--timeout {timeout_s:g}): "
        f"job ended, exit 124")
    if result.alive_ranks:
        named = ", ".join(f"{r} (host {rank_hosts.get(r, '?')})" for r in result.alive_ranks)
        err(f"{P}: attempt {result.attempt}: silent rank(s) still running here: {named}")
    for rec in records:
        missing = f"; missing ranks {list(rec.missing_ranks)}" if rec.missing_ranks else ""
        err(f"{P}: attempt {result.attempt}: rank {rec.rank} (host {rec.host}) recorded {rec.kind}{missing}")
    if not result.alive_ranks and not records:
        err(f"{P}: attempt {result.attempt}: no rank here was still running and none wrote a record: "
            f"the silent ranks are on other hosts")


def _say_verdict(k: int, verdict: Verdict) -> None:
    err(f"{P}: attempt {k}: {verdict.outcome}: {verdict.reason}")
    for e in verdict.evidence:
        err(f"{P}:   evidence: {e}")


def _say_stragglers(follower: ReportFollower, job_dir: Path, k: int) -> None:
    """At an attempt's end: the last straggler report, the chart of the slowest ranks, ``stragglers-attempt-<k>.svg``."""
    data = follower.data
    if data is None:
        return
    history = follower.history()
    for line in summary_lines(data) + (chart_lines(history) if history is not None else []):
        err(f"{P}: attempt {k}: {line}")
    svg = job_dir / f"stragglers-attempt-{k}.svg"
    try:
        svg.write_text(chart_svg(history, title=f"ezpz launch attempt {k}: straggler heat map"), encoding="utf-8")
        err(f"{P}: attempt {k}: chart: {svg}")
    except OSError as error:
        err(f"{P}: attempt {k}: note: chart not written ({error})")


def supervise(args: argparse.Namespace, command: list[str], environ: Mapping[str, str],
              devices: Callable, describe: Callable[[LaunchPlan], None]) -> int:
    """Run ``command`` in attempts (see the module docstring); the last attempt's status (128 + N if signal N
    interrupted it: 130 for Ctrl-C, 143 for the scheduler's SIGTERM)."""
    launch_id = new_launch_id()
    job_dir = Path(args.job_dir) if args.job_dir else default_job_dir(launch_id)
    job_dir.mkdir(parents=True, exist_ok=True)
    job_dir = job_dir.resolve()
    timeout_s = args.timeout if args.timeout is not None else (AUTO_RETRY_TIMEOUT_S if args.auto_retry else None)
    pool: HostPool | None = None
    if args.auto_retry:
        hosts, source = _allocation_hosts(args, environ)
        wanted = active_hosts_wanted(args.nhosts, args.n, args.ppn)
        spares = None if args.spare_nodes in (None, "auto") else int(args.spare_nodes)
        pool = split_allocation(hosts, wanted, spares, source)
        err(f"{P}: auto-retry: active {', '.join(pool.active)}; spare {', '.join(pool.spares) or 'none'} "
            f"(from {source})")
    err(f"{P}: job directory {job_dir} (launch id {launch_id}); "
        f"{'default: ./ezpz-jobs/<id> under the current directory' if not args.job_dir else '--job-dir'}")
    limit = args.max_failover_retries if args.auto_retry else args.retries
    signatures = _signatures() if args.auto_retry else []
    sink = getattr(sys.stdout, "buffer", None)
    prior_progress: bool | None = None
    status = 1
    with Interrupts().installed() as stop:
        k = 0
        while True:
            adir = job_dir / f"attempt-{k}"
            fdir = adir / "failures"
            fdir.mkdir(parents=True, exist_ok=True)
            env = {**environ, MARKER: launch_id, LAUNCHER_PID_VAR: str(os.getpid()), "EZPZ_ATTEMPT": str(k),
                   "EZPZ_FAILURE_DIR": str(fdir)}
            hostfile = args.hostfile
            n, ppn = args.n, args.ppn
            if pool is not None:
                ppn = ppn or (max(1, (args.n or 0) // len(pool.active)) if args.n else None)
                if ppn is None:
                    ppn = devices().default_ppn[0]
                hostfile = _write_hostfile(adir / "hostfile", pool.active, ppn)
                n = n if n is not None else ppn * len(pool.active)
            plan = prepare(command, launcher=args.launcher, n=n, ppn=ppn, hostfile=hostfile, environ=env,
                           devices=devices)
            if k == 0:
                describe(plan)
            err(f"{P}: attempt {k}: running: {plan.command.shell()}")
            rank_hosts = _rank_hosts(plan)
            active = plan.layout.allocation.hosts[: plan.layout.nodes]
            names_host = (lambda: bool(records_name_hosts(read_failures_verbose(fdir)[0], rank_hosts, active))
                          ) if pool is not None else None
            follower = ReportFollower(fdir / REPORT_NAME, lambda line, k=k: err(f"{P}: attempt {k}: {line}"),
                                      replace_after=getattr(args, "replace_stragglers", None) if pool and k < limit else None,
                                      rank_hosts=rank_hosts, spares_left=len(pool.spares) if pool else 0)
            try:
                result = run_attempt(plan.command, attempt=k, launch_id=launch_id, environ=env, interrupts=stop,
                                     idle_timeout_s=timeout_s or None, grace_s=args.kill_after,
                                     log_path=adir / "output.log", sink=sink, failure_dir=fdir,
                                     failure_grace_s=args.failure_grace or None, names_host=names_host,
                                     watch=follower.poll)
            except OSError as error:
                err(f"{P}: error: cannot run {plan.command.argv[0]!r}: {error.strerror or error}. "
                    f"Fix: put it on PATH (load your MPI or Slurm module), or pick another with --launcher")
                return 127
            status = result.status
            records = read_failures(fdir)
            if result.timed_out:
                _say_timeout(result, records, rank_hosts, timeout_s or 0)
            if result.ended_on_named_host:
                err(f"{P}: attempt {k}: the ranks' failure records already name the host to exclude: attempt "
                    f"ended without waiting for the launcher")
            if result.ended_after_failure:
                err(f"{P}: attempt {k}: the launcher was still running {args.failure_grace:g} s after the first "
                    f"failure record (--failure-grace): job ended")
            follower.poll()
            _say_stragglers(follower, job_dir, k)
            if result.ended_by_watch and follower.replace is not None and not stop.stopped:
                verdict = follower.replace
            else:
                verdict = _judge(args, result, records, rank_hosts, plan, pool, signatures, prior_progress, k, limit)
            prior_progress = result.progress
            _say_verdict(k, verdict)
            (adir / "verdict.json").write_text(json.dumps(
                {"attempt": k, "status": result.status, "result": jsonable(result), "verdict": jsonable(verdict),
                 "hosts": list(plan.layout.allocation.hosts[: plan.layout.nodes]),
                 "records": [r.to_dict() for r in records]}, indent=1, default=str))
            if stop.stopped:
                err(f"{P}: interrupted: no more attempts (job directory {job_dir})")
                return 0 if result.status == 0 else 128 + stop.signum
            if not verdict.retry:
                return status
            if pool is not None and verdict.exclude:
                pool, swaps = pool.swap(verdict.exclude)
                for bad, spare in swaps:
                    err(f"{P}: attempt {k + 1}: excluding host {bad}, using spare {spare}")
            k += 1
            delay = backoff_s(k, args.retry_delay, BACKOFF_CAP_S)
            err(f"{P}: attempt {k} of at most {limit + 1} in {delay:g} s (exit status so far {status})")
            if not stop.sleep(delay):
                err(f"{P}: interrupted during the backoff: no more attempts")
                return 128 + stop.signum


def _judge(args: argparse.Namespace, result: AttemptResult, records: list, rank_hosts: dict[int, str],
           plan: LaunchPlan, pool: HostPool | None, signatures: list, prior_progress: bool | None, k: int,
           limit: int) -> Verdict:
    if pool is None:  # --retries: any failure runs again on the same hosts, up to the limit
        if result.status == 0:
            return Verdict(outcome="success", retry=False, reason="the job exited 0")
        if result.interrupted:
            return Verdict(outcome="interrupted", retry=False, reason="interrupted")
        if k >= limit:
            return Verdict(outcome="limit", retry=False, reason=f"exit {result.status}; --retries {limit} used")
        return Verdict(outcome="retry", retry=True, reason=f"exit {result.status}; --retries allows "
                                                           f"{limit - k} more")
    hosts = plan.layout.allocation.hosts[: plan.layout.nodes]
    text = _log_text(result.log) if result.status else ""
    facts = AttemptFacts(attempt=k, status=result.status, hosts=hosts, rank_hosts=rank_hosts, records=records,
                         timed_out=result.timed_out, interrupted=result.interrupted, progress=result.progress,
                         alive_ranks=result.alive_ranks, log_hits=log_hits(text, signatures, hosts),
                         first_failure=first_failure(text, hosts))
    return classify(facts, spares_left=len(pool.spares), prior_progress=prior_progress, attempts_left=limit - k)
