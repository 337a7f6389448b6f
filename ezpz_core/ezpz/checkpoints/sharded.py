"""Writing and reading a checkpoint through ``torch.distributed.checkpoint`` (DCP), sharded and resharded.

``state`` maps names to what a script trains: modules (plain, DDP, FSDP2), optimizers,
objects with ``state_dict``/``load_state_dict`` (LR schedulers, grad scalers) and plain
values (``step=10``). Modules and optimizers go through DCP's state-dict API
(``get_model_state_dict``/``get_optimizer_state_dict``), so every rank writes its own shard,
DDP's ``module.`` prefix is dropped, and a checkpoint loads on any world size; the other
entries are written by rank 0 to :data:`~ezpz.checkpoints.layout.VALUES`. The directory
becomes complete last (:mod:`ezpz.checkpoints.layout`); a save writes only where nothing is, into an
empty directory or over an ezpz checkpoint (:mod:`.ownership`), which it replaces atomically
(:mod:`.replace`). A load checks every file first (:mod:`.verify`) and reads nothing that could
run code (:mod:`.safe_read`): each failure is a :class:`~ezpz.errors.CheckpointError` on every rank.

Every collective here runs on the default process group, under its timeout (``EZPZ_TIMEOUT``
for a group ``setup()`` made): a rank that never arrives is an error, not a hang. Rank 0's
file-system steps send their outcome to every rank, so a failure there is raised on all of
them. Without a process group (one process) the same format is written and read.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ezpz.checkpoints.layout import FORMAT, MARKER, VALUES, staging_path
from ezpz.checkpoints.ownership import claim, tidy
from ezpz.checkpoints.replace import install
from ezpz.errors import CheckpointError
from ezpz.primitives.atomic_file import write_json_atomically

if TYPE_CHECKING:
    from ezpz.checkpoints.background import BackgroundSaves

_T = TypeVar("_T")

__all__ = ["complete", "load_checkpoint", "quiet_single_process", "save_checkpoint", "write_error"]


class _State:
    """``state`` sorted by kind: modules, optimizers (each with the module it optimizes), stateful objects, values."""

    def __init__(self, state: Mapping[str, Any], who: str) -> None:
        import torch

        self.modules: dict[str, Any] = {}
        self.optimizers: dict[str, tuple[Any, str]] = {}
        self.stateful: dict[str, Any] = {}
        self.values: dict[str, Any] = {}
        optimizers: dict[str, Any] = {}
        for key, value in state.items():
            if isinstance(value, torch.nn.Module):
                self.modules[key] = value
            elif isinstance(value, torch.optim.Optimizer):
                optimizers[key] = value
            elif callable(getattr(value, "state_dict", None)) and callable(getattr(value, "load_state_dict", None)):
                self.stateful[key] = value
            else:
                self.values[key] = value
        owner = {id(p): key for key, module in self.modules.items() for p in module.parameters()}
        for key, optimizer in optimizers.items():
            params = [p for group in optimizer.param_groups for p in group["params"]]
            found = {owner.get(id(p)) for p in params}
            if None in found or len(found) != 1:
                raise CheckpointError(
                    name=f"{who}({key}=...)", value=type(optimizer).__name__,
                    expected="an optimizer over the parameters of one module passed in the same call "
                             f"(modules here: {', '.join(self.modules) or 'none'})",
                    fix=f"pass the model it optimizes too, e.g. {who}(directory, model=model, {key}={key}); "
                        "create the optimizer after rt.shard()/DDP so it holds the wrapped model's parameters")
            self.optimizers[key] = (optimizer, str(found.pop()))  # the one module's name (None was refused)

    def kinds(self) -> dict[str, list[str]]:
        return {"modules": list(self.modules), "optimizers": list(self.optimizers),
                "stateful": list(self.stateful), "values": list(self.values)}

    def tensor_state(self) -> dict[str, Any]:
        """The DCP state dict: each module's and optimizer's state dict under its name, sharded as the model is."""
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

        out: dict[str, Any] = {key: get_model_state_dict(module) for key, module in self.modules.items()}
        for key, (optimizer, model_key) in self.optimizers.items():
            out[key] = get_optimizer_state_dict(self.modules[model_key], optimizer)
        return out


@contextlib.contextmanager
def quiet_single_process(distributed: bool) -> Iterator[None]:
    """Without a process group DCP warns that it assumes one process, even when told so (``no_dist``): it is so."""
    if distributed:
        yield
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        yield


def _distributed() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def _path(directory: object, who: str) -> Path:
    """``directory`` as an absolute path; anything but a non-empty ``str`` or ``os.PathLike`` is refused by name."""
    raw = os.fspath(directory) if isinstance(directory, (str, os.PathLike)) else None
    if not isinstance(raw, str) or not raw or "\0" in raw:
        raise CheckpointError(name=f"rt.{who}(directory)", value=directory,
                              expected="a non-empty path: a str or os.PathLike (pathlib.Path)",
                              fix=f"pass the checkpoint's directory, e.g. rt.{who}('checkpoints/step-000010', ...)")
    return Path(raw).absolute()


def _first_line(err: object) -> str:
    if isinstance(err, tuple) and err:  # DCP keeps (exception, traceback) per rank
        err = err[0]
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:500]


def _failure(where: str, err: BaseException) -> str:
    """``err`` in one line, its cause first: DCP's ``CheckpointException`` is unpacked to each rank's failure."""
    failures = getattr(err, "failures", None)
    if isinstance(failures, dict) and failures:
        return f"{where}: {'; '.join(f'rank {rank}: {_first_line(e)}' for rank, e in sorted(failures.items()))}"
    return f"{where}: {_first_line(err)}"


def _collective_error(path: Path, who: str, step: str, err: BaseException) -> CheckpointError:
    return CheckpointError(name=f"{who}({str(path)!r})", value=_failure(step, err),
                           expected="every rank in the same call, on a file system they all see",
                           fix="call it on every rank with the same directory and names; a rank that never arrived "
                               "is named in the process group's own error above")


def _on_rank0(who: str, path: Path, step: str, fn: Callable[[], _T], distributed: bool) -> _T | None:
    """Run ``fn`` on rank 0 only and raise its failure on every rank (one broadcast, under the group's timeout).

    Returns ``fn``'s result on rank 0 and with it on every rank (it travels in the broadcast).
    """
    import torch.distributed as dist

    error: CheckpointError | None = None
    result: _T | None = None
    cause: BaseException | None = None
    if not distributed or dist.get_rank() == 0:
        try:
            result = fn()
        except CheckpointError as err:  # already names the input and the fix
            error, cause = err, err.__cause__
        except Exception as err:  # any failure of the file system step: every rank must hear of it
            error = CheckpointError(name=f"{who}({str(path)!r})", value=f"rank 0 failed to {step}: "
                                    f"{type(err).__name__}: {err}",
                                    expected="a directory every rank can write and read, on a file system they all see",
                                    fix="check the path, its permissions and free space, then try again")
            cause = err
    if distributed:
        box: list[Any] = [error, result]
        try:
            dist.broadcast_object_list(box, src=0)
        except Exception as err:  # a rank that never came, or a broken group: named, never a hang
            raise _collective_error(path, who, f"waiting for rank 0 to {step}", err) from err
        if dist.get_rank() != 0:
            error, result = box
    if error is not None:
        raise error from cause
    return result


def _agree(who: str, path: Path, error: CheckpointError | None, distributed: bool) -> None:
    """Every rank's own check, gathered: each raises the first rank's error, so all fail or none does."""
    import torch.distributed as dist

    if distributed:
        found: list[Any] = [None] * dist.get_world_size()
        try:
            dist.all_gather_object(found, error)
        except Exception as err:
            raise _collective_error(path, who, "gathering every rank's check", err) from err
        first = next((e for e in found if e is not None), None)
        if error is None and first is not None:
            error = first
    if error is not None:
        raise error from error.__cause__


def _values_bytes(sorted_state: _State) -> bytes:
    """The plain values and stateful objects' states as ``torch.save`` bytes, refused unless ``load_checkpoint`` can
    read them back (it loads with ``weights_only=True``: no arbitrary code)."""
    import io
    import pickle

    import torch

    out = io.BytesIO()
    torch.save({"values": sorted_state.values,
                "stateful": {key: obj.state_dict() for key, obj in sorted_state.stateful.items()}}, out)
    try:
        torch.load(io.BytesIO(out.getvalue()), weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, AttributeError) as err:
        names = ", ".join([*sorted_state.values, *sorted_state.stateful])
        raise CheckpointError(
            name=f"save_checkpoint({names})", value=" ".join(str(err).split())[:300],
            expected="plain values torch.load(weights_only=True) reads: numbers, strings, lists, dicts, tensors",
            fix="save the object's state instead (its state_dict() or a dict of numbers), or pass it as a module, "
                "an optimizer or an object with state_dict()/load_state_dict()") from None
    return out.getvalue()


def complete(staging: Path, final: Path, values: bytes, world: int, kinds: Mapping[str, list[str]]) -> None:
    """Rank 0, once every rank's shard is on disk: the values, the marker (last, synced), then the rename into place."""
    from ezpz.checkpoints.verify import fingerprint

    with open(staging / VALUES, "wb") as out:
        out.write(values)
        out.flush()
        os.fsync(out.fileno())
    files = {entry.name: fingerprint(Path(entry.path)) for entry in os.scandir(staging)
             if entry.is_file(follow_symlinks=False)}
    write_json_atomically(staging / MARKER, {"format": FORMAT, "world_size": world, **kinds, "files": files},
                          fsync=True)
    install(staging, final, claim(final))  # looked at again: nothing appeared there since prepare


def write_error(final: Path, err: BaseException, rank: int | None = None) -> CheckpointError:
    """A failure writing the shards, each rank's cause named (DCP's ``CheckpointException`` unpacked; else ``rank``)."""
    where = "writing the shards" if rank is None or isinstance(getattr(err, "failures", None), dict) \
        else f"rank {rank} writing its shard"
    return CheckpointError(name=f"save_checkpoint({str(final)!r})", value=_failure(where, err),
                           expected="a directory every rank can write, on a file system they all see",
                           fix="check the path, its permissions and free space, then save again")


def save_checkpoint(directory: str | os.PathLike[str], state: Mapping[str, Any],
                    background: BackgroundSaves | None = None) -> Path:
    """Write ``state`` as a checkpoint at ``directory`` (complete last); every rank calls it. Returns the path.

    Rank 0 decides first, for every rank, whether the path is free, an empty directory or an ezpz
    checkpoint (:func:`~ezpz.checkpoints.ownership.claim`); anything else is refused before a byte is written.
    With ``background``, the tensors are copied to host memory and written by its thread
    (:mod:`ezpz.checkpoints.background`): this returns once the copy is made, before the files are.
    """
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    final = _path(directory, "save_checkpoint")
    sorted_state = _State(state, "save_checkpoint")
    if not sorted_state.modules and not sorted_state.optimizers and not sorted_state.stateful and not sorted_state.values:
        raise CheckpointError(name="save_checkpoint(**state)", value={}, expected="at least one thing to save",
                              fix="pass what to save by name: save_checkpoint(directory, model=model, optim=optim, step=step)")
    staging = staging_path(final)
    distributed = _distributed()
    values: list[bytes] = []  # rank 0's, made (or refused) before anything is written

    def prepare() -> None:
        values.append(_values_bytes(sorted_state))
        if os.path.lexists(final):
            claim(final)  # refuses what ezpz did not write, before anything is touched
        tidy(final)  # what an interrupted save of this path left (ezpz's own directories only); may put one back
        claim(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()

    if background is not None:
        background.wait()  # the one in flight first: its failure is raised here, before this one starts
    _on_rank0("save_checkpoint", final, "prepare", prepare, distributed)
    world = torch.distributed.get_world_size() if distributed else 1
    if background is not None:
        background.start(final, staging, sorted_state.tensor_state(), values[0] if values else b"",
                         sorted_state.kinds(), world)
        return final
    try:
        with quiet_single_process(distributed):
            dcp.save(sorted_state.tensor_state(), checkpoint_id=staging, no_dist=not distributed)
    except (Exception, CheckpointException) as err:  # DCP's own error derives from BaseException
        raise write_error(final, err) from err
    _on_rank0("save_checkpoint", final, "complete it",
              lambda: complete(staging, final, values[0], world, sorted_state.kinds()), distributed)
    return final


def load_checkpoint(directory: str | os.PathLike[str], state: Mapping[str, Any]) -> dict[str, Any]:
    """Restore ``state``'s modules, optimizers and stateful objects in place from ``directory``; return its values.

    Rank 0 checks every file first (:func:`~ezpz.checkpoints.verify.check_files`), every rank its tensors'
    shapes; a failure anywhere is the same :class:`~ezpz.errors.CheckpointError` on every rank.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    from ezpz.checkpoints.safe_read import SafeLoadPlanner, SafeReader
    from ezpz.checkpoints.verify import check_files, check_shapes

    path = _path(directory, "load_checkpoint")
    sorted_state = _State(state, "load_checkpoint")
    if sorted_state.values:
        key = next(iter(sorted_state.values))
        raise CheckpointError(
            name=f"load_checkpoint({key}=...)", value=sorted_state.values[key],
            expected="modules, optimizers and objects with load_state_dict, restored in place",
            fix=f"drop {key}=...: plain values come back as load_checkpoint's result, e.g. "
                f"values = rt.load_checkpoint(directory, model=model); {key} = values[{key!r}]")
    distributed = _distributed()
    checked = _on_rank0("load_checkpoint", path, "read the checkpoint", lambda: check_files(path), distributed)
    assert checked is not None  # _on_rank0 raised otherwise
    marker, metadata, saved_values = checked
    mine: CheckpointError | None = None
    tensors: dict[str, Any] = {}
    try:
        for kind, names in sorted_state.kinds().items():
            absent = [n for n in names if n not in marker.get(kind, ())]
            if absent:
                saved = {k: v for k, v in marker.items() if k in ("modules", "optimizers", "stateful", "values")}
                raise CheckpointError(
                    name=f"load_checkpoint({absent[0]}=...)", value=f"not among the {kind} saved in {path}",
                    expected=f"names the checkpoint holds: {saved}",
                    fix="pass each object under the name it was saved with")
        tensors = sorted_state.tensor_state()
        check_shapes(path, metadata, tensors, list(sorted_state.modules))
    except CheckpointError as err:
        mine = err
    except Exception as err:  # this rank alone failed to build its state: the others must hear it, not wait
        mine = CheckpointError(name=f"load_checkpoint({str(path)!r})", value=_failure("preparing this rank's state", err),
                               expected="modules and optimizers DCP's state-dict API reads",
                               fix="pass the objects as saved (modules, their optimizers, objects with state_dict)")
        mine.__cause__ = err
    _agree("load_checkpoint", path, mine, distributed)
    try:
        with quiet_single_process(distributed):
            dcp.load(tensors, storage_reader=SafeReader(path), planner=SafeLoadPlanner(), no_dist=not distributed)
        for key, module in sorted_state.modules.items():
            set_model_state_dict(module, tensors[key])
        for key, (optimizer, model_key) in sorted_state.optimizers.items():
            set_optimizer_state_dict(sorted_state.modules[model_key], optimizer, tensors[key])
        for key, obj in sorted_state.stateful.items():
            obj.load_state_dict(saved_values["stateful"][key])
    except (Exception, CheckpointException) as err:  # DCP's own error derives from BaseException
        raise CheckpointError(name=f"load_checkpoint({str(path)!r})", value=_failure("reading the shards", err),
                              expected="a checkpoint as save_checkpoint wrote it, read by every rank",
                              fix="resume from another checkpoint (ezpz.checkpoints.latest_checkpoint lists complete "
                                  "ones)") from err
    return dict(saved_values["values"])
