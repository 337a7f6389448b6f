"""The ``emu`` device: torch's PrivateUse1 backend, written in Python, its memory the CPU's.

This module is the device, not the ezpz plugin: it knows nothing of ezpz.
:func:`register` makes ``torch.device("emu")`` real in this process, once:

* the name: ``torch.utils.rename_privateuse1_backend("emu")``, then
  ``torch.utils.generate_methods_for_privateuse1_backend()`` (``Tensor.emu()``,
  ``Tensor.is_emu``, ``Module.emu()``);
* the device module ``torch.emu`` (:class:`EmuModule`): availability, count,
  current device, synchronize, seeding, memory statistics, the autocast dtypes;
  with the hooks and device guard torch's C++ side asks for
  (``torch.utils.backend_registration._setup_privateuseone_for_python_backend``);
* memory: an ``emu`` tensor is a real PrivateUse1 tensor whose storage is CPU
  memory. A CPU tensor becomes an ``emu`` tensor without a copy by handing its
  memory over through DLPack with the device field rewritten (``kDLExtDev``,
  which torch maps to PrivateUse1); the storage keeps the CPU allocation alive;
* kernels, through ``torch.library``: a boxed fallback for every operator on
  PrivateUse1 that runs it on CPU aliases of the ``emu`` arguments (the same
  memory, so in-place ops and ``out=`` write the device's memory) and hands the
  results back as ``emu`` tensors; view operators (``as_strided``, ``view``,
  ``set_`` ...) are redispatched to the CPU kernels, which only rewrite a
  tensor's sizes, strides and storage and never touch its device; ``_copy_from``
  moves data between ``cpu`` and ``emu``; operators torch would decompose on a
  device without kernels (``native_layer_norm``, convolution, attention) take
  the CPU's kernels as the CPU would, so results equal a ``cpu`` run's;
* autocast: kernels on ``AutocastPrivateUse1`` that cast the inputs of matrix
  products and convolutions to ``torch.get_autocast_dtype("emu")`` and those of
  reductions and losses to fp32 (the CUDA lists, shortened), and a fallthrough
  for every other operator.

A real vendor does all of this in C++ (PyTorch's OpenReg is the reference):
an allocator for device memory, a ``DeviceGuardImpl``, ``PrivateUse1HooksInterface``
and kernels for its hardware. Nothing here is fast; everything is real torch
dispatch, so a training step, DDP, GradScaler and checkpoints exercise the same
paths a vendor's device does.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

__all__ = ["DEVICE_COUNT", "DEVICE_TYPE", "EmuModule", "is_registered", "register", "to_cpu_alias", "to_emu"]

DEVICE_TYPE = "emu"
#: Devices per process. torch's Python-side device guard (torch/csrc/acc/Module.cpp, torch 2.13) reports one,
#: and the autograd engine keeps one ready queue per device index: a backward pass on emu:1 fails its
#: internal assert. So every process has one emu device, emu:0, as if each saw only its own.
DEVICE_COUNT = 1
_KDL_CPU, _KDL_EXT_DEV = 1, 12  # DLPack device types; torch maps kDLExtDev to PrivateUse1

_lock = threading.Lock()
_registered = False
_libraries: list[Any] = []  # torch.library.Library objects must stay alive for their kernels to stay registered


# -- memory: CPU memory handed to the device and back, never copied ---------------------------------------

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _retarget(tensor: torch.Tensor, dl_device_type: int, index: int) -> torch.Tensor:
    """The same memory as ``tensor``, on another device: DLPack out, device field rewritten, DLPack in.

    The new tensor's storage owns a reference to ``tensor``'s, so the memory
    lives as long as either. ``DLManagedTensor`` starts with ``DLTensor``, whose
    ``void* data`` is followed by ``DLDevice {int32 device_type; int32 device_id}``.
    """
    capsule = torch.utils.dlpack.to_dlpack(tensor)
    device = (ctypes.c_int32 * 2).from_address(_capsule_pointer(capsule, b"dltensor") + ctypes.sizeof(ctypes.c_void_p))
    device[0], device[1] = dl_device_type, index
    return torch.utils.dlpack.from_dlpack(capsule)


def to_emu(cpu: torch.Tensor, index: int) -> torch.Tensor:
    """An ``emu:index`` tensor over ``cpu``'s memory (no copy); a conjugate or negative view stays one.

    :raises NotImplementedError: For a sparse or other non-strided tensor: emu has strided memory only.
    """
    if cpu.layout != torch.strided:
        raise NotImplementedError(f"emu holds strided tensors only: a {cpu.layout} result cannot be handed to the "
                                  "device (DLPack carries strided memory); keep it on the CPU")
    if cpu.is_conj():  # DLPack cannot carry the flag, and resolving it here would copy through the device
        return to_emu(cpu.conj(), index).conj()
    if cpu.is_neg():
        return torch._neg_view(to_emu(torch._neg_view(cpu), index))
    return _retarget(cpu, _KDL_EXT_DEV, index)


def to_cpu_alias(emu: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over ``emu``'s memory (no copy): writing one writes the other.

    A conjugate or negative view is aliased without its flag, which is set
    again on the CPU alias: DLPack cannot carry it, and exporting such a tensor
    resolves it, a copy that comes back here (the recursion that ended
    ``fft.hfft`` on emu with a segmentation fault).
    """
    if emu.is_conj():
        return to_cpu_alias(emu.conj()).conj()
    if emu.is_neg():
        return torch._neg_view(to_cpu_alias(torch._neg_view(emu)))
    if emu.numel() == 0:  # no memory to share: a fresh CPU tensor (an out= the kernel resizes is rebound)
        return torch.empty_strided(emu.shape, emu.stride(), dtype=emu.dtype)
    return _retarget(emu, _KDL_CPU, 0)


# -- the device module: what torch.emu answers -------------------------------------------------------------


class EmuModule:
    """``torch.emu``: the device module torch and ezpz ask (``torch.get_device_module("emu")``)."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._current = threading.local()
        self._allocations = 0
        self._allocated_bytes = 0

    # availability and devices
    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def _is_in_bad_fork(self) -> bool:
        return False

    def _lazy_init(self) -> None:
        return None

    def device_count(self) -> int:
        return self._count

    def current_device(self) -> int:
        return getattr(self._current, "index", 0)

    def set_device(self, device: Any) -> None:
        index = torch.device(device).index if not isinstance(device, int) else device
        index = 0 if index is None else int(index)
        if not 0 <= index < self._count:
            raise RuntimeError(f"emu:{index} does not exist: a process has {self._count} emu device(s) "
                               "(torch's Python device guard reports one)")
        self._current.index = index

    @contextlib.contextmanager
    def device(self, device: Any) -> Iterator[None]:
        """Make ``device`` the current one inside the block (``torch.emu.device(1)``)."""
        before = self.current_device()
        self.set_device(device)
        try:
            yield
        finally:
            self.set_device(before)

    def get_device_name(self, device: Any = None) -> str:
        return "emu (PrivateUse1 emulated on the CPU)"

    def synchronize(self, device: Any = None) -> None:
        """Every kernel ran on the calling thread before it returned: nothing is queued."""
        return None

    # streams and events: torch's own types (its Python device guard serves them), so code that mixes
    # ``torch.emu.Event()`` with ``torch.accelerator.current_stream()`` (FSDP2) works; there is one stream,
    # and an event is complete as soon as it is recorded, as every kernel has finished when it returns
    def Stream(self, device: Any = None, priority: int = 0) -> torch.Stream:  # noqa: N802 (torch.cuda.Stream)
        index = self.current_device() if device is None else _index(device)
        return torch.Stream(device=torch.device(DEVICE_TYPE, index), priority=priority)

    def Event(self, enable_timing: bool = False, blocking: bool = False,  # noqa: N802 (torch.cuda.Event)
              interprocess: bool = False) -> torch.Event:
        return _Event(device=DEVICE_TYPE, enable_timing=enable_timing, blocking=blocking,
                      interprocess=interprocess)

    def current_stream(self, device: Any = None) -> torch.Stream:
        return self.Stream(device)

    def default_stream(self, device: Any = None) -> torch.Stream:
        return self.Stream(device)

    def stream(self, stream: torch.Stream | None) -> contextlib.AbstractContextManager[Any]:
        """Run the block on ``stream`` (``torch.emu.stream(s)``): the device's one stream, so nothing changes."""
        return contextlib.nullcontext() if stream is None else stream

    # random numbers: kernels run on the CPU, so the CPU generator is the device's
    def manual_seed(self, seed: int) -> None:
        torch.default_generator.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.default_generator.manual_seed(seed)

    def get_rng_state(self, device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    def set_rng_state(self, state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    # autocast
    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16]

    def is_bf16_supported(self) -> bool:
        return True

    # memory: the device's memory is the CPU's, freed by the CPU allocator, so only what was handed out is counted
    def _allocated(self, nbytes: int) -> None:
        self._allocations += 1
        self._allocated_bytes += nbytes

    def memory_stats(self, device: Any = None) -> dict[str, Any]:
        """Allocations made on the device since registration: how many, and their bytes (frees are not seen)."""
        return {"allocations_total": self._allocations, "allocated_bytes_total": self._allocated_bytes}

    def empty_cache(self) -> None:
        return None


def _index(device: Any) -> int:
    index = device if isinstance(device, int) else torch.device(device).index
    return 0 if index is None else int(index)


class _Event(torch.Event):
    """An event on the device's one stream: complete when recorded (torch's Python guard cannot wait on one)."""

    def synchronize(self) -> None:
        return None


class _Hooks(torch._C._acc.PrivateUse1Hooks):  # type: ignore[misc,name-defined]
    def is_available(self) -> bool:
        return True

    def has_primary_context(self, dev_id: int) -> bool:
        return True

    def is_built(self) -> bool:
        return True


class _Guard(torch._C._acc.DeviceGuard):  # type: ignore[misc,name-defined]
    def type_(self) -> Any:
        return torch._C._autograd.DeviceType.PrivateUse1


# -- kernels --------------------------------------------------------------------------------------------------

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)  # redispatch target of the view kernels


def _index_of(values: Iterable[Any], module: EmuModule) -> int:
    for v in values:
        if isinstance(v, torch.Tensor) and v.device.type == DEVICE_TYPE:
            return v.device.index or 0
    return module.current_device()


def _map(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, fn) for v in value)
    return value


def _cpu_args(args: tuple[Any, ...], kwargs: dict[str, Any], outs: set[str],
              stand_ins: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments with every ``emu`` tensor replaced by its CPU alias.

    An ``out=`` argument gets an empty CPU stand-in instead, recorded in
    ``stand_ins`` to be written back: a CPU alias of device memory cannot grow,
    and out kernels resize their output.
    """
    def down(t: torch.Tensor) -> torch.Tensor:
        return to_cpu_alias(t) if t.device.type == DEVICE_TYPE else t

    def stand_in(t: torch.Tensor) -> torch.Tensor:
        if t.device.type != DEVICE_TYPE:
            return t
        cpu = torch.empty(0, dtype=t.dtype)
        stand_ins.append((t, cpu))
        return cpu

    cpu_kwargs = {}
    for key, value in kwargs.items():
        if key == "device" and value is not None:
            cpu_kwargs[key] = torch.device("cpu")
        else:
            cpu_kwargs[key] = _map(value, stand_in if key in outs else down)
    return tuple(_map(a, down) for a in args), cpu_kwargs


def _write_back(emu: torch.Tensor, cpu: torch.Tensor) -> None:
    """An ``out=`` the CPU kernel filled: copied into the device memory, or, resized, the device tensor rebound."""
    if emu.numel() and tuple(cpu.shape) == tuple(emu.shape):  # the same shape: written where it is (a view too)
        to_cpu_alias(emu).copy_(cpu)
        return
    fresh = to_emu(cpu, emu.device.index or 0)
    torch.ops.aten.set_.source_Storage_storage_offset.redispatch(
        _CPU_KEYS, emu, fresh.untyped_storage(), 0, list(cpu.shape), list(cpu.stride()))


def _emu_device_index(kwargs: dict[str, Any], module: EmuModule) -> int | None:
    device = kwargs.get("device")
    if device is None:
        return None
    device = torch.device(device)
    if device.type != DEVICE_TYPE:
        return None
    return module.current_device() if device.index is None else device.index


def _fallback(module: EmuModule) -> Callable[..., Any]:
    """The boxed fallback: run ``op`` on CPU aliases, hand back what it wrote and what it made."""

    def kernel(op: Any, *args: Any, **kwargs: Any) -> Any:
        schema = op._schema
        index = _emu_device_index(kwargs, module)
        if index is None:
            index = _index_of([*args, *kwargs.values()], module)
        if any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            return op.redispatch(_CPU_KEYS, *args, **kwargs)  # a view: CPU's kernel rewrites metadata only
        outs = {a.name for a in schema.arguments if a.is_out}
        stand_ins: list[tuple[torch.Tensor, torch.Tensor]] = []
        cpu_args, cpu_kwargs = _cpu_args(args, kwargs, outs, stand_ins)
        call = op.overloadpacket if _numbers_in_tensor_slots(schema, args, kwargs) else op
        out = call(*cpu_args, **cpu_kwargs)
        for emu, cpu in stand_ins:
            _write_back(emu, cpu)
        written = _written_inputs(schema, args, kwargs)
        results = out if isinstance(out, tuple) else (out,)
        asked = kwargs.get("device")
        stay = asked is not None and torch.device(asked).type != DEVICE_TYPE  # device="cpu": made where asked
        handed = []
        for result, mine in zip(results, written):
            if mine is not None:  # add_'s self, out=: the caller's own tensor, written in place
                handed.append(mine)
            elif stay:
                handed.append(result)
            else:
                handed.append(_map(result, lambda t: to_emu(t, index) if t.device.type == "cpu" else t))
        if not isinstance(out, tuple):
            return handed[0] if handed else out
        return tuple(handed)

    return kernel


def _numbers_in_tensor_slots(schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a ``Tensor`` argument arrived as a Python number.

    A composite such as ``remainder.Scalar`` wraps its scalar in a "wrapped
    number" tensor and calls the ``Tensor`` overload; the boxed fallback gets
    that tensor back as a number. Then the operator is called by name (its
    overload packet), which picks the ``Scalar`` overload and keeps the wrapped
    number's type promotion.
    """
    for pos, arg in enumerate(schema.arguments):
        value = args[pos] if pos < len(args) else kwargs.get(arg.name)
        if str(arg.type) == "Tensor" and isinstance(value, (bool, int, float, complex)):
            return True
    return False


def _on_cpu_as(cpu_op: Any, module: EmuModule) -> Callable[..., Any]:
    """A kernel that runs ``cpu_op`` on CPU aliases of its arguments and hands the results back as emu tensors.

    For the ``*_overrideable`` operators: torch's composite (``_convolution``)
    calls them on any device it has no kernel for, and their default raises.
    """
    def kernel(*args: Any) -> Any:
        index = _index_of(args, module)
        out = cpu_op(*(_map(a, lambda t: to_cpu_alias(t) if t.device.type == DEVICE_TYPE else t) for a in args))
        return _map(out, lambda t: to_emu(t, index) if t.device.type == "cpu" else t)

    return kernel


def _convolution_backward(grad_output: Any, input: Any, weight: Any, stride: Any, padding: Any, dilation: Any,
                          transposed: bool, output_padding: Any, groups: int, output_mask: Any) -> Any:
    """``convolution_backward_overrideable`` -> ``convolution_backward``, which also wants the bias's size."""
    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    return torch.ops.aten.convolution_backward(grad_output, input, weight, [channels], stride, padding, dilation,
                                               transposed, output_padding, groups, output_mask)


# attention: torch picks a fused kernel through a C++ dispatch stub a Python backend cannot fill, so on
# PrivateUse1 it always takes the math path. emu's kernels are the CPU's, so it asks the CPU which kernel
# the CPU would take, and takes the same one (autograd included): results equal a cpu run's.
_FLASH = 1  # int(torch.nn.attention.SDPBackend.FLASH_ATTENTION)


class _CpuFlashAttention(torch.autograd.Function):
    """The CPU's flash-attention kernel and its backward, on emu tensors (each run through the fallback)."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                dropout_p: float, is_causal: bool, scale: float | None) -> torch.Tensor:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, dropout_p, is_causal, attn_mask=mask, scale=scale)
        ctx.save_for_backward(q, k, v, out, lse, mask)
        ctx.dropout_p, ctx.is_causal, ctx.scale = dropout_p, is_causal, scale
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        q, k, v, out, lse, mask = ctx.saved_tensors
        gq, gk, gv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad, q, k, v, out, lse, ctx.dropout_p, ctx.is_causal, attn_mask=mask, scale=ctx.scale)
        return gq, gk, gv, None, None, None, None


def _plain(t: Any) -> bool:
    """A real tensor (not a fake or functional one from tracing): its memory can be looked at."""
    return t is None or (type(t) in (torch.Tensor, torch.nn.Parameter) and not torch._is_functional_tensor(t))


def _attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None = None,
               dropout_p: float = 0.0, is_causal: bool = False, *, scale: float | None = None,
               enable_gqa: bool = False) -> torch.Tensor:
    """``scaled_dot_product_attention`` on emu (the autograd kernel): the kernel the CPU would choose."""
    choice = 0
    if all(_plain(t) for t in (query, key, value, attn_mask)):
        down = [None if t is None else to_cpu_alias(t) for t in (query, key, value, attn_mask)]
        choice = torch.ops.aten._fused_sdp_choice(*down[:3], down[3], dropout_p, is_causal, scale=scale,
                                                  enable_gqa=enable_gqa)
    mask = attn_mask
    if mask is not None and mask.dtype == torch.bool:  # as torch's convert_boolean_attn_mask
        mask = torch.zeros_like(mask, dtype=query.dtype).masked_fill_(mask.logical_not(), float("-inf"))
    if choice == _FLASH and not (mask is not None and mask.requires_grad):
        return _CpuFlashAttention.apply(query, key, value, mask, dropout_p, is_causal, scale)
    return torch.ops.aten._scaled_dot_product_attention_math(query, key, value, mask, dropout_p, is_causal, None,
                                                             scale=scale, enable_gqa=enable_gqa)[0]


def _cpu_kernels_over_composites() -> list[str]:
    """Operators with a CPU kernel *and* a generic ``CompositeExplicitAutograd`` one (not a structured wrapper).

    On a device without its own kernel, the dispatcher takes the composite, a
    decomposition (``native_layer_norm`` -> ``math_native_layer_norm``), before
    any fallback: numerically not the CPU's kernel. emu's kernels are the CPU's,
    so these are sent to the fallback too (torch 2.13: ``native_layer_norm``,
    ``native_group_norm``, ``addr``, ``_stack``, ``all``/``any.dims_out``, ...).
    """
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return sorted(n.removeprefix("aten::") for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith("aten::") and has(n, "CPU") and has(n, "CompositeExplicitAutograd")
                  and not has(n, "CompositeExplicitAutogradNonFunctional") and not has(n, "PrivateUse1"))


def _through(kernel: Callable[..., Any], op: Any) -> Callable[..., Any]:
    return lambda *args, **kwargs: kernel(op, *args, **kwargs)


def _written_inputs(schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """For each return that aliases a written input (``add_``'s self, ``out=``), that input."""
    found = []
    for ret in schema.returns:
        if ret.alias_info is None or not ret.alias_info.is_write:
            found.append(None)
            continue
        hit = None
        for pos, arg in enumerate(schema.arguments):
            if arg.alias_info is not None and arg.alias_info.before_set == ret.alias_info.before_set:
                hit = args[pos] if pos < len(args) else kwargs.get(arg.name)
                break
        found.append(hit)
    return found


def _make_empty(module: EmuModule) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def empty_memory_format(size: Any, *, dtype: Any = None, layout: Any = None, device: Any = None,
                            pin_memory: Any = None, memory_format: Any = None) -> torch.Tensor:
        index = _emu_device_index({"device": device}, module)
        cpu = torch.empty(size, dtype=dtype, memory_format=memory_format or torch.contiguous_format)
        module._allocated(cpu.untyped_storage().nbytes())
        return to_emu(cpu, module.current_device() if index is None else index)

    def empty_strided(size: Any, stride: Any, *, dtype: Any = None, layout: Any = None, device: Any = None,
                      pin_memory: Any = None) -> torch.Tensor:
        index = _emu_device_index({"device": device}, module)
        cpu = torch.empty_strided(size, stride, dtype=dtype)
        module._allocated(cpu.untyped_storage().nbytes())
        return to_emu(cpu, module.current_device() if index is None else index)

    return empty_memory_format, empty_strided


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    s = to_cpu_alias(src) if src.device.type == DEVICE_TYPE else src
    d = to_cpu_alias(dst) if dst.device.type == DEVICE_TYPE else dst
    d.copy_(s)
    return dst


def _copy_(self: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """``copy_`` with either side on emu: the CPU's ``copy_`` between the aliases (casts, broadcasts, conjugates).

    torch's own ``copy_`` hands a PrivateUse1 copy to ``_copy_from``, which
    has no conjugate-aware kernel: torch's conjugate fallback resolves the
    source first, by a copy, which comes back to ``_copy_from`` (a recursion
    without end that killed the process for ``fft.hfft``).
    """
    d = to_cpu_alias(self) if self.device.type == DEVICE_TYPE else self
    d.copy_(to_cpu_alias(src) if src.device.type == DEVICE_TYPE else src)
    return self


def _to_copy(self: torch.Tensor, *, dtype: Any = None, layout: Any = None, device: Any = None,
             pin_memory: Any = None, non_blocking: bool = False, memory_format: Any = None) -> torch.Tensor:
    """``Tensor.to`` from ``emu`` (a copy): the CPU's ``_to_copy`` on the CPU alias, handed back to the device.

    torch's own ``_to_copy`` gives a ``non_blocking`` copy to the CPU pinned
    memory, from the hooks' ``getPinnedMemoryAllocator``, which torch's Python
    hooks cannot provide (``torch.distributed.checkpoint`` copies so). Every
    emu copy has finished when it returns, so it is made blocking, into
    ordinary memory.
    """
    target = torch.device(device) if device is not None else self.device
    out = torch.ops.aten._to_copy.default(to_cpu_alias(self), dtype=dtype, layout=layout, device="cpu",
                                          memory_format=memory_format)
    if target.type == DEVICE_TYPE:
        return to_emu(out, (self.device.index or 0) if target.index is None else target.index)
    return out if target.type == "cpu" else out.to(target)


def _copy_from_and_resize(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    if dst.shape != src.shape:
        dst.resize_(src.shape)
    return _copy_from(src, dst)


def _resize_(self: torch.Tensor, size: Any, memory_format: Any = None) -> torch.Tensor:
    """Grow the storage by swapping in a larger one (CPU memory, moved over), then set the sizes."""
    if self.numel() == 0 or tuple(self.shape) != tuple(size):
        fresh = torch.empty(size, dtype=self.dtype)
        n = min(self.numel(), fresh.numel())
        if n:
            fresh.view(-1)[:n].copy_(to_cpu_alias(self).reshape(-1)[:n])
        new = to_emu(fresh, self.device.index or 0)
        torch.ops.aten.set_.source_Storage_storage_offset.redispatch(
            _CPU_KEYS, self, new.untyped_storage(), 0, list(new.shape), list(new.stride()))
    return self


# autocast: the CUDA lists, shortened to what small models use
_LOWER = ("linear", "matmul", "mm", "addmm", "bmm", "baddbmm", "addbmm", "conv1d", "conv2d", "conv3d",
          "scaled_dot_product_attention", "_convolution", "prelu")
_FP32 = ("softmax.int", "log_softmax.int", "layer_norm", "group_norm", "mse_loss", "l1_loss", "nll_loss",
         "cross_entropy_loss", "binary_cross_entropy_with_logits", "smooth_l1_loss", "norm.Scalar",
         "sum", "cumsum", "exp", "log", "pow.Tensor_Scalar", "rsqrt", "softplus")
_AUTOCAST_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


def _autocast_kernel(op_name: str, lower: bool) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        dtype = torch.get_autocast_dtype(DEVICE_TYPE) if lower else torch.float32

        def cast(t: torch.Tensor) -> torch.Tensor:
            if t.is_floating_point() and t.device.type == DEVICE_TYPE and t.dtype != dtype and (
                    lower or t.dtype in (torch.float16, torch.bfloat16)):
                return t.to(dtype)
            return t

        args = tuple(_map(a, cast) for a in args)
        kwargs = {k: _map(v, cast) for k, v in kwargs.items()}
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_KEYS):
            return _op(op_name)(*args, **kwargs)

    return kernel


def _op(name: str) -> Any:
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base)
    return getattr(packet, overload or "default")


def is_registered() -> bool:
    """Whether :func:`register` ran in this process (``torch.device("emu")`` works)."""
    return _registered


def register() -> EmuModule:
    """Make ``emu`` a torch device in this process (idempotent); return ``torch.emu``.

    :raises RuntimeError: When another PrivateUse1 backend already owns the key.
    """
    global _registered
    with _lock:
        if _registered:
            return torch.emu  # type: ignore[attr-defined]
        taken = torch._C._get_privateuse1_backend_name()
        if taken not in ("privateuseone", DEVICE_TYPE):
            raise RuntimeError(f"PrivateUse1 is already the {taken!r} backend in this process; emu cannot take it")
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        module = EmuModule(DEVICE_COUNT)
        _setup_privateuseone_for_python_backend(DEVICE_TYPE, module, _Hooks(), _Guard())
        impl = torch.library.Library("aten", "IMPL")
        empty_memory_format, empty_strided = _make_empty(module)
        impl.impl("empty.memory_format", empty_memory_format, "PrivateUse1")
        impl.impl("empty_strided", empty_strided, "PrivateUse1")
        impl.impl("_copy_from", _copy_from, "PrivateUse1")
        impl.impl("copy_", _copy_, "PrivateUse1")
        impl.impl("_copy_from_and_resize", _copy_from_and_resize, "PrivateUse1")
        impl.impl("_to_copy", _to_copy, "PrivateUse1")
        impl.impl("resize_", _resize_, "PrivateUse1")
        impl.impl("convolution_overrideable", _on_cpu_as(torch.ops.aten.convolution.default, module), "PrivateUse1")
        impl.impl("convolution_backward_overrideable", _on_cpu_as(_convolution_backward, module), "PrivateUse1")
        for view in ("as_strided", "view", "_reshape_alias", "set_.source_Storage_storage_offset",
                     "set_.source_Storage", "set_.source_Tensor", "set_", "unfold", "view.dtype", "alias",
                     "_unsafe_view"):
            impl.impl(view, _redispatch_to_cpu(view), "PrivateUse1")
        impl.impl("scaled_dot_product_attention", _attention, "AutogradPrivateUse1")
        from .rnn_cells import register_rnn_cells

        register_rnn_cells(impl, "PrivateUse1", to_cpu_alias, to_emu)
        for name in _LOWER:
            impl.impl(name, _autocast_kernel(name, lower=True), "AutocastPrivateUse1")
        for name in _FP32:
            impl.impl(name, _autocast_kernel(name, lower=False), "AutocastPrivateUse1")
        torch.storage._StorageBase.emu = _storage_to_emu  # type: ignore[attr-defined]
        torch.UntypedStorage.resize_ = _resize_storage(torch.UntypedStorage.resize_)  # type: ignore[method-assign]
        torch.serialization.register_package(5, _location_tag, _restore)  # torch.load onto emu, before torch's own
        _pin_for_loaders()
        fallback = _fallback(module)
        for name in _cpu_kernels_over_composites():
            impl.impl(name, _through(fallback, _op(name)), "PrivateUse1")
        fallbacks = torch.library.Library("_", "IMPL")
        fallbacks.fallback(fallback, "PrivateUse1")
        fallbacks.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
        _libraries.extend((impl, fallbacks))
        _registered = True
        return module


def _storage_to_emu(self: Any, device: Any = None, non_blocking: bool = False) -> Any:
    """``UntypedStorage.emu()``: a copy on the device (what ``torch.load`` calls to restore onto ``emu``).

    torch's generated method asks for an allocator, which a Python backend has
    not got; this one copies the bytes into CPU memory handed to the device.
    """
    if self.device.type == DEVICE_TYPE:
        return self
    index = torch.device(device).index if device is not None and not isinstance(device, int) else device
    cpu = torch.empty(0, dtype=torch.uint8, device=self.device).set_(self).to("cpu", copy=True)
    return to_emu(cpu, 0 if index is None else int(index)).untyped_storage()


def _resize_storage(resize: Callable[[Any, int], Any]) -> Callable[[Any, int], Any]:
    """``UntypedStorage.resize_`` that also resizes ``emu`` storages in place (FSDP2 frees and refills its
    unsharded parameters this way).

    torch resizes a PrivateUse1 storage through the C++ hooks'
    ``resizePrivateUse1Bytes``, which torch's Python hooks cannot implement. So
    the storage's memory is swapped for fresh CPU memory handed to the device
    (``_swap_data_ptr_`` exchanges memory and size with a storage of zero bytes),
    its first bytes copied over: the storage object, and every tensor on it, stays.
    """
    def resize_(self: Any, size: int) -> Any:
        if self.device.type != DEVICE_TYPE:
            return resize(self, size)
        size = int(size)
        if size == self.nbytes():
            return self
        index = self.device.index or 0
        fresh = torch.empty(size, dtype=torch.uint8)
        keep = min(size, self.nbytes())
        if keep:
            old = torch.empty(0, dtype=torch.uint8, device=self.device).set_(self)
            fresh[:keep].copy_(to_cpu_alias(old)[:keep])
        if self.nbytes():  # give the old memory to an empty storage first: swaps need one side empty
            self._swap_data_ptr_(to_emu(torch.empty(0, dtype=torch.uint8), index).untyped_storage())
        if size:
            self._swap_data_ptr_(to_emu(fresh, index).untyped_storage())
        return self

    return resize_


def _pin_for_loaders() -> None:
    """``DataLoader(pin_memory=True)`` while emu is torch's accelerator: the batches stay as they are.

    The loader pins for the current accelerator, and torch asks the hooks'
    ``getPinnedMemoryAllocator``, which torch's Python hooks cannot provide, so
    the loader's pin-memory thread raised. emu's memory is host memory: there
    is nothing to pin for, and the batch moves to the device by ``.to("emu")``
    as any other. For any other device the loader pins as before.
    """
    from torch.utils.data._utils import pin_memory as loader_pinning

    pin = loader_pinning.pin_memory
    if getattr(pin, "_emu_skips", False):
        return

    def pin_memory(data: Any, device: Any = None) -> Any:
        if torch.accelerator.current_accelerator() == torch.device(DEVICE_TYPE):
            return data
        return pin(data, device)

    pin_memory._emu_skips = True  # type: ignore[attr-defined]
    loader_pinning.pin_memory = pin_memory


def _location_tag(storage: Any) -> str | None:
    if storage.device.type != DEVICE_TYPE:
        return None
    return f"{DEVICE_TYPE}:{storage.device.index or 0}"


def _restore(storage: Any, location: str) -> Any:
    """``torch.load`` of a storage saved from (or mapped onto) ``emu``: torch's own path needs an allocator."""
    if location != DEVICE_TYPE and not location.startswith(f"{DEVICE_TYPE}:"):
        return None
    return _storage_to_emu(storage, torch.device(location))


def _redispatch_to_cpu(name: str) -> Callable[..., Any]:
    op = _op(name)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        return op.redispatch(_CPU_KEYS, *args, **kwargs)

    return kernel
