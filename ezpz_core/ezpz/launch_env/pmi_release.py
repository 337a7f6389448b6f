"""Leave Hydra's PMI session cleanly at exit, so a finished rank is never reported as a failed one.

Once a process has sent ``cmd=init`` on its PMI connection, MPICH's Hydra
proxy treats it as a PMI application: if that connection closes without
``cmd=finalize`` (the process simply exits), the proxy records exit status
1 for it (printed as "Hangup (signal 1)") and kills every other rank on the
node. Whether it notices the closed connection before it has collected the
process's real exit status is a race, so a job that finished can fail at
random (MPICH ``src/pm/hydra/proxy/pmip_cb.c``, ``pmi_cb``: "For a correct PMI
application, we should never get closed socket event as we deregister this
socket as soon as we get the finalize message").

ezpz sends ``cmd=init`` for its rendezvous (:mod:`ezpz.launch_env.pmi`), so it
also says ``cmd=finalize`` at interpreter exit, unless an MPI library in the
process initialised MPI after it: that library then owns the session and
finalises it in ``MPI_Finalize``; a second finalize would wait for an answer
Hydra never sends. Every step is bounded; nothing here raises at exit.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading
from collections.abc import Mapping

import attrs

from ezpz.primitives import logger as _log
from ezpz.launch_env.pmi import PmiClient

__all__ = ["finalize_now", "mpi_initialized_in_process", "release_at_exit"]

FINALIZE_TIMEOUT_S = 10.0
"""How long the exit handler waits for Hydra's ``finalize_ack``."""


@attrs.frozen
class _Session:
    """The PMI session this process opened: how to reach it again, and in which process."""

    environ: Mapping[str, str]  # PMI_FD / PMI_PORT / PMI_ID only
    client: PmiClient | None  # kept open (PMI_PORT: the connection is the session); None: dup PMI_FD anew
    pid: int


_lock = threading.Lock()
_session: _Session | None = None


def release_at_exit(environ: Mapping[str, str], client: PmiClient | None = None) -> None:
    """Say ``cmd=finalize`` to the process manager when this process exits (registered once per process).

    ``client``: an open client to finalize over (``PMI_PORT``: its connection is this process's PMI session and must
    stay open until then); without one, a fresh duplicate of ``PMI_FD`` is used.
    """
    global _session
    with _lock:
        first = _session is None
        _session = _Session(environ={k: environ[k] for k in ("PMI_FD", "PMI_PORT", "PMI_ID") if k in environ},
                            client=client, pid=os.getpid())
    if first:
        atexit.register(finalize_now, FINALIZE_TIMEOUT_S)


def mpi_initialized_in_process() -> bool | None:
    """Whether an MPI library loaded in this process has initialised MPI (True even once finalised).

    mpi4py is asked first; otherwise every mapped ``libmpi*`` is asked through ``MPI_Initialized`` (callable before
    ``MPI_Init`` and after ``MPI_Finalize``). None: a library is loaded and could not be asked.
    """
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None:
        try:
            return bool(mpi.Is_initialized())
        except Exception:  # noqa: BLE001 - an mpi4py that cannot answer: unknown
            return None
    answer: bool | None = False
    for path in _mapped_mpi_libraries():
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            flag = ctypes.c_int(0)
            if lib.MPI_Initialized(ctypes.byref(flag)) != 0:
                answer = None
            elif flag.value:
                return True
        except (OSError, AttributeError):
            answer = None
    return answer


def _mapped_mpi_libraries() -> list[str]:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {line.split(None, 5)[-1].strip() for line in maps if "libmpi" in line}
    except OSError:
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith(("libmpi.", "libmpich.")))


def finalize_now(timeout_s: float) -> None:
    """End the PMI session now, if this process has one to end: before an ``os._exit`` (which skips ``atexit``),
    so Hydra reports the status the process exits with, not "Hangup (signal 1)". Bounded; never raises."""
    global _session
    with _lock:
        session, _session = _session, None
    if session is None or session.pid != os.getpid():  # none, already ended, or a forked child's (its parent's)
        return
    try:
        _finalize_once(session, timeout_s)
    except Exception:  # noqa: BLE001 - at exit (logging may be shut down already): never raise
        pass


def _finalize_once(session: _Session, timeout_s: float) -> None:
    client = session.client
    log = _log.get_logger("ezpz.rendezvous")
    mpi = mpi_initialized_in_process()
    if mpi is not False:
        log.debug("pmi_finalize_skipped", reason="an MPI library in this process owns the PMI session" if mpi
                  else "an MPI library is loaded and could not say whether it initialised MPI")
        if client is not None:
            client.close()
        return
    try:
        if client is None:
            client = PmiClient.connect(session.environ, timeout_s)
        client.finalize(timeout_s)
        log.debug("pmi_finalized", via=client.source)
    except Exception as err:  # noqa: BLE001 - at exit: say it, never raise
        log.warning("pmi_finalize_failed", error=str(err),
                    consequence="mpiexec may report this rank as failed although it finished")
    finally:
        if client is not None:
            client.close()
