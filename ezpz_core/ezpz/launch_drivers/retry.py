"""What to do after an attempt: a pure policy over what the attempt left behind, with its reason.

The facts are the attempt's status, whether the idle-output watchdog ended
it, the failure records its ranks wrote (:mod:`ezpz.failures.record`), the
ranks still running when it went silent, which rank ran on which host, the
launcher's line naming the first rank to fail
(:mod:`ezpz.launch_drivers.first_failure`), and (only for ranks killed without
a chance to write) failure signatures found in its log; when none of these names a host, the ranks' own markers
(:mod:`ezpz.failures.rank_markers`: the one host whose ranks started and then stopped reporting while every other
rank ended or wrote a record) and the launcher's connection to a host that ended first
(:mod:`ezpz.launch_drivers.host_channels`). :func:`classify` answers with a :class:`Verdict`: the outcome, whether
to retry, the hosts to exclude, the evidence, and each rejected alternative.

Termination matrix (first row that applies wins):

====================  ====================================================  ===========================
outcome               when                                                  then
====================  ====================================================  ===========================
success               status 0                                              stop, 0
preempted             ranks recorded ``preempted`` (SIGTERM, stopped at an   stop if ``ezpz launch`` got the
                      agreed step), none a code error, no host named        signal too, else retry, same hosts
interrupted           SIGINT/SIGTERM/SIGHUP reached ``ezpz launch``         stop at once
code_error            a rank recorded ``code_error`` (or ``oom``), or (no    stop: it fails on any host
                      records) the log holds a ``code_error`` signature
                      (a SyntaxError/ImportError/NameError traceback)
launcher_config       a rank recorded ``launcher_config``, or (no records)  stop, naming the fix: the
                      the log holds a ``launcher_config`` signature (Open    launcher cannot start the job
                      MPI's missing rsh agent, exit 243)                    on any host as configured
bad_host              records name hosts (missing ranks, a hang roll call), or the launcher   exclude, swap in spares
                      names the first rank to fail on a host that left no
                      record (accusations against other silent hosts are
                      then its abort's doing; so are up hosts that only
                      accuse each other), or the one host whose ranks
                      all vanished while every other host wrote a record,
                      or (no records) a log signature, or (nothing else)
                      the one host whose ranks started and stopped
                      reporting (markers), or whose launcher connection
                      ended first; enough spares left
shrink                bad hosts named, too few spares, and with             exclude, swap in the spares
                      ``--min-nodes K`` (``min_nodes``) K or more healthy   left, run on fewer hosts
                      hosts remain
exhausted             bad hosts named, too few spares (and below K)         stop, naming every host lost
walltime              status 143 (SIGTERM from the scheduler), no evidence  stop
                      (a PALS "rank N exited with code K", K > 0, is
                      evidence: that 143 is PALS ending the job)
stuck                 this and the previous attempt never reached a step    stop
hang                  the watchdog ended it, no host named                  retry on the same hosts
unknown               failed, nothing names a host                          retry on the same hosts
limit                 ``--max-failover-retries`` attempts used              stop
false_success         status 0, but the ranks' markers say some never       retry; exit 1 when final
                      started or never ended (checked after this policy,
                      :mod:`ezpz.launch_drivers.false_success`)
====================  ====================================================  ===========================
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from attrs import field

from ezpz.failures.rank_markers import Markers
from ezpz.failures.record import FailureRecord
from ezpz.failures.signatures import FailureSignature
from ezpz.primitives.converters import as_dict, as_tuple
from ezpz.primitives.frozen_records import frozen
from ezpz.launch_drivers.first_failure import FirstFailure
from ezpz.launch_drivers.host_channels import LostChannel

__all__ = ["OUTCOMES", "AttemptFacts", "LogHit", "Verdict", "backoff_s", "classify", "log_hits", "records_name_hosts",
           "same_hosts_cannot_succeed"]

OUTCOMES = ("success", "preempted", "interrupted", "code_error", "launcher_config", "bad_host", "shrink", "exhausted",
            "walltime", "stuck", "hang", "unknown", "limit", "false_success")
WALLTIME_STATUS = 143


@frozen(kw_only=True)
class LogHit:
    """A failure signature found in an attempt's log, and the active hosts named on that line."""

    line: str
    kind: str
    reason: str
    blames_host: bool
    hosts: tuple[str, ...] = field(default=(), converter=as_tuple)


@frozen(kw_only=True)
class AttemptFacts:
    """Everything :func:`classify` may look at about one finished attempt."""

    attempt: int
    status: int
    hosts: tuple[str, ...] = field(converter=as_tuple)
    rank_hosts: Mapping[int, str] = field(factory=dict, converter=as_dict, hash=False)
    records: tuple[FailureRecord, ...] = field(default=(), converter=as_tuple)
    timed_out: bool = False
    interrupted: bool = False
    progress: bool = True
    alive_ranks: tuple[int, ...] = field(default=(), converter=as_tuple)
    log_hits: tuple[LogHit, ...] = field(default=(), converter=as_tuple)
    first_failure: FirstFailure | None = None
    markers: Markers | None = None
    """The ranks' ``started``/``ended`` markers (None: not read)."""
    lost_channel: LostChannel | None = None
    """The launcher's connection to a host that ended first, before any rank recorded or exited."""
    channel_note: str = ""
    """Why a connection that ended was not taken as the cause (said as evidence set aside)."""
    unseen_hosts: tuple[str, ...] = field(default=(), converter=as_tuple)
    """The remote hosts whose launcher connection was never seen (given only when a daemon failed)."""
    launcher_here: tuple[str, ...] = field(default=(), converter=as_tuple)
    """The hosts that are the launcher's own node (no daemon, no connection); empty: not known."""
    channels_settled: bool = False
    """The watcher's last look before the first connection ended found every connection it knew up and none new:
    a healthy host's connection (up from the start to the launcher's teardown) would have been seen."""


@frozen(kw_only=True)
class Verdict:
    """The outcome, whether to run again, the hosts to exclude and why (``evidence``), and what was rejected."""

    outcome: str
    retry: bool
    reason: str
    exclude: tuple[str, ...] = field(default=(), converter=as_tuple)
    evidence: tuple[str, ...] = field(default=(), converter=as_tuple)
    rejected: tuple[tuple[str, str], ...] = field(default=(), converter=as_tuple)


def backoff_s(retry: int, base_s: float, cap_s: float = 60.0) -> float:
    """Delay before retry number ``retry`` (1, 2, ...): ``base_s``, doubled each time, at most ``cap_s``."""
    return min(cap_s, base_s * 2 ** max(0, retry - 1))


def log_hits(text: str, signatures: Sequence[FailureSignature], hosts: Sequence[str]) -> tuple[LogHit, ...]:
    """Each line of ``text`` that matches a signature (first match per line), with the active hosts it names.

    The hosts named inside the signature's match are the ones it points at (gloo's ``Connection closed by peer
    [HOST]:PORT`` on a line that also names the rank's own host and others); only when the match names none
    (Cray PALS puts the host at the start of the line) do the hosts named elsewhere on the line count.
    """
    compiled = [(s, re.compile(s.pattern, re.IGNORECASE)) for s in signatures]
    named = [(h, re.compile(rf"(?<![\w.-]){re.escape(h)}(?![\w-])")) for h in hosts]  # host.fqdn counts
    found = []
    for line in text.splitlines():
        for sig, rx in compiled:
            match = rx.search(line)
            if match:
                inside = tuple(h for h, hx in named if hx.search(match.group(0)))
                found.append(LogHit(line=line.strip()[:300], kind=sig.kind, reason=sig.reason,
                                    blames_host=sig.blames_host,
                                    hosts=inside or tuple(h for h, hx in named if hx.search(line))))
                break
    return tuple(found)


def _said(r: FailureRecord) -> str:
    """The record's first line, led by its exception type unless the line already starts with it."""
    if r.exception_type and not r.first_line.startswith(r.exception_type):
        return f"{r.exception_type}: {r.first_line}"
    return r.first_line


def _host(facts: AttemptFacts, rank: int) -> str | None:
    return facts.rank_hosts.get(rank)


def _blame(facts: AttemptFacts) -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    """Hosts the evidence names, each with why; and the evidence looked at and set aside."""
    blamed: dict[str, list[str]] = {}
    accusers: dict[str, set[str]] = {}  # host -> the hosts whose ranks named it
    set_aside: list[tuple[str, str]] = []
    active = set(facts.hosts)
    peers = [r for r in facts.records if r.kind in ("lost_peer", "timeout", "hang")]
    wrote = {_host(facts, r.rank) or r.host for r in facts.records}
    origin = facts.first_failure
    if origin is not None and (origin.host not in active or origin.host in wrote):
        set_aside.append(("launcher", f"{origin.line!r} names host {origin.host}, but "
                                      + ("it is not an active host" if origin.host not in active else
                                         "its ranks wrote records, which decide")))
        origin = None

    def ended_by_abort(r: FailureRecord, h: str) -> bool:
        """Whether accusing ``h`` is a consequence of the launcher ending the job after ``origin`` failed."""
        if origin is None or h == origin.host or h in wrote:
            return False
        first = f"rank {origin.rank} on host {origin.host}" if origin.rank is not None else f"host {origin.host}"
        set_aside.append(("lost_peer", f"rank {r.rank} recorded losing host {h}, but the launcher reports {first} failed "
                                       f"first and host {h}'s ranks left no record: the launcher's abort ended them"))
        return True

    # a peer told to stop (SIGTERM, by the launcher reacting to another rank) before this rank lost it is a
    # consequence of the failure, not its cause
    stopped = {r.rank: r.time for r in facts.records if r.kind in ("signal", "preempted")}
    for r in peers:
        where = _host(facts, r.rank) or r.host
        for m in r.missing_ranks:
            h = _host(facts, m)
            if m in stopped and stopped[m] <= r.time:
                set_aside.append(("lost_peer", f"rank {r.rank} lost rank {m}, but rank {m} had recorded a stop "
                                               f"signal first: the launcher was already ending the job"))
            elif h is not None and h != where and not ended_by_abort(r, h):
                accusers.setdefault(h, set()).add(where)
                blamed.setdefault(h, []).append(
                    f"rank {r.rank} (host {where}) recorded {r.kind}: rank {m} (host {h}) did not answer")
        for h in r.missing_hosts:
            on_h = [k for k, v in facts.rank_hosts.items() if v == h]
            if on_h and all(k in stopped and stopped[k] <= r.time for k in on_h):
                continue
            if h in active and h != where and not ended_by_abort(r, h):
                accusers.setdefault(h, set()).add(where)
                blamed.setdefault(h, []).append(f"rank {r.rank} (host {where}) recorded {r.kind}: host {h} missing")
    if len(blamed) > 1:  # accusations disagree (a cut-off host names everyone else): keep the most-named
        by = {h: len(accusers.get(h, ())) for h in blamed}
        top = max(by.values())
        if top > 1:
            for h in [h for h, n in by.items() if n < top]:
                set_aside.append(("lost_peer", f"host {h} is named by ranks on {by[h]} host(s) only, fewer than "
                                                f"the {top} that name {', '.join(k for k, n in by.items() if n == top)}"))
                del blamed[h]
    silent = {h for h in blamed if h not in wrote} | ({origin.host} if origin is not None else set())
    if len(blamed) > 1 and silent:  # no host is named most: up hosts that only accuse each other are the echo
        for h in [h for h in blamed if h in wrote and accusers.get(h)]:  # a copy: entries are deleted below
            accused_by_h = {k for k, who in accusers.items() if h in who}
            if accusers[h] <= accused_by_h:
                set_aside.append(("lost_peer", f"host {h} was up (its ranks wrote records) and is named only by "
                                                f"host(s) it names in turn ({', '.join(sorted(accusers[h]))}); "
                                                f"host(s) {', '.join(sorted(silent))} left no record: the launcher's "
                                                f"abort reached both sides while the failure was there"))
                del blamed[h]
    if origin is not None:
        blamed.setdefault(origin.host, []).append(f"launcher: {origin.reason}: {origin.line!r}")
    if peers and facts.rank_hosts and not blamed:  # hosts whose every rank vanished without a word while peers lost them
        silent_hosts = [h for h in facts.hosts if h not in wrote and h in set(facts.rank_hosts.values())]
        if len(silent_hosts) > 1:
            set_aside.append(("vanished", f"hosts {', '.join(silent_hosts)} all left no record: too many to tell which "
                                          f"went away and which the launcher killed"))
        elif silent_hosts and len(silent_hosts) < len(facts.hosts):
            for h in silent_hosts:
                ranks = sorted(k for k, v in facts.rank_hosts.items() if v == h)
                blamed.setdefault(h, []).append(
                    f"every rank on host {h} ({', '.join(map(str, ranks))}) vanished without a record "
                    f"while {len(peers)} peer(s) recorded lost_peer/timeout")
    if not blamed:  # fallback: ranks killed without a chance to write, seen only in the log
        for hit in facts.log_hits:
            if hit.blames_host and hit.hosts:
                for h in hit.hosts:
                    blamed.setdefault(h, []).append(f"log: {hit.reason}: {hit.line!r}")
            elif hit.hosts:
                set_aside.append(("log", f"{hit.line!r} names {', '.join(hit.hosts)}, but its signature "
                                         f"({hit.reason}) does not blame the host"))
    elif facts.log_hits:
        set_aside.append(("log", f"{len(facts.log_hits)} log signature(s) not needed: the records decided"))
    if not blamed and facts.status != 0:  # the launcher named no host (Open MPI's daemon start-up failure)
        blamed.update(_stopped_reporting(facts, wrote, set_aside) or _lost_channel(facts, set_aside))
    return blamed, set_aside


def _stopped_reporting(facts: AttemptFacts, wrote: set[str], set_aside: list[tuple[str, str]]
                       ) -> dict[str, list[str]]:
    """The one host whose every rank started (``started-<rank>``) and then went silent (no ``ended``, no record)
    while every rank on every other host ended or wrote a record: ezpz's own markers name it."""
    m = facts.markers
    if m is None or not m.started or not facts.rank_hosts:
        return {}
    on: dict[str, list[int]] = {}
    for rank, host in facts.rank_hosts.items():
        on.setdefault(host, []).append(rank)
    recorded = {r.rank for r in facts.records}
    silent = [h for h, ranks in on.items() if h not in wrote
              and all(r in m.started and r not in m.ended and r not in recorded for r in ranks)]
    done = [h for h, ranks in on.items() if all(r in m.ended or r in recorded for r in ranks)]
    if len(silent) != 1 or len(done) != len(on) - 1:
        if silent:
            set_aside.append(("markers", f"host(s) {', '.join(sorted(silent))} stopped reporting, but "
                                         + ("more than one did" if len(silent) > 1 else
                                            "ranks on other hosts neither ended nor wrote a record")
                                         + ": too little to tell which failed"))
        return {}
    h = silent[0]
    return {h: [f"ezpz's markers: every rank on host {h} ({', '.join(map(str, sorted(on[h])))}) started and stopped "
                f"reporting (no ended-<rank> marker, no record) while the {len(facts.rank_hosts) - len(on[h])} "
                f"rank(s) on the other host(s) ended or recorded; the launcher named no host"]}


def _lost_channel(facts: AttemptFacts, set_aside: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The host whose launcher connection ended first, while the launcher and the other connections ran; else the
    one node with a daemon whose connection was never seen up (it ended between two looks)."""
    lost = facts.lost_channel
    if lost is None:
        unseen = _never_connected(facts, set_aside)
        if facts.channel_note:
            set_aside.append(("connection", f"{facts.channel_note}: " + (
                "taken as the launcher ending the job after the failure" if unseen else
                "too little to tell which failed")))
        return unseen
    if lost.host not in facts.hosts:
        set_aside.append(("connection", f"the launcher's connection to {lost.host} ended first, but it is not an "
                                        f"active host"))
        return {}
    return {lost.host: [f"the launcher's connection to host {lost.host} (pid {lost.pid}: {lost.command!r}) ended "
                        f"{lost.after_s:g} s in, first, before any rank recorded a failure or exited, while the "
                        f"launcher and its connections to {', '.join(lost.still_up)} ran; the launcher named no "
                        f"host"]}


def _never_connected(facts: AttemptFacts, set_aside: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Open MPI said a daemon failed and named no host: when the launcher's own node is known (it starts no daemon
    there), the launcher's connection to every other host was seen up but one's, and the watcher looked again (every
    connection up, none new) before the first ended, that host's daemon failed between two of its looks."""
    unseen = [h for h in facts.unseen_hosts if h in facts.hosts and h not in facts.launcher_here]
    if not unseen:
        return {}
    if not facts.launcher_here:
        set_aside.append(("connection", f"the launcher's connection to {', '.join(unseen)} was never seen, but "
                                        f"which host is the launcher's own node (no connection) is not known"))
        return {}
    if len(unseen) > 1:
        set_aside.append(("connection", f"the launcher's connections to {', '.join(unseen)} were never seen: "
                                        f"too many to tell which daemon failed"))
        return {}
    if not facts.channels_settled:
        set_aside.append(("connection", f"the launcher's connection to {unseen[0]} was never seen, but the watcher "
                                        f"did not look again (every connection up, none new) before the first "
                                        f"ended: it may have been up all along, started after the last look"))
        return {}
    h = unseen[0]
    others = [x for x in facts.hosts if x != h and x not in facts.launcher_here]
    seen = (f"while its connections to {', '.join(others)} were seen up (and up at the watcher's last look before "
            f"the first ended)" if others else
            "and it is the only host with a daemon")
    return {h: [f"the launcher's connection to host {h} was never seen up, {seen}; the launcher runs on "
                f"{', '.join(facts.launcher_here)} (no daemon there); the launcher said a daemon failed and named no "
                f"host: {h}'s daemon ended between two looks"]}


def records_name_hosts(records: Sequence[FailureRecord], rank_hosts: Mapping[int, str], hosts: Sequence[str]
                       ) -> tuple[str, ...]:
    """The hosts the records of a still-running attempt already blame (peers naming the ranks that did not answer).

    Only lost-peer, timeout and hang records count, and none while a rank recorded a code error. ``ezpz launch``
    ends the attempt once this is not empty, instead of waiting for the launcher to give up on the lost node.
    """
    if not any(r.kind in ("lost_peer", "timeout", "hang") for r in records) or \
            any(r.kind in ("code_error", "oom") for r in records):
        return ()
    blamed, _ = _blame(AttemptFacts(attempt=0, status=1, hosts=hosts, rank_hosts=rank_hosts, records=records))
    return tuple(blamed)


def _preempted(facts: AttemptFacts, preempted: list[FailureRecord], *, retry: bool) -> Verdict:
    steps = sorted({r.step for r in preempted if r.step is not None})
    at = f" after step {steps[-1]}" if steps else ""
    evidence = tuple(f"rank {r.rank} (host {_host(facts, r.rank) or r.host}) recorded preempted: {r.first_line}"
                     for r in preempted[:8])
    rejected = [("bad_host", "a preemption (SIGTERM) is the scheduler's, not a host's: no host is blamed")]
    if not retry:
        return Verdict(outcome="preempted", retry=False, evidence=evidence, rejected=rejected,
                       reason=f"SIGTERM reached ezpz launch and {len(preempted)} rank(s) stopped{at}: the "
                              f"allocation is ending; the next run resumes from the job's checkpoint")
    return Verdict(outcome="preempted", retry=True, evidence=evidence, rejected=rejected,
                   reason=f"{len(preempted)} rank(s) got SIGTERM and stopped{at} (ezpz launch did not), and "
                          f"nothing names a host: the same hosts run again, resuming from the job's checkpoint")


def _launcher_config(facts: AttemptFacts) -> Verdict | None:
    """Stop when the launcher could not start the job as configured: the same hosts would fail the same way."""
    said = [f"rank {r.rank} (host {_host(facts, r.rank) or r.host}) recorded launcher_config: {_said(r)}"
            for r in facts.records if r.kind == "launcher_config"]
    hits = [h for h in facts.log_hits if h.kind == "launcher_config"] if not facts.records else []
    if not said and not hits:
        return None
    why = hits[0].reason if hits else said[0]
    return Verdict(outcome="launcher_config", retry=False, evidence=(*said, *(f"log: {h.line!r}" for h in hits[:4])),
                   reason=f"status {facts.status}: the launcher could not start the job as configured: {why}",
                   rejected=[("unknown", "running the same hosts again would meet the same configuration"),
                             ("bad_host", "a launcher configuration error is no host's fault: no spare is used")])


def _code_error_in_log(facts: AttemptFacts) -> Verdict | None:
    """No rank wrote a record, but the log shows the script failing in a way no host can change (it did not
    compile or import: before ``ezpz.hooks.setup()`` could install the failure capture)."""
    hits = [h for h in facts.log_hits if h.kind == "code_error"] if not facts.records else []
    if not hits:
        return None
    return Verdict(outcome="code_error", retry=False, evidence=tuple(f"log: {h.line!r}" for h in hits[:4]),
                   reason=f"status {facts.status}: {hits[0].reason}: {hits[0].line!r}: it would fail again on any "
                          f"hosts, so no host is blamed and no spare is used",
                   rejected=[("unknown", "running the same code again would fail the same way"),
                             ("bad_host", "a script that does not compile or import is no host's fault")])


def same_hosts_cannot_succeed(facts: AttemptFacts) -> Verdict | None:
    """For ``--retries`` (same hosts): the verdict that stops retrying, when the failure cannot go away by running
    again unchanged (a code error, recorded or in the log; the launcher unable to start the job); else None."""
    if facts.status == 0 or facts.interrupted:
        return None
    code = [r for r in facts.records if r.kind in ("code_error", "oom")]
    if code:
        first = code[0]
        return Verdict(outcome="code_error", retry=False,
                       evidence=tuple(f"rank {r.rank} (host {_host(facts, r.rank) or r.host}) recorded {r.kind}: "
                                      f"{_said(r)}" for r in code[:8]),
                       reason=f"{first.kind} on rank(s) {sorted({r.rank for r in code})} ({_said(first)}): the same "
                              f"code on the same hosts fails the same way, so --retries does not run it again",
                       rejected=[("retry", "a rerun cannot change the code's own error")])
    verdict = _launcher_config(facts) or _code_error_in_log(facts)
    if verdict is None:
        return None
    return Verdict(outcome=verdict.outcome, retry=False, evidence=verdict.evidence, rejected=verdict.rejected,
                   reason=f"{verdict.reason}; --retries does not run it again")


def classify(facts: AttemptFacts, *, spares_left: int, prior_progress: bool | None = None,
             attempts_left: int | None = None, min_nodes: int | None = None,
             lost_before: Mapping[str, str] | None = None) -> Verdict:
    """The verdict on one attempt (see the module's termination matrix). Pure: no I/O.

    ``min_nodes`` is ``--min-nodes`` (None: never run on fewer hosts); ``lost_before`` the hosts excluded by earlier
    attempts with why, named when the job stops below ``min_nodes``.
    """
    rejected: list[tuple[str, str]] = []
    if facts.status == 0 and not facts.timed_out:
        return Verdict(outcome="success", retry=False, reason="the job exited 0")
    preempted = [r for r in facts.records if r.kind == "preempted"]
    code = [r for r in facts.records if r.kind in ("code_error", "oom")]
    if facts.interrupted:
        if preempted and not code:
            return _preempted(facts, preempted, retry=False)
        return Verdict(outcome="interrupted", retry=False, reason="interrupted: the loop stops at once")
    if code:
        ranks = sorted({r.rank for r in code})
        first = code[0]
        evidence = tuple(f"rank {r.rank} (host {_host(facts, r.rank) or r.host}) recorded {r.kind}: {_said(r)}"
                         for r in code[:8])
        whole = len(ranks) == len(facts.rank_hosts) and bool(facts.rank_hosts)
        return Verdict(
            outcome="code_error", retry=False, evidence=evidence,
            reason=f"{first.kind} on {'every rank' if whole else f'rank(s) {ranks}'} "
                   f"({_said(first)}): it would fail again on any "
                   f"hosts, so no host is blamed and no spare is used",
            rejected=[("bad_host", "a rank's own code failed; peers losing it is a consequence, not a bad host")])
    config = _launcher_config(facts) or _code_error_in_log(facts)
    if config is not None:
        return config
    blamed, set_aside = _blame(facts)
    rejected += set_aside
    if attempts_left is not None and attempts_left <= 0:
        return Verdict(outcome="limit", retry=False, exclude=(), evidence=tuple(e for v in blamed.values() for e in v),
                       reason="--max-failover-retries attempts used", rejected=rejected)
    if blamed:
        hosts = tuple(blamed)
        evidence = tuple(e for h in hosts for e in blamed[h])
        if len(hosts) > spares_left:
            left = len([h for h in facts.hosts if h not in hosts]) + spares_left
            if min_nodes is not None and left >= min_nodes:
                return Verdict(outcome="shrink", retry=True, exclude=hosts, evidence=evidence, rejected=[
                    *rejected, ("exhausted", f"{left} healthy host(s) remain, at least --min-nodes {min_nodes}")],
                    reason=f"bad host(s) {', '.join(hosts)}, {spares_left} spare(s) left: the job goes on with "
                           f"{left} host(s) instead of {len(facts.hosts)} (--min-nodes {min_nodes}), from its last "
                           f"complete checkpoint")
            lost = {**(lost_before or {}), **{h: blamed[h][0] for h in hosts}}
            below = (f"; {left} healthy host(s) would be left, fewer than --min-nodes {min_nodes}; hosts lost: "
                     + "; ".join(f"{h} ({why})" for h, why in lost.items())) if min_nodes is not None else ""
            return Verdict(outcome="exhausted", retry=False, exclude=hosts, evidence=evidence, rejected=rejected,
                           reason=f"bad host(s) {', '.join(hosts)} but only {spares_left} spare(s) left{below}")
        return Verdict(outcome="bad_host", retry=True, exclude=hosts, evidence=evidence, rejected=rejected,
                       reason=f"bad host(s) {', '.join(hosts)}: excluded, {len(hosts)} spare(s) swapped in")
    if preempted:  # SIGTERM to the ranks alone, and nothing names a host
        return _preempted(facts, preempted, retry=True)
    rejected.append(("bad_host", "no record, vanished host or host-blaming log signature names a host"))
    ended = [h for h in facts.log_hits if h.kind == "signal" and not h.blames_host]  # a rank ended, no host named
    if facts.status == WALLTIME_STATUS and not facts.timed_out and not facts.records and not ended:
        return Verdict(outcome="walltime", retry=False, rejected=rejected,
                       reason="status 143 (SIGTERM) with no failure evidence: the scheduler's walltime; "
                              "a retry would be killed too")
    if facts.status == WALLTIME_STATUS and ended:
        rejected.append(("walltime", f"status 143, but the launcher says a rank failed first: {ended[0].line!r} "
                                     f"({ended[0].reason})"))
    if prior_progress is False and not facts.progress:
        return Verdict(outcome="stuck", retry=False, rejected=rejected,
                       reason="this attempt and the one before never reached a training step: stuck before the "
                              "first step, which a retry on other hosts has not changed")
    if facts.timed_out:
        silent = ", ".join(f"{r} (host {_host(facts, r) or '?'})" for r in facts.alive_ranks) or "unknown"
        return Verdict(outcome="hang", retry=True, rejected=rejected,
                       reason=f"the job went silent (watchdog); ranks still running here: {silent}; "
                              f"nothing names a bad host, so the same hosts run again")
    return Verdict(outcome="unknown", retry=True, rejected=rejected,
                   reason=f"status {facts.status} and nothing names a host: the same hosts run again")
