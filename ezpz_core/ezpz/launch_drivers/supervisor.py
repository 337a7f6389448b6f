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

:class:`SupervisionOptions` holds the flags, each under its flag's name (``--min-nodes`` is ``min_nodes``);
:class:`Supervisor` runs the loop, and what changes from one attempt to the next is its fields. The command
line (:mod:`ezpz.cli.supervise`) parses, builds both and calls :meth:`Supervisor.run`; what is said to the user
goes through the ``say`` it hands in (the library prints nothing itself).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

import attrs

from ezpz.errors import ConfigError
from ezpz.failures.rank_markers import Markers, read_markers
from ezpz.failures.record import FailureRecord, read_failures, read_failures_verbose
from ezpz.failures.signatures import FailureSignature
from ezpz.launch_drivers import DeviceSlots, LaunchPlan, load, prepare, select
from ezpz.launch_drivers.allocation_split import HostPool, active_hosts_wanted, split_allocation
from ezpz.launch_drivers.attempt import AttemptResult, Interrupts, run_attempt
from ezpz.launch_drivers.false_success import judge_markers
from ezpz.launch_drivers.first_failure import first_failure
from ezpz.launch_drivers.host_channels import daemon_failed
from ezpz.launch_drivers.launcher_node import launcher_nodes
from ezpz.launch_drivers.layout import hostfile_allocation
from ezpz.launch_drivers.marked import launch_markers
from ezpz.launch_drivers.retry import (AttemptFacts, Verdict, backoff_s, classify, log_hits, records_name_hosts,
                                       same_hosts_cannot_succeed)
from ezpz.launch_drivers.straggler_charts import chart_lines, chart_svg
from ezpz.launch_drivers.straggler_report import ReportFollower, summary_lines
from ezpz.primitives import bookkeeping_dir
from ezpz.primitives.frozen_records import frozen
from ezpz.primitives.json_values import jsonable
from ezpz.probes.own_addresses import own_addresses
from ezpz.steps.straggler_exchange import REPORT_NAME

__all__ = ["AUTO_RETRY_TIMEOUT_S", "BACKOFF_CAP_S", "SupervisionOptions", "Supervisor", "default_job_dir",
           "new_launch_id"]

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


@frozen(kw_only=True)
class SupervisionOptions:
    """The ``ezpz launch`` flags the attempt loop reads, each named as its flag (``--min-nodes`` -> ``min_nodes``)."""

    launcher: str | None = None
    n: int | None = None
    ppn: int | None = None
    hostfile: str | None = None
    timeout: float | None = None
    kill_after: float = 10.0
    failure_grace: float = 15.0
    retries: int = 0
    retry_delay: float = 5.0
    auto_retry: bool = False
    nhosts: int | None = None
    spare_nodes: str | None = None
    replace_stragglers: int | None = None
    min_nodes: int | None = None
    readmit: bool = False
    max_failover_retries: int = 10
    expect_ezpz: bool = False
    job_dir: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SupervisionOptions:
        """The options from parsed flags: every field read from the attribute of the same name."""
        return cls(**{f.name: getattr(args, f.name) for f in attrs.fields(cls)})

    @property
    def timeout_s(self) -> float | None:
        """The idle timeout in force: ``--timeout``, else :data:`AUTO_RETRY_TIMEOUT_S` under ``--auto-retry``."""
        if self.timeout is not None:
            return self.timeout
        return AUTO_RETRY_TIMEOUT_S if self.auto_retry else None

    @property
    def limit(self) -> int:
        """How many attempts may follow the first: ``--max-failover-retries`` or ``--retries``."""
        return self.max_failover_retries if self.auto_retry else self.retries


class Supervisor:
    """One supervised ``ezpz launch``: :meth:`run` runs the attempts; its fields are what changes between them."""

    def __init__(self, options: SupervisionOptions, command: Sequence[str], environ: Mapping[str, str], *,
                 devices: Callable[[], DeviceSlots], describe: Callable[[LaunchPlan], None],
                 signatures: Sequence[FailureSignature], say: Callable[[str], None],
                 sink: IO[bytes] | None = None) -> None:
        self.options, self.command, self.environ = options, list(command), environ
        self.devices, self.describe, self.signatures, self.say = devices, describe, list(signatures), say
        self.sink = sink if sink is not None else getattr(sys.stdout, "buffer", None)
        self.launch_id = new_launch_id()
        self.wanted_dir = Path(options.job_dir) if options.job_dir else default_job_dir(self.launch_id)
        self.job_dir: Path | None = None  # the job directory in use (wanted_dir or its fallback); None: none writable
        self.pool: HostPool | None = None  # --auto-retry: active hosts, spares, excluded
        self.fixed_ppn: int | None = None  # --auto-retry: processes per host, the same on every attempt
        self.attempt = 0
        self.status = 1
        self.prior_progress: bool | None = None  # whether the previous attempt made progress
        self.first_n: int | None = None  # the job's world size on its first attempt
        self.lost: dict[str, str] = {}  # host excluded -> why (attempt, first evidence)
        self.excluded_at: dict[str, int] = {}  # host -> the attempt that excluded it (for --readmit)
        self.first_cause: str | None = None
        self.shrank: str | None = None  # why the world is smaller than it began (--min-nodes), once it is
        self.dropped_all: tuple[str, ...] = ()
        self.ezpz_seen = False  # a rank of this launch wrote a marker: the command uses ezpz (docs/failures.md)

    # -- the loop ------------------------------------------------------------------------------------------------
    def run(self) -> int:
        """Run the attempts; the last attempt's status (128 + N if signal N interrupted it: 130 for Ctrl-C, 143 for
        the scheduler's SIGTERM; 127 when the launcher cannot be started)."""
        job_dir = bookkeeping_dir.usable_dir(self.wanted_dir, what="ezpz launch job directory",
                                             fix="pass --job-dir DIR, a directory every node can reach and write")
        self.job_dir = job_dir.resolve() if job_dir is not None else None
        if self.options.auto_retry:
            self._split_allocation()
        if self.job_dir is None:
            if self.pool is not None:
                raise ConfigError(name="--job-dir", value=str(self.wanted_dir), expected="a directory this host can "
                                  "write (--auto-retry keeps the hostfile and the failure records that blame hosts "
                                  "there)", fix="pass --job-dir DIR, a directory every node can reach and write")
            self.say(f"{P}: no job directory (launch id {self.launch_id}): {self.wanted_dir} and its fallback cannot "
                     "be written; attempts run without output logs, failure records or verdicts")
        else:
            self.say(f"{P}: job directory {self.job_dir} (launch id {self.launch_id}); "
                     f"{'--job-dir' if self.options.job_dir else 'default: ./ezpz-jobs/<id> under the current directory'}")
        with Interrupts().installed() as stop:
            while True:
                ended = self._one_attempt(stop)
                if ended is not None:
                    return ended
                self.attempt += 1
                k = self.attempt
                delay = backoff_s(k, self.options.retry_delay, BACKOFF_CAP_S)
                self.say(f"{P}: attempt {k} of at most {self.options.limit + 1} in {delay:g} s "
                         f"(exit status so far {self.status})")
                if not stop.sleep(delay):
                    self.say(f"{P}: interrupted during the backoff: no more attempts")
                    self._say_first_cause()
                    return 128 + stop.signum

    def _split_allocation(self) -> None:
        o = self.options
        hosts, source = self._allocation_hosts()
        wanted = active_hosts_wanted(o.nhosts, o.n, o.ppn)
        spares = None if o.spare_nodes in (None, "auto") else int(o.spare_nodes)
        pool = self.pool = split_allocation(hosts, wanted, spares, source)
        if o.min_nodes is not None and o.min_nodes > len(pool.active):
            raise ConfigError(name="--min-nodes", value=o.min_nodes,
                              expected=f"1 to the {len(pool.active)} active host(s) ({', '.join(pool.active)})",
                              fix=f"pass --min-nodes {len(pool.active)} or fewer: the job can only shrink from the "
                                  f"hosts it starts on")
        self.fixed_ppn = o.ppn or (max(1, o.n // len(pool.active)) if o.n else None)
        self.say(f"{P}: auto-retry: active {', '.join(pool.active)}; spare {', '.join(pool.spares) or 'none'} "
                 f"(from {source})" + (f"; with no spare left, goes on with {o.min_nodes} host(s) or more "
                                       "(--min-nodes)" if o.min_nodes is not None else ""))

    def _allocation_hosts(self) -> tuple[tuple[str, ...], str]:
        o = self.options
        if o.hostfile:
            alloc = hostfile_allocation(o.hostfile)
        else:
            driver = load(o.launcher) if o.launcher else select(self.environ)[1]
            alloc = driver.allocation(self.environ)
        if not alloc.hosts:
            raise ConfigError(name="--auto-retry", value="", expected="an allocation of several hosts (Slurm, PBS, "
                              "or --hostfile) to split into active hosts and spares",
                              fix="run inside a Slurm/PBS job, or pass --hostfile; on one machine use --retries")
        return alloc.hosts, alloc.source

    def _one_attempt(self, stop: Interrupts) -> int | None:
        """Run attempt ``self.attempt``, judge it, and get the next one ready; the final status, or None to go on."""
        o, k = self.options, self.attempt
        adir = (self.job_dir if self.job_dir is not None else self.wanted_dir) / f"attempt-{k}"
        fdir = adir / "failures"
        kept = self.job_dir is not None and _made(fdir)  # the attempt's folder exists: logs, records, verdict
        env = {**{n: v for n, v in self.environ.items() if n != "EZPZ_FAILURE_DIR"},
               **launch_markers(self.launch_id, self.environ), "EZPZ_ATTEMPT": str(k)}
        if kept:
            env["EZPZ_FAILURE_DIR"] = str(fdir)
        hostfile, n, ppn = self._layout(adir, env)
        plan = prepare(self.command, launcher=o.launcher, n=n, ppn=ppn, hostfile=hostfile, environ=env,
                       devices=self.devices)
        if k == 0:
            self.describe(plan)
        self.say(f"{P}: attempt {k}: running: {plan.command.shell()}")
        rank_hosts = _rank_hosts(plan)
        if self.first_n is None:
            self.first_n = plan.layout.n
        active = plan.layout.allocation.hosts[: plan.layout.nodes]
        names_host = (lambda: bool(records_name_hosts(read_failures_verbose(fdir)[0], rank_hosts, active))
                      ) if self.pool is not None else None
        follower = ReportFollower(fdir / REPORT_NAME, lambda line: self.say(f"{P}: attempt {k}: {line}"),
                                  replace_after=o.replace_stragglers if self.pool and k < o.limit else None,
                                  rank_hosts=rank_hosts, spares_left=len(self.pool.spares) if self.pool else 0)
        try:
            result = run_attempt(plan.command, attempt=k, launch_id=self.launch_id, environ=env, interrupts=stop,
                                 idle_timeout_s=o.timeout_s or None, grace_s=o.kill_after,
                                 log_path=adir / "output.log" if kept else None, sink=self.sink,
                                 failure_dir=fdir if kept else None,
                                 failure_grace_s=o.failure_grace or None, names_host=names_host,
                                 watch=follower.poll,
                                 channel_hosts=active if self.pool is not None and kept else None,
                                 channel_here=launcher_nodes(active, socket.gethostname(), own_addresses())
                                 if self.pool is not None and kept else ())
        except OSError as error:
            self.say(f"{P}: error: cannot run {plan.command.argv[0]!r}: {error.strerror or error}. "
                     f"Fix: put it on PATH (load your MPI or Slurm module), or pick another with --launcher")
            return 127
        self.status = result.status
        records = read_failures(fdir)
        self._say_how_it_ended(result, records, rank_hosts, follower)
        markers = read_markers(fdir)
        if result.ended_by_watch and follower.replace is not None and not stop.stopped:
            verdict = follower.replace
        else:
            verdict = self._judge(result, records, rank_hosts, plan, markers)
        self.ezpz_seen = self.ezpz_seen or markers.any
        if verdict.outcome == "success":  # a launcher's exit 0 checked against the ranks' own markers
            verdict = judge_markers(markers, plan.layout.n, known_ezpz=self.ezpz_seen or o.expect_ezpz,
                                    attempts_left=o.limit - k, rank_hosts=rank_hosts,
                                    spares_left=len(self.pool.spares) if self.pool else 0,
                                    launcher_host=socket.gethostname()) or verdict
            self.status = 1 if verdict.outcome == "false_success" else self.status
        self.prior_progress = result.progress
        self._say_verdict(verdict)
        if verdict.outcome != "success" and self.first_cause is None:
            self.first_cause = f"attempt {k}: {verdict.outcome}: {verdict.reason}"
        if kept:
            _write_verdict(adir / "verdict.json", {
                "attempt": k, "status": result.status, "result": jsonable(result), "verdict": jsonable(verdict),
                "hosts": list(plan.layout.allocation.hosts[: plan.layout.nodes]), "world_size": plan.layout.n,
                "world_shrank": env.get("EZPZ_WORLD_SHRANK"), "first_cause": self.first_cause,
                "records": [r.to_dict() for r in records]})
        if stop.stopped:
            self.say(f"{P}: interrupted: no more attempts (job directory {self.job_dir})")
            self._say_first_cause()
            return 0 if result.status == 0 else 128 + stop.signum
        if not verdict.retry:
            if self.status:
                self._say_first_cause()
            return self.status
        if self.pool is not None and verdict.exclude:
            self._exclude(verdict)
        return None

    def _layout(self, adir: Path, env: dict[str, str]) -> tuple[str | None, int | None, int | None]:
        """``(hostfile, n, ppn)`` for this attempt: the flags', or under ``--auto-retry`` the pool's active hosts
        (after ``--readmit`` takes back hosts that sat out an attempt); sets ``EZPZ_WORLD_SHRANK`` in ``env``."""
        o, k, pool = self.options, self.attempt, self.pool
        if pool is None:
            return o.hostfile, o.n, o.ppn
        if o.readmit and k >= 2:
            back = [h for h, at in self.excluded_at.items() if at <= k - 2 and h in pool.excluded]
            if back:
                pool = self.pool = pool.readmit(back)
                for h in back:
                    self.excluded_at.pop(h)
                self.say(f"{P}: attempt {k}: --readmit: host(s) {', '.join(back)} sat out an attempt: spare(s) again")
        if self.fixed_ppn is None:
            self.fixed_ppn = self.devices().default_ppn[0]
        ppn = self.fixed_ppn
        hostfile = _write_hostfile(adir / "hostfile", pool.active, ppn)
        n = ppn * len(pool.active) if o.n is None or self.shrank is not None else o.n
        if self.first_n is not None and n < self.first_n and self.shrank is not None:
            env["EZPZ_WORLD_SHRANK"] = f"{self.first_n}->{n}: {self.shrank}"
        return hostfile, n, ppn

    def _exclude(self, verdict: Verdict) -> None:
        """Take the hosts ``verdict`` blames out of the pool: swapped for spares, or (``--min-nodes``) dropped."""
        pool, k, min_nodes = self.pool, self.attempt, self.options.min_nodes
        assert pool is not None  # only under --auto-retry
        for h in verdict.exclude:
            why = next((e for e in verdict.evidence if h in e), verdict.reason)
            self.lost.setdefault(h, f"attempt {k}: {why}")
            self.excluded_at[h] = k
        before = len(pool.active)
        dropped: tuple[str, ...] = ()
        if verdict.outcome == "shrink":
            pool, swaps, dropped = pool.shrink(verdict.exclude, min_nodes or 1)
            self.dropped_all += dropped
            self.shrank = "; ".join(f"host {h} excluded ({self.lost[h]})" for h in self.dropped_all) + (
                f"; no spare left; --min-nodes {min_nodes}")
        else:
            pool, swaps = pool.swap(verdict.exclude)
        self.pool = pool
        for bad, spare in swaps:
            self.say(f"{P}: attempt {k + 1}: excluding host {bad}, using spare {spare}")
        if dropped:
            ppn = self.fixed_ppn
            self.say(f"{P}: attempt {k + 1}: world shrinks from {before} to {len(pool.active)} host(s) "
                     f"({(self.first_n or 0)} -> {ppn * len(pool.active) if ppn else '?'} ranks, "
                     f"{ppn} per host): {self.shrank}; the job resumes from its last complete checkpoint")

    def _judge(self, result: AttemptResult, records: list[FailureRecord], rank_hosts: dict[int, str],
               plan: LaunchPlan, markers: Markers) -> Verdict:
        k, limit, pool = self.attempt, self.options.limit, self.pool
        hosts = plan.layout.allocation.hosts[: plan.layout.nodes]
        if pool is None:  # --retries: a failure runs again on the same hosts, up to the limit, unless it cannot succeed
            if result.status == 0:
                return Verdict(outcome="success", retry=False, reason="the job exited 0")
            if result.interrupted:
                return Verdict(outcome="interrupted", retry=False, reason="interrupted")
            facts = AttemptFacts(attempt=k, status=result.status, hosts=hosts, rank_hosts=rank_hosts, records=records,
                                 timed_out=result.timed_out, progress=result.progress,
                                 log_hits=log_hits(_log_text(result.log), self.signatures, hosts))
            hopeless = same_hosts_cannot_succeed(facts)
            if hopeless is not None:
                return hopeless
            if k >= limit:
                return Verdict(outcome="limit", retry=False, reason=f"exit {result.status}; --retries {limit} used")
            return Verdict(outcome="retry", retry=True, reason=f"exit {result.status}; --retries allows "
                                                               f"{limit - k} more")
        text = _log_text(result.log) if result.status else ""
        daemon = daemon_failed(text) is not None  # the connections are evidence only under this line
        facts = AttemptFacts(attempt=k, status=result.status, hosts=hosts, rank_hosts=rank_hosts, records=records,
                             timed_out=result.timed_out, interrupted=result.interrupted, progress=result.progress,
                             alive_ranks=result.alive_ranks, log_hits=log_hits(text, self.signatures, hosts),
                             first_failure=first_failure(text, hosts), markers=markers,
                             lost_channel=result.lost_channel if daemon else None,
                             channel_note=result.channel_note if daemon else "",
                             unseen_hosts=result.unseen_hosts if daemon else (),
                             launcher_here=result.channel_here, channels_settled=result.channels_settled)
        return classify(facts, spares_left=len(pool.spares), prior_progress=self.prior_progress,
                        attempts_left=limit - k, min_nodes=self.options.min_nodes, lost_before=self.lost)

    # -- what the user is told -----------------------------------------------------------------------------------
    def _say_how_it_ended(self, result: AttemptResult, records: list[FailureRecord], rank_hosts: Mapping[int, str],
                          follower: ReportFollower) -> None:
        k, say = self.attempt, self.say
        if result.timed_out:
            timeout_s = self.options.timeout_s or 0
            say(f"{P}: attempt {k}: no output for {result.idle_s:.0f} s (--timeout {timeout_s:g}): job ended, exit 124")
            if result.alive_ranks:
                named = ", ".join(f"{r} (host {rank_hosts.get(r, '?')})" for r in result.alive_ranks)
                say(f"{P}: attempt {k}: silent rank(s) still running here: {named}")
            for rec in records:
                missing = f"; missing ranks {list(rec.missing_ranks)}" if rec.missing_ranks else ""
                say(f"{P}: attempt {k}: rank {rec.rank} (host {rec.host}) recorded {rec.kind}{missing}")
            if not result.alive_ranks and not records:
                say(f"{P}: attempt {k}: no rank here was still running and none wrote a record: "
                    f"the silent ranks are on other hosts")
        if result.ended_on_named_host:
            say(f"{P}: attempt {k}: the ranks' failure records already name the host to exclude: attempt "
                f"ended without waiting for the launcher")
        if result.ended_after_failure:
            say(f"{P}: attempt {k}: the launcher was still running {self.options.failure_grace:g} s after the first "
                f"failure record (--failure-grace): job ended")
        follower.poll()
        self._say_stragglers(follower)

    def _say_stragglers(self, follower: ReportFollower) -> None:
        """The last straggler report, the chart of the slowest ranks, ``stragglers-attempt-<k>.svg``."""
        data, k = follower.data, self.attempt
        if data is None:
            return
        history = follower.history()
        for line in summary_lines(data) + (chart_lines(history) if history is not None else []):
            self.say(f"{P}: attempt {k}: {line}")
        if self.job_dir is None:
            return
        svg = self.job_dir / f"stragglers-attempt-{k}.svg"
        try:
            svg.write_text(chart_svg(history, title=f"ezpz launch attempt {k}: straggler heat map"), encoding="utf-8")
            self.say(f"{P}: attempt {k}: chart: {svg}")
        except OSError as error:
            self.say(f"{P}: attempt {k}: note: chart not written ({error})")

    def _say_verdict(self, verdict: Verdict) -> None:
        self.say(f"{P}: attempt {self.attempt}: {verdict.outcome}: {verdict.reason}")
        for e in verdict.evidence:
            self.say(f"{P}:   evidence: {e}")

    def _say_first_cause(self) -> None:
        if self.first_cause is not None and self.attempt > 0:
            self.say(f"{P}: first cause: {self.first_cause}")


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


def _log_text(path: Path | None) -> str:
    """The last 4 MiB of an attempt's log (where the launcher's and the ranks' last words are)."""
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
