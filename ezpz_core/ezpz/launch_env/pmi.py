"""A minimal PMI-1 wire-protocol client, for the rendezvous under MPICH / Intel MPI Hydra.

Hydra gives every process a connection to its process manager (``PMI_FD``, an
inherited socket, or ``PMI_PORT`` plus ``PMI_ID``). Over it ezpz asks for the
key-value space name (new for every ``mpiexec``: the launch's identity) and
lets rank 0 publish the address it actually bound (``put``, ``barrier``,
``get``), so two jobs on one host never share a port.

The protocol is MPICH's ``src/pmi/simple`` (PMI-1): newline-terminated
``cmd=... key=value`` lines, one reply per request. ezpz talks over a
*duplicate* of ``PMI_FD`` and sends ``finalize`` only at exit, and only when no
MPI library took the session over (:mod:`ezpz.launch_env.pmi_release`), so a
later ``MPI_Init`` (mpi4py) finds the connection as Hydra left it and
re-initialises on it; ezpz's one barrier is entered by every rank, so MPI's own barriers
stay matched. Every read is bounded by a socket timeout.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from ezpz.errors import LaunchEnvError, RendezvousError, RendezvousTimeoutError

__all__ = ["PmiClient", "available"]

_MAX_LINE = 4096
"""PMI-1 lines are short (Hydra's vallen_max is 1024); anything longer is not a PMI server."""


def available(environ: Mapping[str, str]) -> str | None:
    """The variable through which a PMI-1 server can be reached (``PMI_FD`` or ``PMI_PORT``), or None."""
    for name in ("PMI_FD", "PMI_PORT"):
        if (environ.get(name) or "").strip():
            return name
    return None


def _parse(line: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in line.split() if "=" in item)


class PmiClient:
    """One PMI-1 session over a socket, every call bounded by ``timeout_s``."""

    def __init__(self, sock: socket.socket, source: str, timeout_s: float) -> None:
        self._sock = sock
        self.source = source
        sock.settimeout(timeout_s)

    @classmethod
    def connect(cls, environ: Mapping[str, str], timeout_s: float) -> PmiClient:
        """Reach the process manager through ``PMI_FD`` (duplicated, left open for MPI) or ``PMI_PORT``."""
        name = available(environ)
        raw = (environ.get(name or "") or "").strip()
        if name == "PMI_FD":
            if not (raw.isascii() and raw.isdigit()):
                raise LaunchEnvError(name="PMI_FD", value=raw, expected="a file descriptor number",
                                     fix="PMI_FD is set by mpiexec; unset it if you exported it by hand")
            try:
                sock = socket.socket(fileno=os.dup(int(raw)))
            except OSError as err:
                raise LaunchEnvError(name="PMI_FD", value=raw, expected=f"an open socket from mpiexec ({err})",
                                     fix="PMI_FD is set by mpiexec for its own processes only; unset it if it was "
                                     "inherited from another job") from err
            return cls(sock, f"PMI_FD={raw}", timeout_s)
        if name == "PMI_PORT":
            host, _, port = raw.rpartition(":")
            if not (host and port.isascii() and port.isdigit()):
                raise LaunchEnvError(name="PMI_PORT", value=raw, expected="host:port",
                                     fix="PMI_PORT is set by mpiexec; unset it if you exported it by hand")
            try:
                sock = socket.create_connection((host, int(port)), timeout=timeout_s)
            except OSError as err:
                raise RendezvousError(f"cannot reach the process manager at PMI_PORT={raw}: {err}") from err
            client = cls(sock, f"PMI_PORT={raw}", timeout_s)
            client._send(f"cmd=initack pmiid={(environ.get('PMI_ID') or '').strip()}")
            client._expect("initack")
            for _ in range(3):  # cmd=set size=N, rank=N, debug=N
                client._expect("set")
            return client
        raise LaunchEnvError(name="PMI_FD / PMI_PORT", value=None, expected="set by mpiexec",
                             fix="run under MPICH's or Intel MPI's mpiexec")

    def close(self) -> None:
        """Close ezpz's duplicate; the process manager's connection (``PMI_FD``) stays open for MPI.

        A socket timeout puts the shared open file in non-blocking mode; it is made blocking again first,
        as MPI's PMI client expects (otherwise MPI_Init fails reading with EAGAIN).
        """
        try:
            self._sock.setblocking(True)
        finally:
            self._sock.close()

    def _send(self, line: str) -> None:
        self._sock.sendall(line.encode() + b"\n")

    def _readline(self) -> str:
        buf = bytearray()
        try:
            while not buf.endswith(b"\n"):
                chunk = self._sock.recv(1)  # one byte at a time: never read past this reply
                if not chunk:
                    raise RendezvousError(f"the process manager closed the PMI connection ({self.source})")
                buf += chunk
                if len(buf) > _MAX_LINE:
                    raise RendezvousError(f"{self.source} sent a line longer than {_MAX_LINE} bytes: not a PMI-1 server")
        except socket.timeout as err:
            raise RendezvousTimeoutError(f"no answer from the process manager ({self.source}) within "
                                         f"{self._sock.gettimeout():g}s; raise EZPZ_TIMEOUT if ranks start slowly") from err
        return buf.decode(errors="replace").strip()

    def _expect(self, cmd: str) -> dict[str, str]:
        reply = _parse(self._readline())
        if reply.get("cmd") != cmd:
            raise RendezvousError(f"{self.source} answered {reply!r} where PMI-1 sends cmd={cmd}")
        if reply.get("rc", "0") != "0":
            raise RendezvousError(f"{self.source}: cmd={cmd} failed: {reply.get('msg', reply)}")
        return reply

    def call(self, request: str, reply_cmd: str) -> dict[str, str]:
        self._send(request)
        return self._expect(reply_cmd)

    def init(self) -> None:
        self.call("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init")

    def kvsname(self) -> str:
        return self.call("cmd=get_my_kvsname", "my_kvsname")["kvsname"]

    def put(self, kvsname: str, key: str, value: str) -> None:
        self.call(f"cmd=put kvsname={kvsname} key={key} value={value}", "put_result")

    def barrier(self) -> None:
        self.call("cmd=barrier_in", "barrier_out")

    def get(self, kvsname: str, key: str) -> str:
        return self.call(f"cmd=get kvsname={kvsname} key={key}", "get_result")["value"]

    def finalize(self, timeout_s: float) -> None:
        """End this process's PMI session (:mod:`ezpz.launch_env.pmi_release` says when)."""
        self._sock.settimeout(timeout_s)
        self.call("cmd=finalize", "finalize_ack")
