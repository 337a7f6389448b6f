"""Writing and reading a checkpoint through ``torch.distributed.checkpoint`` (DCP), sharded and resharded.

``state`` maps names to what a script trains: modules (plain, DDP, FSDP2), optimizers,
objects with ``state_dict``/``load_state_dict`` (LR schedulers, grad scalers) and plain
values (``step=10``). Modules and optimizers go through DCP's state-dict API
(``get_model_state_dict``/``get_optimizer_state_dict``), so every rank writes its own shard,
DDP's ``module.`` prefix is dropped, and a checkpoint loads on any world size; the other
entries are written by rank 0 to :data:`~ezpz.checkpoints.layout.VALUES`. The directory
becomes complete last (:mod:`ezpz.checkpoints.layout`).

Every collective here runs on the default process group, under its timeout (``EZPZ_TIMEOUT``
for a group ``setup()`` made): a rank that never arrives is an error, not a hang. Rank 0's
file-system steps send their outcome to every rank, so a failure there is raised on all of
them. Without a process group (one process) the same format is written and read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ezpz.checkpoints.layout import FORMAT, MARKER, VALUES, read_marker, staging_path
from ezpz.errors import CheckpointError
from ezpz.primitives.atomic_file import write_json_atomically

__all__ = ["load_checkpoint", "save_checkpoint"]


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
            self.optimizers[key] = (optimizer, found.pop())

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
def _quiet_single_process(distributed: bool) -> Iterator[None]:
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


def _on_rank0(step: str, directory: Path, fn: Callable[[], None], distributed: bool) -> None:
    """Run ``fn`` on rank 0 only and raise its failure on every rank (one broadcast), so no rank waits forever."""
    import torch.distributed as dist

    error, cause = None, None
    if not distributed or dist.get_rank() == 0:
        try:
            fn()
        except Exception as err:  # any failure of the file system step: every rank must hear of it
            error, cause = f"{type(err).__name__}: {err}", err
    if distributed:
        box = [error]
        dist.broadcast_object_list(box, src=0)
        error = box[0]
    if isinstance(cause, CheckpointError):  # already names the input and the fix
        raise cause
    if error is not None:
        raise CheckpointError(name=f"save_checkpoint({str(directory)!r})", value=f"rank 0 failed to {step}: {error}",
                              expected="a directory every rank can write, on a file system they all see",
                              fix="check the path, its permissions and free space, then save again") from cause


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


def save_checkpoint(directory: str | os.PathLike[str], state: Mapping[str, Any]) -> Path:
    """Write ``state`` as a checkpoint at ``directory`` (complete last); every rank calls it. Returns the path."""
    import torch
    import torch.distributed.checkpoint as dcp

    final = Path(directory).absolute()
    sorted_state = _State(state, "save_checkpoint")
    if not sorted_state.modules and not sorted_state.optimizers and not sorted_state.stateful and not sorted_state.values:
        raise CheckpointError(name="save_checkpoint(**state)", value={}, expected="at least one thing to save",
                              fix="pass what to save by name: save_checkpoint(directory, model=model, optim=optim, step=step)")
    staging = staging_path(final)
    distributed = _distributed()
    values: list[bytes] = []  # rank 0's, made (or refused) before anything is written

    def prepare() -> None:
        values.append(_values_bytes(sorted_state))
        final.parent.mkdir(parents=True, exist_ok=True)
        if staging.exists():  # an earlier save of this name that never finished
            shutil.rmtree(staging)
        staging.mkdir()

    _on_rank0("prepare", staging, prepare, distributed)
    with _quiet_single_process(distributed):
        dcp.save(sorted_state.tensor_state(), checkpoint_id=staging, no_dist=not distributed)
    world = torch.distributed.get_world_size() if distributed else 1

    def complete() -> None:
        with open(staging / VALUES, "wb") as out:
            out.write(values[0])
            out.flush()
            os.fsync(out.fileno())
        write_json_atomically(staging / MARKER, {"format": FORMAT, "world_size": world, **sorted_state.kinds()},
                              fsync=True)
        replaced = final.with_name(f".{final.name}.replaced")
        if final.exists():  # the same step saved again (a resumed run): the older copy goes once the new one is in
            if replaced.exists():
                shutil.rmtree(replaced)
            final.rename(replaced)
        staging.rename(final)
        if replaced.exists():
            shutil.rmtree(replaced, ignore_errors=True)

    _on_rank0("complete it", final, complete, distributed)
    return final


def load_checkpoint(directory: str | os.PathLike[str], state: Mapping[str, Any]) -> dict[str, Any]:
    """Restore ``state``'s modules, optimizers and stateful objects in place from ``directory``; return its values."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    path = Path(directory).absolute()
    marker = read_marker(path)  # raises, naming what is missing, unless the directory is complete
    sorted_state = _State(state, "load_checkpoint")
    if sorted_state.values:
        key = next(iter(sorted_state.values))
        raise CheckpointError(
            name=f"load_checkpoint({key}=...)", value=sorted_state.values[key],
            expected="modules, optimizers and objects with load_state_dict, restored in place",
            fix=f"drop {key}=...: plain values come back as load_checkpoint's result, e.g. "
                f"values = rt.load_checkpoint(directory, model=model); {key} = values[{key!r}]")
    for kind, names in sorted_state.kinds().items():
        absent = [n for n in names if n not in marker.get(kind, ())]
        if absent:
            saved = {k: v for k, v in marker.items() if k in ("modules", "optimizers", "stateful", "values")}
            raise CheckpointError(
                name=f"load_checkpoint({absent[0]}=...)", value=f"not among the {kind} saved in {path}",
                expected=f"names the checkpoint holds: {saved}",
                fix="pass each object under the name it was saved with")
    tensors = sorted_state.tensor_state()
    distributed = _distributed()
    with _quiet_single_process(distributed):
        dcp.load(tensors, checkpoint_id=path, no_dist=not distributed)
    for key, module in sorted_state.modules.items():
        set_model_state_dict(module, tensors[key])
    for key, (optimizer, model_key) in sorted_state.optimizers.items():
        set_optimizer_state_dict(sorted_state.modules[model_key], optimizer, tensors[key])
    with open(path / VALUES, "rb") as f:
        saved_values = torch.load(f, weights_only=True)
    for key, obj in sorted_state.stateful.items():
        obj.load_state_dict(saved_values["stateful"][key])
    return dict(saved_values["values"])
