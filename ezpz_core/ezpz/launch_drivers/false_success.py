"""No false success: a launcher's exit 0 checked against the ranks' own markers (:mod:`ezpz.failures.rank_markers`).

``ezpz launch`` knows how many ranks it started; each rank that calls ``setup()`` writes ``started-<rank>``, and
``ended-<rank>`` at ``teardown()`` or exit. Open MPI's ``mpiexec`` stopped while starting its daemons exits 0
having run nothing; a rank killed before its interpreter could exit leaves no ``ended`` marker.

The rule (docs/failures.md): the markers are evidence only when the command is known to use ezpz, that is when
any rank of this attempt wrote a marker, an earlier attempt of the same launch did, or the user said so
(``--expect-ezpz``). A plain command that never calls ``setup()`` writes none and is never judged. When judged,
an exit 0 is ``false_success`` if a rank never started or started and never ended. The hosts named are those
whose ranks started and then went silent, from their own markers; ranks that never started name no host (a
slow healthy node looks the same). When no rank started at all, the evidence names the launcher's own host: the
launcher ran nothing (Open MPI's ``mpiexec`` stopped there while it started its daemons), and no node is excluded.
"""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.failures.rank_markers import Markers
from ezpz.launch_drivers.retry import Verdict

__all__ = ["judge_markers"]

_SHOW = 16


def _ranks(ranks: list[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:_SHOW])
    return shown + (f" and {len(ranks) - _SHOW} more" if len(ranks) > _SHOW else "")


def judge_markers(markers: Markers, world_size: int, *, known_ezpz: bool, attempts_left: int,
                  rank_hosts: Mapping[int, str] | None = None, spares_left: int = 0,
                  launcher_host: str | None = None) -> Verdict | None:
    """The ``false_success`` verdict for an attempt whose launcher exited 0, or None when the markers agree (or
    are no evidence: the command is not known to use ezpz).

    Retried (on the same hosts; under ``--auto-retry`` the silent hosts are swapped for spares when enough are
    left) while ``attempts_left``, else final.
    """
    if not (known_ezpz or markers.any):
        return None
    expected = range(world_size)
    never = [r for r in expected if r not in markers.started]
    silent = sorted(r for r in markers.started if r not in markers.ended and r in expected)
    if not never and not silent:
        return None
    hosts = tuple(sorted({markers.started[r] for r in silent} - {"?"}))
    evidence = [f"{len(markers.started)} of {world_size} rank(s) reported in (started-<rank> markers), "
                f"{len([r for r in markers.ended if r in expected])} ended"]
    if never:
        planned = sorted({rank_hosts[r] for r in never if rank_hosts and r in rank_hosts})
        evidence.append(f"rank(s) {_ranks(never)} never started (no host blamed: a slow node looks the same"
                        + (f"; planned on {', '.join(planned)}" if planned else "") + ")")
    if not markers.started and launcher_host:
        evidence.append(f"no rank reported in at all: the launcher on {launcher_host} (where ezpz launch runs) "
                        f"exited 0 having run nothing, so the fault is there, not on a rank's node")
    if silent:
        evidence.append(f"rank(s) {_ranks(silent)} started and never ended, on host(s) "
                        f"{', '.join(hosts) or 'unknown'}")
    what = ("ranks never started" if never and not silent else "ranks started and never ended" if silent and not never
            else "ranks never started or never ended")
    reason = f"the launcher exited 0 but {what}"
    if attempts_left <= 0:
        return Verdict(outcome="false_success", retry=False, reason=f"{reason}; no retries left: exit 1",
                       evidence=evidence)
    exclude = hosts if hosts and spares_left >= len(hosts) else ()
    return Verdict(outcome="false_success", retry=True, exclude=exclude, evidence=evidence,
                   reason=f"{reason}; retrying" + (f", swapping {', '.join(exclude)} for spares" if exclude else
                                                   " on the same hosts"))
