"""The live mode on several ranks: 2 processes of the kit's own, on the plugin's device and backend.

:func:`live_rank_checks` (``check_plugin(..., live=True)``, after the
single-process checks passed ``live setup``) starts ``python -m
ezpz.testing.rank_worker`` twice, with a launcher's variables (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR=127.0.0.1``, ``MASTER_PORT`` a
free port): a real rendezvous, a real process group of whatever backend
``setup()`` chooses with the plugin selected. Each rank runs the checks of
:mod:`ezpz.testing.rank_checks` and writes its results to a JSON file in a
temporary directory; the parent merges them, one named
:class:`~ezpz.testing.report.CheckResult` per check: it passes where it
passed on every rank, fails with the failing ranks' exception text, and is
skipped (never passed) where it cannot apply, saying why.

Nothing waits forever: the ranks get ``EZPZ_TIMEOUT`` (60 s unless set) for
their rendezvous and collectives, the whole job a deadline, and a rank that
exits early leaves the others a short grace before they are stopped. Ranks
that cannot start fail ``live ranks setup``, with the end of their output.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ezpz.facts import DeviceCandidate
from ezpz.testing.hookimpls import Target, resolve
from ezpz.testing.rank_checks import RANK_CHECKS
from ezpz.testing.rank_worker import SETUP, TEARDOWN
from ezpz.testing.report import CheckResult

__all__ = ["RANKS", "RANK_CHECK_NAMES", "TIMEOUT_S", "live_rank_checks", "loadable_name", "run_ranks"]

RANKS = 2
"""How many ranks the kit starts: the fewest that exercise every collective, in one small job."""
TIMEOUT_S = 180.0
"""The whole job's deadline in seconds (starting Python and torch twice, setup(), every check, teardown()): a
passing job takes seconds, tens on a loaded machine; below pytest's 300 s per test, so the kit names what hung."""
_GRACE_S = 20.0  # after one rank exits with an error, how long the others get to finish
_RANK_TIMEOUT = "60"  # EZPZ_TIMEOUT for the ranks (rendezvous, collectives) unless the environment sets one

#: The multi-rank results, in the order they are reported.
RANK_CHECK_NAMES = (SETUP, *(name for name, _ in RANK_CHECKS), TEARDOWN)

#: Variables through which a launcher tells a process its place: the ranks get the kit's own, and none of the
#: launcher that may have started this process (a check run inside an mpiexec or Slurm job is still 2 ranks).
_LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "PALS_", "SLURM_", "TORCHELASTIC_", "MPI_LOCAL", "PBS_", "FLUX_",
                      "JSM_", "PET_", "SKYPILOT_", "LSB_")
_LAUNCHER_NAMES = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                             "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT", "NPROC_PER_NODE",
                             "KUBERNETES_SERVICE_HOST", "EZPZ_LAUNCH_ID", "EZPZ_LAUNCHER_PID", "EZPZ_ALLOCATION",
                             "EZPZ_ATTEMPT"})


def live_rank_checks(t: Target, device: DeviceCandidate, environ: Mapping[str, str]) -> list[CheckResult]:
    """The multi-rank checks on ``device`` (the one the plugin offers here), or one skipped result saying why not."""
    spec = loadable_name(t)
    if spec is None:
        return [_skip(f"the ranks load the plugin by name, and {t.name} ({t.target}) has none a new process can "
                      "import: pass its entry-point name or import path")]
    if device.count < RANKS and not device.shared:
        return [_skip(f"{RANKS} ranks need {RANKS} {device.device_type} devices (or a shared one); {t.name} "
                      f"offers {device.count} here")]
    try:
        import torch.distributed as dist

        available = dist.is_available()
    except ImportError:
        available = False
    if not available:
        return [_skip("this torch was built without torch.distributed")]
    no_module = _without_device_module(device.device_type)
    if no_module:
        return [_skip(no_module)]
    return run_ranks(spec, device.device_type, environ)


def _without_device_module(device_type: str) -> str:
    """Why the ranks cannot apply to a device type torch has no device module for (torch_xla's ``xla``), or ""."""
    from ezpz.primitives.device_module import device_module

    if device_module(device_type) is None:
        return (f"torch has no device module for {device_type!r} (torch.get_device_module raises): the kit's ranks "
                "drive a device through torch.distributed on plain RANK/WORLD_SIZE processes, DeviceMesh and FSDP2, "
                "which find the device's index and streams there; a lazy device's collectives run under its own runtime")
    return ""


def _skip(why: str) -> CheckResult:
    return CheckResult("live ranks", True, f"skipped: {why}", skipped=True)


def loadable_name(t: Target) -> str | None:
    """A name that loads ``t``'s plugin object in a new process: its entry point, import path or ``module:attr``."""
    for name in (t.name, t.target):
        try:
            if resolve(name).plugin is t.plugin:
                return name
        except Exception:  # noqa: BLE001,S112  not a name for it
            continue
    module = sys.modules.get(t.module or "")
    if module is None or module.__name__ == "__main__":
        return None
    for attr, value in vars(module).items():
        if value is t.plugin:
            return f"{module.__name__}:{attr}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_env(base: Mapping[str, str], rank: int, port: int) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not (k.startswith(_LAUNCHER_PREFIXES) or k in _LAUNCHER_NAMES)}
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(RANKS), LOCAL_WORLD_SIZE=str(RANKS),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    env.setdefault("EZPZ_TIMEOUT", _RANK_TIMEOUT)
    env.setdefault("OMP_NUM_THREADS", "1")
    # the plugin importable as it is here (a plugin module beside the tests, not installed)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [*sys.path, base.get("PYTHONPATH", "")] if p)
    return env


def run_ranks(spec: str, device_type: str, environ: Mapping[str, str], *,
              timeout_s: float = TIMEOUT_S) -> list[CheckResult]:
    """Start :data:`RANKS` workers for plugin ``spec`` on ``device_type``, wait (bounded), merge their results.

    A port taken by someone else between choosing it and rank 0 listening on it
    gets one more try, on another port.
    """
    base = {**os.environ, **environ}
    results = _one_job(spec, device_type, base, timeout_s)
    setup = results[0]
    if not setup.passed and _PORT_TAKEN in setup.detail.lower():
        results = _one_job(spec, device_type, base, timeout_s)
    return results


_PORT_TAKEN = "address already in use"


def _one_job(spec: str, device_type: str, base: Mapping[str, str], timeout_s: float) -> list[CheckResult]:
    with tempfile.TemporaryDirectory(prefix="ezpz-live-ranks-") as scratch:
        port = _free_port()
        procs: list[subprocess.Popen[bytes]] = []
        logs = []
        started = time.monotonic()
        try:
            for rank in range(RANKS):
                log = open(Path(scratch) / f"rank{rank}.log", "w+b")  # noqa: SIM115  closed below
                logs.append(log)
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "ezpz.testing.rank_worker", spec, device_type, scratch],
                    env=_rank_env(base, rank, port), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            stopped = _wait(procs, started, timeout_s)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for log in logs:
                log.close()
        took = time.monotonic() - started
        records = [_read(Path(scratch) / f"rank{r}.json") for r in range(RANKS)]
        tails = [_tail(Path(scratch) / f"rank{r}.log") for r in range(RANKS)]
    return _merge(records, [p.returncode for p in procs], tails, stopped, took, port)


def _wait(procs: list[subprocess.Popen[bytes]], started: float, timeout_s: float) -> str:
    """Wait for every rank; return why some were stopped ("" when all exited by themselves)."""
    deadline, grace_end = started + timeout_s, None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return ""
        now = time.monotonic()
        if now > deadline:
            return f"the job's deadline ({timeout_s:g} s) passed"
        if grace_end is None and any(c not in (None, 0) for c in codes):
            grace_end = now + _GRACE_S
        if grace_end is not None and now > grace_end:
            return f"another rank had exited with an error {_GRACE_S:g} s earlier"
        time.sleep(0.05)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"results": [], "running": None}
    return data if isinstance(data, dict) else {"results": [], "running": None}


def _tail(path: Path, lines: int = 6, chars: int = 1500) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return " | ".join(line for line in text.strip().splitlines()[-lines:] if line.strip())[-chars:]


def _merge(records: list[dict[str, Any]], codes: list[int | None], tails: list[str], stopped: str,
           took: float, port: int) -> list[CheckResult]:
    by_rank = [{r["name"]: r for r in rec.get("results", []) if isinstance(r, dict) and "name" in r}
               for rec in records]
    out: list[CheckResult] = []
    for name in RANK_CHECK_NAMES:
        seen = [(rank, got[name]) for rank, got in enumerate(by_rank) if name in got]
        missing = [rank for rank, got in enumerate(by_rank) if name not in got]
        if not seen:
            # Every rank that did not finish setup is named (one may be inside it, another still importing torch);
            # for a later check, the ranks that were inside it.
            unfinished = missing if name == SETUP else [r for r in missing if records[r].get("running") == name]
            if unfinished:
                out.append(CheckResult(name, False, _why_unfinished(name, unfinished, codes, tails, stopped)))
            continue
        failed = [(rank, r) for rank, r in seen if not r.get("passed")]
        if failed or missing:
            said = _by_detail(failed)
            if missing:
                said.append(_why_unfinished(name, missing, codes, tails, stopped))
            out.append(CheckResult(name, False, "; ".join(said)))
        elif all(r.get("skipped") for _, r in seen):
            out.append(CheckResult(name, True, str(seen[0][1].get("detail", "")), skipped=True))
        else:
            detail = str(seen[0][1].get("detail", ""))
            if name == SETUP:
                detail += f" (python -m ezpz.testing.rank_worker, rendezvous 127.0.0.1:{port}, {took:.1f} s)"
            out.append(CheckResult(name, True, detail))
    return out


def _by_detail(failed: list[tuple[int, dict[str, Any]]]) -> list[str]:
    """``rank 0: X`` per failure, ranks that said the same thing together (``ranks 0, 1: X``)."""
    ranks: dict[str, list[int]] = {}
    for rank, result in failed:
        ranks.setdefault(str(result.get("detail", "")), []).append(rank)
    return [f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}: {detail}" for detail, rs in ranks.items()]


def _why_unfinished(name: str, ranks: list[int], codes: list[int | None], tails: list[str], stopped: str) -> str:
    said = []
    for rank in ranks:
        code = codes[rank]
        if stopped and code is not None and code < 0:
            how = f"stopped in {name!r}: {stopped}"
        else:
            how = f"exited with status {code} without finishing {name!r}"
        said.append(f"rank {rank} {how}" + (f"; its last output: {tails[rank]}" if tails[rank] else ""))
    return "; ".join(said)
