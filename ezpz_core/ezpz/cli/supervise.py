"""``ezpz launch --timeout/--retries/--auto-retry``: run the job in attempts, each watched, logged and judged.

Every attempt ``k`` (0, 1, ...) gets ``EZPZ_ATTEMPT=k`` and
``EZPZ_FAILURE_DIR=<job dir>/attempt-<k>/failures``, where its ranks write
failure records; its merged output is kept in ``attempt-<k>/output.log`` and
the verdict in ``attempt-<k>/verdict.json``. A job directory that cannot be
written (a read-only working directory) moves to its per-user fallback under
the temporary directory, with one warning (:mod:`ezpz.primitives.bookkeeping_dir`);
with nothing writable the attempts run without logs, records or verdicts, and
the exit status is the job's all the same. ``--retries N`` runs up to N more
attempts on the same hosts after any failure; ``--auto-retry`` asks the pure
policy :func:`ezpz.launch_drivers.retry.classify` and swaps bad hosts for spares;
with ``--min-nodes K``, once no spare is left, it drops them and runs on the
healthy hosts left (K or more), setting ``EZPZ_WORLD_SHRANK`` on that attempt
(``rt.explain()`` says the world shrank, from what to what, and why).
``--retries`` stops early when the failure cannot go away on the same hosts
(:func:`ezpz.launch_drivers.retry.same_hosts_cannot_succeed`). An exit 0 that the ranks' markers contradict is
``false_success`` (:mod:`ezpz.launch_drivers.false_success`): retried, else exit 1. Every stop after
a failure names the first cause (the first attempt's failure).
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
from typing import TYPE_CHECKING

from ezpz.cli._util import err, jsonable
from ezpz.errors import ConfigError
from ezpz.failures.rank_markers import read_markers
from ezpz.failures.record import read_failures, read_failures_verbose
from ezpz.launch_drivers import LaunchPlan, load, prepare, select
from ezpz.launch_drivers.allocation_split import HostPool, active_hosts_wanted, split_allocation
from ezpz.launch_drivers.attempt import AttemptResult, Interrupts, run_attempt
from ezpz.launch_drivers.false_success import judge_markers
from ezpz.launch_drivers.first_failure import first_failure
from ezpz.launch_drivers.layout import hostfile_allocation
from ezpz.launch_drivers.log_signatures import LAUNCHER_SIGNATURES
from ezpz.launch_drivers.marked import LAUNCHER_PID_VAR, MARKER
from ezpz.launch_drivers.retry import (AttemptFacts, Verdict, backoff_s, classify, log_hits, records_name_hosts,
                                       same_hosts_cannot_succeed)
from ezpz.launch_drivers.straggler_charts import chart_lines, chart_svg
from ezpz.launch_drivers.straggler_report import ReportFollower, summary_lines
from ezpz.primitives import bookkeeping_dir
from ezpz.steps.straggler_exchange import REPORT_NAME

if TYPE_CHECKING:
    from ezpz.failures.record import FailureRecord
    from ezpz.failures.signatures import FailureSignature
    from ezpz.launch_drivers.base import DeviceSlots

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


def _attempt_say(k: int) -> Callable[[str], None]:
    """Print a straggler-report line as attempt ``k``'s."""
    return lambda line: err(f"{P}: attempt {k}: {line}")


def _signatures() -> list[FailureSignature]:
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


def _say_timeout(result: AttemptResult, records: list[FailureRecord], rank_hosts: Mapping[int, str], timeout_s: float) -> None:
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


def _say_stragglers(follower: ReportFollower, job_dir: Path | None, k: int) -> None:
    """At an attempt's end: the last straggler report, the chart of the slowest ranks, ``stragglers-attempt-<k>.svg``."""
    data = follower.data
    if data is None:
        return
    history = follower.history()
    for line in summary_lines(data) + (chart_lines(history) if history is not None else []):
        err(f"{P}: attempt {k}: {line}")
    if job_dir is None:
        return
    svg = job_dir / f"stragglers-attempt-{k}.svg"
    try:
        svg.write_text(chart_svg(history, title=f"ezpz launch attempt {k}: straggler heat map"), encoding="utf-8")
        err(f"{P}: attempt {k}: chart: {svg}")
    except OSError as error:
        err(f"{P}: attempt {k}: note: chart not written ({error})")


def supervise(args: argparse.Namespace, command: list[str], environ: Mapping[str, str],
              devices: Callable[[], DeviceSlots], describe: Callable[[LaunchPlan], None]) -> int:
    """Run ``command`` in attempts (see the module docstring); the last attempt's status (128 + N if signal N
    interrupted it: 130 for Ctrl-C, 143 for the scheduler's SIGTERM)."""
    launch_id = new_launch_id()
    wanted_dir = Path(args.job_dir) if args.job_dir else default_job_dir(launch_id)
    job_dir = bookkeeping_dir.usable_dir(wanted_dir, what="ezpz launch job directory",
                                         fix="pass --job-dir DIR, a directory every node can reach and write")
    job_dir = job_dir.resolve() if job_dir is not None else None
    timeout_s = args.timeout if args.timeout is not None else (AUTO_RETRY_TIMEOUT_S if args.auto_retry else None)
    pool: HostPool | None = None
    min_nodes = getattr(args, "min_nodes", None)
    readmit = bool(getattr(args, "readmit", False))
    fixed_ppn: int | None = None
    if args.auto_retry:
        hosts, source = _allocation_hosts(args, environ)
        wanted = active_hosts_wanted(args.nhosts, args.n, args.ppn)
        spares = None if args.spare_nodes in (None, "auto") else int(args.spare_nodes)
        pool = split_allocation(hosts, wanted, spares, source)
        if min_nodes is not None and min_nodes > len(pool.active):
            raise ConfigError(name="--min-nodes", value=min_nodes,
                              expected=f"1 to the {len(pool.active)} active host(s) ({', '.join(pool.active)})",
                              fix=f"pass --min-nodes {len(pool.active)} or fewer: the job can only shrink from the "
                                  f"hosts it starts on")
        fixed_ppn = args.ppn or (max(1, args.n // len(pool.active)) if args.n else None)
        err(f"{P}: auto-retry: active {', '.join(pool.active)}; spare {', '.join(pool.spares) or 'none'} "
            f"(from {source})" + (f"; with no spare left, goes on with {min_nodes} host(s) or more (--min-nodes)"
                                  if min_nodes is not None else ""))
    if job_dir is None:
        if pool is not None:
            raise ConfigError(name="--job-dir", value=str(wanted_dir), expected="a directory this host can write "
                              "(--auto-retry keeps the hostfile and the failure records that blame hosts there)",
                              fix="pass --job-dir DIR, a directory every node can reach and write")
        err(f"{P}: no job directory (launch id {launch_id}): {wanted_dir} and its fallback cannot be written; "
            f"attempts run without output logs, failure records or verdicts")
    else:
        err(f"{P}: job directory {job_dir} (launch id {launch_id}); "
            f"{'default: ./ezpz-jobs/<id> under the current directory' if not args.job_dir else '--job-dir'}")
    limit = args.max_failover_retries if args.auto_retry else args.retries
    signatures = _signatures()
    sink = getattr(sys.stdout, "buffer", None)
    prior_progress: bool | None = None
    status = 1
    first_n: int | None = None  # the job's world size on its first attempt
    lost: dict[str, str] = {}  # host excluded -> why (attempt, first evidence)
    excluded_at: dict[str, int] = {}
    first_cause: str | None = None
    shrank: str | None = None
    dropped_all: tuple[str, ...] = ()
    ezpz_seen = False  # a rank of this launch wrote a marker: the command uses ezpz (docs/failures.md)
    with Interrupts().installed() as stop:
        k = 0
        while True:
            adir = (job_dir if job_dir is not None else wanted_dir) / f"attempt-{k}"
            fdir = adir / "failures"
            kept = job_dir is not None and _made(fdir)  # the attempt's folder exists: logs, records, verdict
            env = {**{n: v for n, v in environ.items() if n != "EZPZ_FAILURE_DIR"}, MARKER: launch_id,
                   LAUNCHER_PID_VAR: str(os.getpid()), "EZPZ_ATTEMPT": str(k)}
            if kept:
                env["EZPZ_FAILURE_DIR"] = str(fdir)
            hostfile = args.hostfile
            n, ppn = args.n, args.ppn
            if pool is not None:
                if readmit and k >= 2:
                    back = [h for h, at in excluded_at.items() if at <= k - 2 and h in pool.excluded]
                    if back:
                        pool = pool.readmit(back)
                        for h in back:
                            excluded_at.pop(h)
                        err(f"{P}: attempt {k}: --readmit: host(s) {', '.join(back)} sat out an attempt: spare(s) "
                            f"again")
                if fixed_ppn is None:
                    fixed_ppn = devices().default_ppn[0]
                ppn = fixed_ppn
                hostfile = _write_hostfile(adir / "hostfile", pool.active, ppn)
                n = ppn * len(pool.active) if n is None or shrank is not None else n
                if first_n is not None and n < first_n and shrank is not None:
                    env["EZPZ_WORLD_SHRANK"] = f"{first_n}->{n}: {shrank}"
            plan = prepare(command, launcher=args.launcher, n=n, ppn=ppn, hostfile=hostfile, environ=env,
                           devices=devices)
            if k == 0:
                describe(plan)
            err(f"{P}: attempt {k}: running: {plan.command.shell()}")
            rank_hosts = _rank_hosts(plan)
            if first_n is None:
                first_n = plan.layout.n
            active = plan.layout.allocation.hosts[: plan.layout.nodes]
            names_host = (lambda: bool(records_name_hosts(read_failures_verbose(fdir)[0], rank_hosts, active))
                          ) if pool is not None else None
            follower = ReportFollower(fdir / REPORT_NAME, _attempt_say(k),
                                      replace_after=getattr(args, "replace_stragglers", None) if pool and k < limit else None,
                                      rank_hosts=rank_hosts, spares_left=len(pool.spares) if pool else 0)
            try:
                result = run_attempt(plan.command, attempt=k, launch_id=launch_id, environ=env, interrupts=stop,
                                     idle_timeout_s=timeout_s or None, grace_s=args.kill_after,
                                     log_path=adir / "output.log" if kept else None, sink=sink,
                                     failure_dir=fdir if kept else None,
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
                verdict = _judge(args, result, records, rank_hosts, plan, pool, signatures, prior_progress, k, limit,
                                 lost)
            markers = read_markers(fdir)
            ezpz_seen = ezpz_seen or markers.any
            if verdict.outcome == "success":  # a launcher's exit 0 checked against the ranks' own markers
                verdict = judge_markers(markers, plan.layout.n, known_ezpz=ezpz_seen or bool(getattr(
                    args, "expect_ezpz", False)), attempts_left=limit - k, rank_hosts=rank_hosts,
                    spares_left=len(pool.spares) if pool else 0) or verdict
                status = 1 if verdict.outcome == "false_success" else status
            prior_progress = result.progress
            _say_verdict(k, verdict)
            if verdict.outcome != "success" and first_cause is None:
                first_cause = f"attempt {k}: {verdict.outcome}: {verdict.reason}"
            if kept:
                _write_verdict(adir / "verdict.json", {
                    "attempt": k, "status": result.status, "result": jsonable(result), "verdict": jsonable(verdict),
                    "hosts": list(plan.layout.allocation.hosts[: plan.layout.nodes]), "world_size": plan.layout.n,
                    "world_shrank": env.get("EZPZ_WORLD_SHRANK"), "first_cause": first_cause,
                    "records": [r.to_dict() for r in records]})
            if stop.stopped:
                err(f"{P}: interrupted: no more attempts (job directory {job_dir})")
                _say_first_cause(first_cause, k)
                return 0 if result.status == 0 else 128 + stop.signum
            if not verdict.retry:
                if status:
                    _say_first_cause(first_cause, k)
                return status
            if pool is not None and verdict.exclude:
                for h in verdict.exclude:
                    why = next((e for e in verdict.evidence if h in e), verdict.reason)
                    lost.setdefault(h, f"attempt {k}: {why}")
                    excluded_at[h] = k
                before = len(pool.active)
                if verdict.outcome == "shrink":
                    pool, swaps, dropped = pool.shrink(verdict.exclude, min_nodes or 1)
                    dropped_all += dropped
                    shrank = "; ".join(f"host {h} excluded ({lost[h]})" for h in dropped_all) + (
                        f"; no spare left; --min-nodes {min_nodes}")
                else:
                    pool, swaps = pool.swap(verdict.exclude)
                    dropped = ()
                for bad, spare in swaps:
                    err(f"{P}: attempt {k + 1}: excluding host {bad}, using spare {spare}")
                if dropped:
                    err(f"{P}: attempt {k + 1}: world shrinks from {before} to {len(pool.active)} host(s) "
                        f"({(first_n or 0)} -> {fixed_ppn * len(pool.active) if fixed_ppn else '?'} ranks, "
                        f"{fixed_ppn} per host): {shrank}; the job resumes from its last complete checkpoint")
            k += 1
            delay = backoff_s(k, args.retry_delay, BACKOFF_CAP_S)
            err(f"{P}: attempt {k} of at most {limit + 1} in {delay:g} s (exit status so far {status})")
            if not stop.sleep(delay):
                err(f"{P}: interrupted during the backoff: no more attempts")
                _say_first_cause(first_cause, k)
                return 128 + stop.signum


def _made(folder: Path) -> bool:
    """Create an attempt's folder inside the (writable) job directory; False, said once, on a full disk."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        bookkeeping_dir.write_failed(folder, what="attempt folder", error=error)
        return False
    return True


def _write_verdict(path: Path, verdict: Mapping[str, object]) -> None:
    """``attempt-<k>/verdict.json``; a failure to write it (a full disk) is said once, never raised."""
    try:
        path.write_text(json.dumps(verdict, indent=1, default=str))
    except OSError as error:
        bookkeeping_dir.write_failed(path, what="attempt verdict", error=error)


def _say_first_cause(first_cause: str | None, k: int) -> None:
    if first_cause is not None and k > 0:
        err(f"{P}: first cause: {first_cause}")


def _judge(args: argparse.Namespace, result: AttemptResult, records: list[FailureRecord], rank_hosts: dict[int, str],
           plan: LaunchPlan, pool: HostPool | None, signatures: list[FailureSignature], prior_progress: bool | None, k: int,
           limit: int, lost: dict[str, str] | None = None) -> Verdict:
    if pool is None:  # --retries: a failure runs again on the same hosts, up to the limit, unless it cannot succeed
        if result.status == 0:
            return Verdict(outcome="success", retry=False, reason="the job exited 0")
        if result.interrupted:
            return Verdict(outcome="interrupted", retry=False, reason="interrupted")
        hosts = plan.layout.allocation.hosts[: plan.layout.nodes]
        text = _log_text(result.log)
        facts = AttemptFacts(attempt=k, status=result.status, hosts=hosts, rank_hosts=rank_hosts, records=records,
                             timed_out=result.timed_out, progress=result.progress,
                             log_hits=log_hits(text, signatures, hosts))
        hopeless = same_hosts_cannot_succeed(facts)
        if hopeless is not None:
            return hopeless
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
    return classify(facts, spares_left=len(pool.spares), prior_progress=prior_progress, attempts_left=limit - k,
                    min_hosts=getattr(args, "min_nodes", None), lost_before=lost)
