"""One sample of torch's own test databases, run on the CPU and on a device, and the verdict.

The databases are ``op_db`` (``torch.testing._internal.common_methods_invocations``)
and ``module_db`` (``torch.testing._internal.common_modules``), at float32. A
sample is made on the CPU, moved to the device with its storage layout (a view
of a larger storage stays one, so ``as_strided`` reads what it read on the
CPU), and run on both under the same seed; the outputs (and, for modules, the
gradients of the parameters and inputs) are compared with
``torch.testing.assert_close``'s float32 tolerances.

A verdict is one of ``equal``, ``different``, ``raised`` (the device raised
where the CPU did not) or ``skipped`` (the CPU raised too, or gives a different
answer on a second identical run: uninitialised memory, say; or the device's
answer differs where torch itself skips the entry's CPU comparison, giving its
reason, as for ``empty``'s garbage or another generator's random numbers;
torch's expected failures are not excused). ``crashed`` is
given by the parent (:mod:`ezpz.testing.torch_db`) when the process running a
sample dies. Importing torch's test databases changes the process
(``torch.testing._internal.common_utils`` turns off torch's global backend
flags), so this module runs only in the kit's worker processes.
"""

from __future__ import annotations

import copy
import unittest
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["SAMPLES_PER_ENTRY", "Verdict", "entries", "run_entry"]

#: Samples taken from each database entry (the first ones the entry yields).
SAMPLES_PER_ENTRY = 3
_DTYPE = torch.float32
Verdict = dict[str, Any]


def _dbs() -> tuple[list[Any], list[Any]]:
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_modules import module_db

    return op_db, module_db


def _op_name(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def entries() -> list[dict[str, Any]]:
    """Every float32 entry of both databases: ``{"kind": "op"|"module", "index": i, "name": ...}``."""
    op_db, module_db = _dbs()
    found = [{"kind": "op", "index": i, "name": _op_name(op)} for i, op in enumerate(op_db)
             if _DTYPE in op.supported_dtypes("cpu")]
    found += [{"kind": "module", "index": i, "name": m.name} for i, m in enumerate(module_db)
              if _DTYPE in m.dtypes]
    return found


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:300]}"


def _move(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` on ``device`` with its layout: the whole storage moved, then the same view over it.

    Falls back to ``t.to(device)`` for what has no storage to move (sparse,
    conjugate or negative views are resolved first).
    """
    t = t.detach()
    try:
        if t.layout != torch.strided or t.is_conj() or t.is_neg() or t.numel() == 0:
            raise ValueError("no plain storage")
        storage = t.untyped_storage()
        flat = torch.empty(0, dtype=t.dtype).set_(storage, 0, (storage.nbytes() // t.element_size(),), (1,))
        moved = flat.to(device)
        out = torch.empty(0, dtype=t.dtype, device=device).set_(moved.untyped_storage(), t.storage_offset(),
                                                                 t.shape, t.stride())
    except (ValueError, RuntimeError, NotImplementedError):
        out = t.resolve_conj().resolve_neg().to(device)
    return out


def _mover(device: torch.device) -> Callable[[Any], Any]:
    def move(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            out = _move(value, device)
            return out.requires_grad_() if value.requires_grad and out.is_floating_point() else out
        return value

    return move


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return _move(value, torch.device("cpu")).requires_grad_(value.requires_grad)
    return value


def _tree(value: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_tree(v, fn) for v in value)
    if isinstance(value, tuple):  # torch.return_types and named tuples: their fields
        return tuple(_tree(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _tree(v, fn) for k, v in value.items()}
    return value


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _flat(v)]
    return [value]


def _plain(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    return t.resolve_conj().resolve_neg()


def _compare(got: Any, want: Any, device_type: str, placed: bool) -> str | None:
    """None where ``got`` (the device's) matches ``want`` (the CPU's), else what differs."""
    got_flat, want_flat = _flat(got), _flat(want)
    if len(got_flat) != len(want_flat):
        return f"{len(got_flat)} outputs, the CPU gave {len(want_flat)}"
    for k, (g, w) in enumerate(zip(got_flat, want_flat)):
        if isinstance(w, torch.Tensor) != isinstance(g, torch.Tensor):
            return f"output {k}: {type(g).__name__}, the CPU gave {type(w).__name__}"
        if not isinstance(w, torch.Tensor):
            if g != w and not (g != g and w != w):  # NaN == NaN here
                return f"output {k}: {g!r}, the CPU gave {w!r}"
            continue
        if placed and g.device.type != device_type:
            return f"output {k} is on {g.device}, not on {device_type}: a silent fallback"
        try:
            torch.testing.assert_close(_plain(g).cpu(), _plain(w), equal_nan=True, check_device=False,
                                       check_layout=False)
        except AssertionError as err:
            return f"output {k}: {' '.join(str(err).split())[:300]}"
    return None


def _seeded(fn: Callable[[], Any]) -> Any:
    torch.manual_seed(0)
    return fn()


def _verdict(run: Callable[[Callable[[Any], Any]], Any], device: torch.device, placed: bool) -> Verdict:
    """Run ``run(move)`` on the CPU twice and on the device once; judge."""
    try:
        want = _seeded(lambda: run(_clone))
    except Exception as err:  # noqa: BLE001  the CPU refuses the sample: the device should refuse it too
        try:
            _seeded(lambda: run(_mover(device)))
        except Exception as dev_err:  # noqa: BLE001
            return {"status": "equal", "detail": f"both raised: cpu {_one_line(err)}; device {_one_line(dev_err)}"}
        return {"status": "different", "detail": f"the CPU raised {_one_line(err)}; the device did not"}
    try:
        again = _seeded(lambda: run(_clone))
        if _compare(again, want, "cpu", placed=False) is not None:
            return {"status": "skipped", "detail": "the CPU's own two runs differ (random or uninitialised)"}
    except Exception as err:  # noqa: BLE001
        return {"status": "skipped", "detail": f"the CPU's second run raised {_one_line(err)}"}
    try:
        got = _seeded(lambda: run(_mover(device)))
    except Exception as err:  # noqa: BLE001
        return {"status": "raised", "detail": _one_line(err)}
    diff = _compare(got, want, device.type, placed)
    return {"status": "equal", "detail": ""} if diff is None else {"status": "different", "detail": diff}


def _op_samples(op: Any) -> Iterator[Any]:
    return iter(op.sample_inputs("cpu", _DTYPE, requires_grad=False))


def _torch_skips(op: Any, device_type: str) -> str | None:
    """Why torch's own suite skips comparing ``op`` with the CPU on ``device_type`` at float32, if it does."""
    for info in getattr(op, "decorators", ()):
        if not hasattr(info, "is_active") or not info.is_active("TestCommon", "test_compare_cpu", device_type,
                                                                _DTYPE, {}):
            continue
        for decorator in info.decorators:
            if decorator is unittest.expectedFailure:  # a known failure is still a failure
                continue
            for cell in getattr(decorator, "__closure__", None) or ():
                if isinstance(cell.cell_contents, str):  # unittest.skip(reason)'s reason
                    return cell.cell_contents
    return None


def _asks_for_a_device(sample: Any) -> bool:
    """Whether the sample names a device (``device="cpu"``, ``x.to("cpu")``): then CPU outputs are asked for."""
    values = _flat([list(sample.args), list(sample.kwargs.values())])
    return "device" in sample.kwargs or any(
        isinstance(v, torch.device) or (isinstance(v, str) and v.partition(":")[0] in ("cpu", "meta")) for v in values)


def _run_op(op: Any, sample: Any, device: torch.device) -> Verdict:
    placed = not _asks_for_a_device(sample)

    def run(move: Callable[[Any], Any]) -> Any:
        moved = sample.transform(move)
        return op(moved.input, *moved.args, **moved.kwargs)

    verdict = _verdict(run, device, placed)
    if verdict["status"] in ("different", "raised"):
        reason = _torch_skips(op, device.type)
        if reason is not None:
            return {"status": "skipped", "detail": f"torch's own suite skips comparing it with the CPU ({reason}); "
                                                   f"{verdict['status']}: {verdict['detail']}"}
    return verdict


def _module_samples(info: Any) -> Iterator[Any]:
    return iter(info.module_inputs_func(info, device="cpu", dtype=_DTYPE, requires_grad=True, training=False))


def _run_module(info: Any, sample: Any, device: torch.device) -> Verdict:
    if sample.forward_input is None:
        return {"status": "skipped", "detail": "the sample has no forward input"}

    def run(move: Callable[[Any], Any]) -> Any:
        c, f = sample.constructor_input, sample.forward_input
        torch.manual_seed(0)
        module = info.module_cls(*_tree(c.args, _clone), **_tree(c.kwargs, _clone))
        module = copy.deepcopy(module).to(torch.device("cpu") if move is _clone else device)
        module.eval()
        args, kwargs = _tree(f.args, move), _tree(f.kwargs, move)
        out = module(*args, **kwargs)
        leaves = [t for t in _flat((args, kwargs)) if isinstance(t, torch.Tensor) and t.requires_grad]
        params = [p for p in module.parameters() if p.requires_grad]
        outs = [t for t in _flat(out) if isinstance(t, torch.Tensor) and t.requires_grad]
        if not outs or not (leaves or params):
            return out
        total = torch.stack([t.float().sum() for t in outs]).sum()
        grads = torch.autograd.grad(total, [*params, *leaves], allow_unused=True)
        return out, [g for g in grads if g is not None]

    return _verdict(run, device, placed=True)


def run_entry(kind: str, index: int, device: torch.device, start: int,
              begin: Callable[[int], None]) -> Iterator[tuple[int, Verdict]]:
    """The verdicts of entry ``index`` of ``kind``'s database, samples ``start`` onwards.

    ``begin(i)`` is called before sample ``i`` is made and run: if the process
    dies, the caller knows which sample killed it.
    """
    op_db, module_db = _dbs()
    entry = op_db[index] if kind == "op" else module_db[index]
    samples: Iterator[Any] | None = None
    for i in range(SAMPLES_PER_ENTRY):
        if i >= start:
            begin(i)
        try:
            if samples is None:
                samples = _op_samples(entry) if kind == "op" else _module_samples(entry)
            sample = next(samples, None)
        except Exception as err:  # noqa: BLE001  torch's sample generator itself failed
            yield i, {"status": "skipped", "detail": f"making the sample raised {_one_line(err)}"}
            return
        if sample is None:
            return
        if i >= start:  # the samples before ``start`` ran in a process that died after them
            yield i, (_run_op(entry, sample, device) if kind == "op" else _run_module(entry, sample, device))
