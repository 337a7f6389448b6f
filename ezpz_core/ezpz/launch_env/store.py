"""The rendezvous store behind ``setup()``: bounded, owned by one launch, a fresh namespace per setup.

- **Bounded.** Connecting, the ownership check and ``init_process_group`` run
  in a worker thread that ``setup()`` waits on for at most the plan's timeout
  plus :data:`GRACE_S`. A peer that accepts and never answers, a store that
  dies mid-rendezvous or a process manager that goes quiet ends in a named
  error (:class:`~ezpz.errors.RendezvousTimeoutError`,
  :class:`~ezpz.errors.RendezvousError`), never a hang. A worker thread still
  blocked inside torch at that point is abandoned (a daemon thread).
- **One job, one world.** Rank 0 claims the store for its launch by writing
  the job fingerprint (launcher, launch identity, world size) under
  ``ezpz/owner``; every other rank reads the claim before it is counted. A
  process of another launch that reaches this store raises
  :class:`~ezpz.errors.JobMismatchError` and records itself under
  ``ezpz/refused``; the owner logs ``job_fingerprint_refused`` naming it. The
  ranks meet under a prefix holding the fingerprint, so a stranger is never
  counted as a rank.
- **Generations.** Each ``setup()`` in a process uses its own prefix
  (``ezpz/<fingerprint>/a<attempt>/g<n>``; the attempt is ``EZPZ_ATTEMPT`` +
  ``TORCHELASTIC_RESTART_COUNT``, so a restarted job never meets the last attempt's keys on a store that outlived it), so a second ``setup()`` never reads the
  first one's gloo/NCCL peer addresses (plain torch re-reads them:
  "connectFullMesh failed ... connection refused"). The store itself is kept
  open for the life of the process, so every generation reaches the same
  server and ``teardown()`` never closes it under a slower rank.
- **MPICH / Intel MPI Hydra** (:mod:`ezpz.launch_env.pmi`): with no ``MASTER_PORT``,
  rank 0 binds a free port and publishes ``host:port`` in the process
  manager's key-value space; the key-value space name is the launch identity.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ezpz.primitives import logger as _log
from ezpz.errors import JobMismatchError, RendezvousError, RendezvousTimeoutError
from ezpz.facts import LaunchEnv
from ezpz.launch_env.rendezvous import this_host  # re-exported: where this rank's host is named

__all__ = ["GRACE_S", "Rendezvous", "connect", "current", "fingerprint", "report_refused", "run_bounded", "this_host"]

GRACE_S = 5.0
"""How long past the timeout ``setup()`` waits for torch to raise its own error before raising one itself."""

EXIT_WAIT_S = 2 * GRACE_S
"""How long, at exit, the process waits for a store call it stopped waiting for (see :mod:`ezpz.primitives.abandoned_threads`).

A call that honours its own timeout (the rendezvous timeout, as ``setup()``'s deadline) returns within ``GRACE_S``
of being given up on; one stuck past that (a listener that accepts and never answers) would not return in 30 s
either, and then the process leaves without interpreter finalization, exit status 1, as it would later."""

_OWNER = "ezpz/owner"
_REFUSED = "ezpz/refused"
_PMI_KEY = "ezpz-rendezvous"
_ARRIVED = "ezpz-arrived"
_FAILED = "ezpz-failed"
_MAX_ROLL = 4096
_T = TypeVar("_T")

_stores: dict[tuple[str, int, bool], Any] = {}
_pmi_rendezvous: dict[str, tuple[str, int, str]] = {}
_generation = 0
_last: dict[str, Rendezvous] = {}
_reported: dict[int, int] = {}
_lock = threading.Lock()


def fingerprint(launcher: str, identity: str | None, world_size: int) -> str:
    """A short digest naming one launch: the same on all its ranks, different for another launch."""
    text = f"{launcher}|{identity or 'no launch identity'}|{world_size}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_bounded(fn: Callable[[], _T], deadline_s: float, on_timeout: Callable[[], BaseException]) -> _T:
    """``fn()`` in a daemon thread; its result or exception, or ``on_timeout()`` raised after ``deadline_s``."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # handed to the caller's thread
            box["error"] = err

    thread = threading.Thread(target=target, name="ezpz-rendezvous", daemon=True)
    thread.start()
    thread.join(deadline_s)
    if thread.is_alive():
        from ezpz.primitives.abandoned_threads import abandon

        error = on_timeout()
        # A store call returns once its own timeout passes: let it, before the interpreter finalizes (ezpz.primitives.abandoned_threads).
        abandon(thread, wait_s=EXIT_WAIT_S, must_finish=True, what=f"{getattr(fn, '__qualname__', 'a store call')}")
        raise error
    if "error" in box:
        raise box["error"]
    value: _T = box["value"]
    return value


class Rendezvous:
    """One ``setup()``'s trip to the store: where, whose, which generation."""

    def __init__(self, launch: LaunchEnv, timeout_s: float, environ: Mapping[str, str]) -> None:
        global _generation
        with _lock:
            _generation += 1
            self.generation = _generation
        self.launch = launch
        self.timeout_s = timeout_s
        self.environ = environ
        self.addr = launch.master_addr or "127.0.0.1"
        self.port = launch.master_port
        self.identity = launch.job_id
        self.fingerprint = ""
        self.base: Any = None
        self.gen: Any = None
        self.attempt = _attempt(environ)
        self._start = time.monotonic()

    @property
    def where(self) -> str:
        return f"{self.addr}:{self.port if self.port is not None else '?'}"

    def remaining(self) -> _dt.timedelta:
        left = self.timeout_s - (time.monotonic() - self._start)
        return _dt.timedelta(seconds=max(left, 0.5))

    # --- steps, run in the worker thread -------------------------------------------------------------------

    def open(self) -> Any:
        """The store prefix this generation's process group uses, after the ownership check."""
        import torch.distributed as dist

        launch = self.launch
        if launch.exchange == "pmi" or (launch.launcher == "hydra" and _pmi_available(self.environ)):
            self._pmi_exchange()
        self.fingerprint = fingerprint(launch.launcher, self.identity, launch.world_size)
        agent = launch.launcher == "torchrun" and _truthy(self.environ.get("TORCHELASTIC_USE_AGENT_STORE"))
        store = self._store(is_master=launch.rank == 0 and not agent)
        if agent:  # torchrun's agent owns the server; torch itself namespaces workers by restart
            restart = (self.environ.get("TORCHELASTIC_RESTART_COUNT") or "0").strip()
            store = dist.PrefixStore(f"/worker/attempt_{restart}", store)
        self.base = store
        _last["rendezvous"] = self
        self._check_owner(store)
        gen = dist.PrefixStore(f"ezpz/{self.fingerprint}/a{self.attempt}/g{self.generation}", store)
        gen.set(f"{_ARRIVED}/{launch.rank}", this_host(launch))  # who arrived, and from where (for roll calls)
        self.gen = gen
        return gen

    # --- roll calls, after a failure -----------------------------------------------------------------------

    def arrived(self) -> dict[int, str]:
        """Ranks (at most the first 4096) that reached this generation's rendezvous, with their host."""
        if self.gen is None:
            return {}
        found = {}
        for rank in range(min(self.launch.world_size, _MAX_ROLL)):
            key = f"{_ARRIVED}/{rank}"
            if self.gen.check([key]):
                found[rank] = _text(self.gen.get(key))
        return found

    def roll_call(self, grace_s: float) -> tuple[list[int], dict[int, str]]:
        """After a collective failed on this rank: report it, wait up to ``grace_s`` for the others to report.

        The ranks that did not report are the ones that did not arrive at the
        failed collective (hung, dead, or cut off); returned with the hosts they
        arrived from at the rendezvous.
        """
        if self.gen is None:
            return [], {}
        world = min(self.launch.world_size, _MAX_ROLL)
        self.gen.set(f"{_FAILED}/{self.launch.rank}", "1")
        deadline = time.monotonic() + grace_s
        while True:
            missing = [r for r in range(world) if not self.gen.check([f"{_FAILED}/{r}"])]
            if not missing or time.monotonic() >= deadline:
                break
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0.01)))
        arrived = self.arrived()
        return missing, {r: arrived[r] for r in missing if r in arrived}

    def _store(self, *, is_master: bool) -> Any:
        import torch.distributed as dist

        assert self.port is not None
        key = (self.addr, self.port, is_master)
        with _lock:
            store = _stores.get(key)
        if store is None:
            store = dist.TCPStore(self.addr, self.port, None, is_master, self.remaining(), wait_for_workers=False)
            with _lock:
                _stores[key] = store
        else:
            store.set_timeout(self.remaining())
        return store

    def _pmi_exchange(self) -> None:
        """Hydra: the kvs name is the launch identity; with ``exchange == "pmi"`` rank 0 also binds a free port
        (or MASTER_PORT) and publishes ``host:port``, which every rank reads after a PMI barrier."""
        from ezpz.launch_env.pmi import PmiClient, available
        from ezpz.launch_env.pmi_release import release_at_exit

        publish = self.launch.exchange == "pmi"
        cached = _pmi_rendezvous.get("this process")
        if cached is None:
            client = PmiClient.connect(self.environ, self.remaining().total_seconds())
            host, port = self.addr, str(self.port)
            keep_open = available(self.environ) == "PMI_PORT"  # that connection is this process's PMI session
            try:
                client.init()
                release_at_exit(self.environ, client if keep_open else None)  # Hydra: a rank that exits without
                # cmd=finalize after cmd=init is counted as failed (ezpz.launch_env.pmi_release)
                kvs = client.kvsname()
                if publish:
                    if self.launch.rank == 0:
                        mine = self.launch.master_addr or socket.gethostname()
                        client.put(kvs, _PMI_KEY, f"{mine}:{self._bind_master(mine)}")
                    client.barrier()
                    host, _, port = client.get(kvs, _PMI_KEY).rpartition(":")
            finally:
                if not keep_open:
                    client.close()
            if not (host and port.isdigit() and 0 < int(port) < 65536):
                raise RendezvousError(f"the process manager returned {host}:{port!r} for rank 0's address: "
                                      "not host:port (another program wrote this key?)")
            cached = _pmi_rendezvous["this process"] = (host, int(port), kvs)
        addr, number, kvs = cached
        if publish:
            self.addr, self.port = addr, number
        self.identity = f"PMI kvsname {kvs}"

    def _bind_master(self, host: str) -> int:
        """Rank 0's server on MASTER_PORT, or on a free port the OS picks; the port bound."""
        import torch.distributed as dist

        store = dist.TCPStore(host, self.port or 0, None, True, self.remaining(), wait_for_workers=False)
        with _lock:
            _stores[(host, store.port, True)] = store
        return int(store.port)

    def _check_owner(self, store: Any) -> None:
        mine = self.fingerprint
        if self.launch.rank == 0:
            owner = _text(store.compare_set(_OWNER, "", mine))
        else:
            store.wait([_OWNER], self.remaining())
            owner = _text(store.get(_OWNER))
        if owner == mine:
            return
        me = (f"rank {self.launch.rank} of {self.launch.world_size} ({self.launch.launcher}, "
              f"{self.identity or 'no launch identity'}, fingerprint {mine})")
        try:
            n = store.add(_REFUSED, 1)
            store.set(f"{_REFUSED}/{n}", me)
        except Exception:  # the owner's record is best effort; this rank's error is not
            pass
        raise JobMismatchError(
            f"{me} reached the rendezvous store at {self.where}, which belongs to another launch (fingerprint "
            f"{owner[:64]!r}); refused, not counted as a rank. Two jobs share this address: set MASTER_PORT to a "
            "port of this job's own, or let ezpz derive one from the launcher's job identity"
        )

    def report_refused(self) -> None:
        """Rank 0: log each process of another launch that reached this store and was refused (once each)."""
        if self.launch.rank != 0 or self.base is None:
            return
        count = int(self.base.add(_REFUSED, 0))
        log = _log.get_logger("ezpz.rendezvous")
        for i in range(_reported.get(id(self.base), 0) + 1, count + 1):
            who = _text(self.base.get(f"{_REFUSED}/{i}")) if self.base.check([f"{_REFUSED}/{i}"]) else "unknown"
            log.warning("job_fingerprint_refused", error="JobMismatchError", store=self.where, intruder=who[:300])
        _reported[id(self.base)] = count


def report_refused(deadline_s: float = 2.0) -> None:
    """Log intruders refused since the last report (``teardown()`` calls this); bounded, never raises."""
    rdzv = _last.get("rendezvous")
    if rdzv is None:
        return
    try:
        run_bounded(rdzv.report_refused, deadline_s, lambda: TimeoutError("store did not answer"))
    except Exception:  # a report must not turn a clean teardown into an error
        pass


def current() -> Rendezvous | None:
    """The last rendezvous this process opened (the generation its process group uses), or None."""
    return _last.get("rendezvous")


def connect(launch: LaunchEnv, timeout_s: float, environ: Mapping[str, str] | None = None) -> Rendezvous:
    """A :class:`Rendezvous` for ``launch`` (not yet opened)."""
    return Rendezvous(launch, timeout_s, os.environ if environ is None else environ)


def _attempt(environ: Mapping[str, str]) -> int:
    """The job's attempt (``EZPZ_ATTEMPT`` + torchrun's restart count): each attempt meets under its own prefix."""
    from ezpz.inputs.settings import parse_attempt

    return parse_attempt(environ).number


def _pmi_available(environ: Mapping[str, str]) -> bool:
    from ezpz.launch_env.pmi import available

    return available(environ) is not None


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _truthy(raw: str | None) -> bool:
    return (raw or "").strip().lower() in ("1", "true", "yes", "on")
