"""Intra-op CPU threads per rank: facts, the pure policy, and applying it.

Several ranks on one host each start torch with one intra-op thread per core,
so N ranks run N x cores threads on cores cores and spend their time
descheduled. ezpz gives each rank ``cores // local ranks`` threads (at least
one), as ``torchrun`` limits multi-process runs, unless the user chose:
``OMP_NUM_THREADS`` (torch reads it at start) or ``torch.set_num_threads()``
before ``setup()`` (seen as a thread count that differs from torch's default,
one per physical core, when no thread variable is set). On a host already
busy with other work (1-minute load average, less this job's local ranks, at
least the cores) each rank gets one thread: measured on a shared 2-core host,
torch's two threads ran the example job 10-20x slower than one.
"""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.facts import Alternative
from ezpz.primitives.frozen_records import frozen

_SET_BY_EZPZ: list[int] = []  # the count an earlier setup() in this process set, so it is not taken for the user's

__all__ = ["ThreadFacts", "ThreadsChoice", "apply_threads", "choose_threads", "probe_thread_facts"]

#: Variables torch reads for its intra-op thread count at start, in the order it reads them.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@frozen(kw_only=True)
class ThreadFacts:
    """What the threads policy needs: cores here, ranks sharing them, torch's current count, variables set."""

    cores: int
    local_world_size: int
    host_cores: int | None = None
    torch_threads: int
    set_vars: tuple[tuple[str, str], ...] = ()
    launcher: str = "single"
    set_by_ezpz: int | None = None
    load1: float | None = None


@frozen(kw_only=True)
class ThreadsChoice:
    """The intra-op thread count for this rank; ``set_to`` None means leave torch's as it is."""

    threads: int
    set_to: int | None
    reason: str
    alternatives: tuple[Alternative, ...] = ()


def probe_thread_facts(environ: Mapping[str, str], local_world_size: int, launcher: str = "single") -> ThreadFacts:
    """Read the facts (thin and impure: /proc/cpuinfo's topology, ``torch.get_num_threads()``)."""
    import torch

    from ezpz.probes.cpu import host_cores, load_average_1min, physical_cores, read_topology

    set_vars = tuple((n, environ[n].strip()) for n in THREAD_VARS if environ.get(n, "").strip())
    topology = read_topology()  # one read of /proc/cpuinfo for both counts
    return ThreadFacts(cores=physical_cores(topology), host_cores=host_cores(topology),
                       local_world_size=max(local_world_size, 1),
                       torch_threads=torch.get_num_threads(), set_vars=set_vars, launcher=launcher,
                       set_by_ezpz=_SET_BY_EZPZ[-1] if _SET_BY_EZPZ else None, load1=load_average_1min())


def choose_threads(facts: ThreadFacts) -> ThreadsChoice:
    """Threads for one rank. Pure."""
    share = max(1, facts.cores // facts.local_world_size)
    split = (f"{facts.cores} core(s) / {facts.local_world_size} rank(s) on this host = {share}"
             if facts.local_world_size > 1 else f"one rank on this host's {facts.cores} core(s)")
    not_split = (share, Alternative(name=f"{share} thread(s)", reason=f"ezpz's default ({split}) gives way to the "
                                                                     "user's"))
    same = f"; ezpz's default is the same ({split})" if share == facts.torch_threads else ""
    if facts.set_vars:
        name, value = facts.set_vars[0]
        by = (" (or torchrun, which sets OMP_NUM_THREADS=1 for several local ranks when it is unset)"
              if facts.launcher == "torchrun" and name == "OMP_NUM_THREADS" and value == "1" else "")
        return ThreadsChoice(threads=facts.torch_threads, set_to=None,
                             alternatives=_rejected(facts.torch_threads, not_split),
                             reason=f"{name}={value} set by the user{by}: torch uses {facts.torch_threads}{same}")
    torchs_default = facts.torch_threads in (facts.cores, facts.set_by_ezpz)
    if not torchs_default and facts.torch_threads <= share:
        return ThreadsChoice(threads=facts.torch_threads, set_to=None,
                             reason=f"torch already runs {facts.torch_threads} thread(s), within this rank's share "
                                    f"({split}): set by torch.set_num_threads or limited by the launcher's OpenMP "
                                    "runtime; left as it is")
    if not torchs_default:
        return ThreadsChoice(threads=facts.torch_threads, set_to=None,
                             alternatives=_rejected(facts.torch_threads, not_split),
                             reason=f"torch.set_num_threads({facts.torch_threads}) was called before setup() "
                                    f"(torch's default here is {facts.cores}, one per core, with no "
                                    f"{'/'.join(THREAD_VARS)} set)")
    if facts.host_cores is not None and facts.cores < facts.host_cores:
        return ThreadsChoice(threads=facts.torch_threads, set_to=None,
                             alternatives=_rejected(facts.torch_threads, (share, Alternative(
                                 name=f"{share} thread(s)", reason="the binding already gives this rank its share "
                                                                  "of the host"))),
                             reason=f"this rank is bound to {facts.cores} of the host's {facts.host_cores} core(s) "
                                    f"(by the launcher or taskset): torch's default of one thread per bound core "
                                    "stands")
    keep = (facts.torch_threads, Alternative(name=f"torch's default {facts.torch_threads}",
                                             reason=f"one thread per core in each of {facts.local_world_size} ranks "
                                                    f"oversubscribes the {facts.cores} core(s) "
                                                    f"{facts.local_world_size}x"))
    others = None if facts.load1 is None else facts.load1 - facts.local_world_size
    if others is not None and others >= facts.cores and share > 1:
        return ThreadsChoice(threads=1, set_to=1,
                             alternatives=_rejected(1, (share, Alternative(name=f"{share} thread(s)", reason=split))),
                             reason=f"host busy: 1-minute load average {facts.load1:.1f} minus this job's "
                                    f"{facts.local_world_size} local rank(s) >= {facts.cores} core(s); threads that "
                                    "meet at every op stall when descheduled (one thread ran 10-20x faster than two "
                                    "on a busy 2-core host, docs/performance.md); set OMP_NUM_THREADS to choose")
    if facts.local_world_size == 1:
        return ThreadsChoice(threads=share, set_to=None,
                             reason=f"{split}: torch's default of one thread per core stands "
                                    "(set OMP_NUM_THREADS to choose)")
    return ThreadsChoice(threads=share, set_to=share, alternatives=_rejected(share, keep),
                         reason=f"{split} (set OMP_NUM_THREADS or call torch.set_num_threads to choose)")


def _rejected(chosen: int, *options: tuple[int, Alternative]) -> tuple[Alternative, ...]:
    """The alternatives whose thread count differs from the chosen one: a trace never rejects what it chose."""
    return tuple(alt for count, alt in options if count != chosen)


def apply_threads(choice: ThreadsChoice) -> None:
    """Set torch's intra-op threads when the choice says to."""
    if choice.set_to is not None:
        import torch

        if torch.get_num_threads() != choice.set_to:
            torch.set_num_threads(choice.set_to)
        _SET_BY_EZPZ[:] = [choice.set_to]
