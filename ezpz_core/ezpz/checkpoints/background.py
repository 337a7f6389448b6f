"""Background saves: ``rt.save_checkpoint(directory, ..., background=True)`` returns once the state is copied.

:class:`BackgroundSaves` (one per runtime, ``rt.state.background``) holds at most one save in flight:

1. **Copy** (in the caller, the only part the training loop waits for): the tensors to host memory
   (:class:`~ezpz.checkpoints.host_copy.HostCopy`: pinned where they are on an accelerator).
2. **Write** (a thread): ``torch.distributed.checkpoint`` writes each rank's shard from that copy, each
   file synced to disk; its collectives run on a gloo group of their own, made once at the first
   background save, so they never interleave with the training's collectives on the default group.
3. **Agree, then complete**: the ranks gather their outcomes on that group; only when every rank's
   files are on disk does rank 0 write the values and the marker and rename the directory into
   place, then tell every rank how that went. A rank killed before this leaves the hidden staging
   directory and the previous checkpoint the latest one.

A failure is kept and raised as a :class:`~ezpz.errors.CheckpointError` on every rank (each rank hears the
same outcome), naming the rank and the file: by the same ``rt.step()`` on every rank, two steps after the
write ended (:data:`_AHEAD`), or the next save or load, or ``teardown()``, whichever comes first. The next save, a load, ``teardown()`` (also after a preemption) and the
interpreter's exit wait for the save in flight; every collective it runs is under the process group's timeout.
"""

from __future__ import annotations

import atexit
import datetime
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ezpz.checkpoints.host_copy import HostCopy
from ezpz.errors import CheckpointError
from ezpz.primitives import logger as _log

__all__ = ["BackgroundSaves"]

_AHEAD = 2
"""A failure is raised at the step boundary this many steps after rank 0's count when its outcome was sent: ranks
whose steps hold collectives are at most one step apart, so no rank has passed it and every rank raises at the same
``rt.step()`` (ranks that never meet in a collective may be further apart, and then raise at their next one)."""


class _Save:
    """One save in flight: where it goes, its host copy and what rank 0 completes it with."""

    __slots__ = ("final", "staging", "staged", "values", "kinds", "world")

    def __init__(self, final: Path, staging: Path, staged: dict[str, Any], values: bytes,
                 kinds: Mapping[str, list[str]], world: int) -> None:
        self.final, self.staging, self.staged, self.values = final, staging, staged, values
        self.kinds, self.world = dict(kinds), world


class BackgroundSaves:
    """One rank's background checkpoint writer: at most one save in flight, its failure kept until raised."""

    def __init__(self, timeout_s: float, steps: Callable[[], int] = lambda: 0) -> None:
        self.timeout_s = timeout_s
        """The background group's collective timeout: the default group's (``EZPZ_TIMEOUT``)."""
        self.host = HostCopy()
        self._steps = steps  # the steps ended on this rank (rt.step_clock.count)
        self._raise_at = 0
        self._group: Any = None
        self._thread: threading.Thread | None = None
        self._failure: CheckpointError | None = None
        self._at_exit = False

    @property
    def in_flight(self) -> bool:
        """Whether a save's write is still running."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, final: Path, staging: Path, tensors: Mapping[str, Any], values: bytes,
              kinds: Mapping[str, list[str]], world: int) -> None:
        """Copy ``tensors`` to host memory, then write them to ``staging`` in the background (every rank calls it)."""
        self.wait()
        group = self._background_group(world)
        save = _Save(final, staging, self.host.copy(tensors), values, kinds, world)
        self._thread = threading.Thread(target=self._write, args=(save, group), daemon=True,
                                        name=f"ezpz-checkpoint-writer {final.name}")
        if not self._at_exit:  # a script that ends without teardown() still finishes its last save
            atexit.register(self._finish_at_exit)
            self._at_exit = True
        self._thread.start()

    def check(self, count: int) -> None:
        """At the step boundary ending step ``count``: raise the failure of a background write that ended, at the
        step every rank was told (:data:`_AHEAD`); never waits."""
        if self._thread is not None and not self._thread.is_alive():
            if self._failure is None or count >= self._raise_at:
                self.wait()

    def wait(self) -> None:
        """Wait for the save in flight (bounded by its collectives' timeout); raise its failure, once."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def close(self) -> None:
        """Before the process group is destroyed (``teardown()``): wait, forget the group; raise a failure."""
        try:
            self.wait()
        finally:
            self._group = None

    def _finish_at_exit(self) -> None:
        try:
            self.wait()
        except CheckpointError as err:  # too late to raise in the script: said, not silent
            _log.get_logger("ezpz.checkpoints").error("background_save_failed", error=str(err))

    def _background_group(self, world: int) -> Any:
        """The gloo group the writes' collectives use (made once, by every rank), or None for one process."""
        if world == 1:
            return None
        if self._group is None:
            import torch.distributed as dist

            self._group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=self.timeout_s))
        return self._group

    def _write(self, save: _Save, group: Any) -> None:
        """The thread: write this rank's files, agree with every rank, rank 0 completes; keep the outcome."""
        import torch.distributed as dist

        rank = dist.get_rank() if group is not None else 0
        error = self._write_files(save, group, rank)
        if group is not None:
            error, _ = self._exchange(save, group, (error, 0), gather=True)
        if error is None and rank == 0:
            error = self._complete(save)
        raise_at = self._steps() + (_AHEAD if group is not None else 1)
        if group is not None:
            error, raise_at = self._exchange(save, group, (error, raise_at), gather=False)
        self._failure, self._raise_at = error, raise_at

    @staticmethod
    def _write_files(save: _Save, group: Any, rank: int) -> CheckpointError | None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import FileSystemWriter
        from torch.distributed.checkpoint.api import CheckpointException

        from ezpz.checkpoints.sharded import quiet_single_process, write_error

        try:
            with quiet_single_process(group is not None):
                dcp.save(save.staged, storage_writer=FileSystemWriter(save.staging, sync_files=True),
                         process_group=group, no_dist=group is None)
        except (Exception, CheckpointException) as err:  # DCP's own error derives from BaseException
            error = write_error(save.final, err, rank)
            error.__cause__ = err
            return error
        return None

    @staticmethod
    def _complete(save: _Save) -> CheckpointError | None:
        from ezpz.checkpoints.sharded import complete

        try:
            complete(save.staging, save.final, save.values, save.world, save.kinds)
        except Exception as err:  # the marker or the rename failed: every rank must hear it
            error = CheckpointError(name=f"save_checkpoint({str(save.final)!r}, background=True)",
                                    value=f"rank 0 failed to complete it: {type(err).__name__}: {err}",
                                    expected="a directory every rank can write and read, on a file system they all see",
                                    fix="check the path, its permissions and free space, then save again")
            error.__cause__ = err
            return error
        return None

    @staticmethod
    def _exchange(save: _Save, group: Any, outcome: tuple[CheckpointError | None, int], *,
                  gather: bool) -> tuple[CheckpointError | None, int]:
        """Every rank's outcome gathered (the first failure wins), or rank 0's (with the step to raise it at) sent to
        all; a broken group is named."""
        import torch.distributed as dist

        error, raise_at = outcome
        try:
            if gather:
                found: list[Any] = [None] * dist.get_world_size(group)
                dist.all_gather_object(found, error, group=group)
                return next((e for e in found if e is not None), None), raise_at
            box: list[Any] = [error, raise_at]
            dist.broadcast_object_list(box, src=0, group=group)
            return (box[0] if isinstance(box[0], CheckpointError) else None), int(box[1])
        except Exception as err:  # a rank that died mid-write, or a group past its timeout
            step = "gathering every rank's write" if gather else "hearing rank 0 complete it"
            failed = CheckpointError(
                name=f"save_checkpoint({str(save.final)!r}, background=True)",
                value=f"rank {dist.get_rank()}: {step}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                expected="every rank alive until the background write completes, within the group's timeout",
                fix="the previous complete checkpoint is still the latest (rt.latest_checkpoint); resume from it")
            failed.__cause__ = err
            return error or failed, raise_at
