"""Child processes carry the mode: spawn, forkserver and fork children, ``mp.spawn``, DataLoader workers.

A spawned (or forkserver) child is a fresh interpreter: the parent adds one entry to multiprocessing's
preparation data (``spawn.get_preparation_data``, which both start methods send first); unpickling it in the
child starts the mode there (:func:`start_child`) before ``prepare()`` imports the script as ``__mp_main__``, so
the script's module-level code already runs under it. The child's session has the parent's project roots and
device; its ``setup()`` sees no launcher variables (a child is not a rank of the job: the script makes its own
group if it wants one). A forked child inherits the mode as it is; its calls are counted afresh. Each child that
ran a session, and each forked child that redirected something, writes ``rank-<parent rank>-pid-<pid>.json``
beside its parent's report at exit; rank 0's summary line counts them. (A forkserver's server imports
``__main__`` itself, without the mode: module-level CUDA calls of a script run that way are not redirected.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ezpz.cuda_compat.context import Compat

__all__ = ["LAUNCHER_NAMES", "LAUNCHER_PREFIXES", "install", "start_child"]

#: Variables a launcher sets for its ranks (hidden from a child's ``setup()``: a child is not one of them).
LAUNCHER_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "NPROC_PER_NODE",
                  "NODE_RANK", "TORCHELASTIC_RUN_ID")
LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "PALS_", "SLURM_", "TORCHELASTIC_", "MPI_LOCAL", "PBS_", "FLUX_",
                     "LSB_", "JSM_", "PET_", "MV2_", "I_MPI_", "HYDRA_")

KEY = "ezpz_cuda_compat"


class _Boot:
    """What the parent puts in the preparation data: unpickled in the child, it starts the mode there."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return start_child, (self.config,)


def install(c: Compat) -> None:
    import multiprocessing.spawn as spawn
    import multiprocessing.util as util

    session = c.session
    if session is None:
        return
    config = {"script": str(session.script), "argv": list(session.argv), "rank": c.rt.rank,
              "device": c.rt.device_type, "backend": c.rt.backend,
              "roots": [(r.path, r.included, r.why) for r in session.roots], "report_dir": str(_report_dir(c))}
    preparation = spawn.get_preparation_data

    def with_mode(name: str) -> dict[str, Any]:
        data = preparation(name)
        data[KEY] = _Boot(config)
        return data

    c.patches.replace(spawn, "get_preparation_data", with_mode)
    c.forked = _Forked(c, config)  # kept alive: the after-fork registry is weak
    util.register_after_fork(c.forked, _Forked.in_child)


def _report_dir(c: Compat) -> Any:
    from ezpz.cuda_compat.report import report_dir

    return report_dir(os.environ, c.rt.world_size).resolve()


class _Forked:
    """A forked child (``fork`` start method: DataLoader workers by default): its calls are counted afresh."""

    def __init__(self, c: Compat, config: dict[str, Any]) -> None:
        self.c, self.config, self.pid = c, config, os.getpid()

    def in_child(self) -> None:
        import multiprocessing.util as util

        c = self.c
        if c.patches.undone or os.getpid() == self.pid:  # the mode is over, or this is no fork (a spawned child)
            return
        for site in c.scope.redirected:
            site.entries.clear()
        c.scope.redirected.clear()
        c.unsupported.clear()
        util.Finalize(self, self.write, exitpriority=10)

    def write(self) -> None:
        c = self.c
        if not (c.scope.redirected or c.unsupported):
            return
        from pathlib import Path

        from ezpz.cuda_compat.report import write_report

        header = {"script": self.config["script"], "rank": self.config["rank"], "device": c.target,
                  "process": f"forked child {os.getpid()} of rank {self.config['rank']}", "unsupported": c.unsupported,
                  "redirecting": True}
        name = f"rank-{self.config['rank']}-pid-{os.getpid()}.json"
        write_report(Path(self.config["report_dir"]) / name, header, c.scope.redirected)


@contextmanager
def _single_process_view() -> Iterator[None]:
    """``os.environ`` without the launcher's variables, for the child's ``setup()``; put back afterwards."""
    hidden = {k: v for k, v in os.environ.items() if k in LAUNCHER_NAMES or k.startswith(LAUNCHER_PREFIXES)}
    for key in hidden:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(hidden)


def start_child(config: dict[str, Any]) -> None:
    """Start the mode in a spawned or forkserver child (called while it unpickles its preparation data)."""
    import multiprocessing.util as util

    from ezpz.cuda_compat.roots import Root
    from ezpz.cuda_compat.session import Session

    session = Session(config["script"], config["argv"])
    session.roots = [Root(*r) for r in config["roots"]]
    session.process = f"child {os.getpid()} of rank {config['rank']} (spawned)"
    session.report_name = f"rank-{config['rank']}-pid-{os.getpid()}.json"
    os.environ.setdefault("EZPZ_CUDA_COMPAT_DIR", config["report_dir"])
    asked = {k: os.environ.get(k) for k in ("EZPZ_DEVICE", "EZPZ_BACKEND")}
    os.environ["EZPZ_DEVICE"], os.environ["EZPZ_BACKEND"] = config["device"], config["backend"]
    try:
        with _single_process_view():
            session.start()
    finally:
        for key, value in asked.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    # the report at exit: a spawned child keeps this finalizer; a forkserver child clears it, then runs the
    # after-fork hooks (a spawned one does not), which register it again
    util.Finalize(session, session.finish, exitpriority=10)
    util.register_after_fork(session, lambda s: util.Finalize(s, s.finish, exitpriority=10))
    _children.append(session)


_children: list[Any] = []  # the child's session, kept alive until its finalizer writes the report
