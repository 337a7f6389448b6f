"""The conformance kit's live mode: where a plugin's device is present, drive it through a real ``setup()``.

:func:`live_checks` (``check_plugin(..., live=True)``) finds the device the
plugin offers here, runs the real :func:`ezpz.hooks.setup` on it with a plugin
host of the built-ins plus the plugin (:func:`ezpz.hooks.using_plugin_host`, so
the plugin need not be installed), and checks what a portable script relies on,
each as one named :class:`~ezpz.testing.report.CheckResult`:

``live setup``, ``live tensor round trip``, ``live autocast``, ``live training
step``, ``live grad scaler``, ``live step``, ``live synchronize``, ``live
memory_stats``, ``live range``, ``live profiler``, ``live compile``, ``live
checkpoint``, ``live teardown``.

Where ``live setup`` passed, :mod:`ezpz.testing.live_ranks` then checks the
device and its backend on 2 ranks of the kit's own (``live ranks ...``).

Nothing here knows a device type: the device is whatever the plugin offers,
driven only through the runtime and ``torch.device``. A plugin that offers no
device here gets one skipped ``live`` result saying so. Live mode changes the
process as ``setup()`` does (device registration, threads, the plugin's
environment defaults); run it in a test process of its own.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ezpz.facts import DeviceCandidate, TorchBuild
from ezpz.testing.hookimpls import Target, one_line
from ezpz.testing.report import CheckResult

if TYPE_CHECKING:
    from ezpz.runtime import Runtime

__all__ = ["LIVE_CHECKS", "live_checks"]

#: The live checks, in the order they run.
LIVE_CHECKS = ("live setup", "live tensor round trip", "live autocast", "live training step", "live grad scaler",
               "live step", "live synchronize", "live memory_stats", "live range", "live profiler", "live compile",
               "live checkpoint", "live teardown")

_RANGE = "ezpz-live-range"


def offered_device(t: Target, build: TorchBuild, environ: Mapping[str, str]) -> DeviceCandidate | str:
    """The plugin's own device here (its highest-priority candidate), or why there is none."""
    probe = getattr(t.plugin, "ezpz_probe_devices", None)
    if probe is None:
        return f"{t.name} has no ezpz_probe_devices hook: it offers no device"
    try:
        report = probe(build=build, environ=environ)
    except Exception as err:  # noqa: BLE001  the static checks report a raising probe
        return f"its probe raised {type(err).__name__}: {one_line(err)}"
    candidates = sorted(getattr(report, "candidates", ()) or (), key=lambda c: -c.priority)
    if not candidates:
        rejected = "; ".join(f"{r.device_type}: {r.reason}" for r in getattr(report, "rejections", ()) or ())
        return f"{t.name} offers no device here" + (f" ({rejected})" if rejected else "")
    return candidates[0]


@contextlib.contextmanager
def _environment(environ: Mapping[str, str] | None) -> Iterator[None]:
    """``os.environ`` plus ``environ`` inside the block, as it was after (``setup()`` reads the process's)."""
    if not environ:
        yield
        return
    saved = {k: os.environ.get(k) for k in environ}
    os.environ.update(environ)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def live_checks(t: Target, build: TorchBuild, environ: Mapping[str, str] | None) -> list[CheckResult]:
    """Every live check against the device ``t`` offers here; one skipped result when it offers none."""
    from ezpz import hooks
    from ezpz.testing.hosts import make_host

    env = dict(os.environ if environ is None else {**os.environ, **environ})
    device = offered_device(t, build, env)
    if isinstance(device, str):
        return [CheckResult("live", True, f"skipped: {device}", skipped=True)]
    if hooks.get_runtime() is not None:
        return [CheckResult("live", False, "a runtime is already live in this process: call "
                                           "ezpz.hooks.teardown() before the live checks")]
    host = make_host(builtins=True)
    if not host.pm.is_registered(t.plugin):
        host.register(t.name, t.plugin, target=t.target)
        host.validate()
    results: list[CheckResult] = []
    with _environment(environ), hooks.using_plugin_host(host):
        try:
            rt = hooks.setup(device=device.device_type)
        except Exception as err:  # noqa: BLE001
            return [CheckResult("live setup", False, f"setup(device={device.device_type!r}) raised "
                                                     f"{type(err).__name__}: {one_line(err)}")]
        try:
            results.append(_setup_check(rt, device, t.name))
            if results[-1].passed:
                for name, check in _CHECKS:
                    results.append(_run(name, check, rt))
        finally:
            results.append(_run("live teardown", lambda _rt: _teardown(hooks), rt))
    return results


def _run(name: str, check: Callable[[Runtime], str], rt: Runtime) -> CheckResult:
    try:
        return CheckResult(name, True, check(rt))
    except AssertionError as err:
        return CheckResult(name, False, one_line(err))
    except Exception as err:  # noqa: BLE001  a device that cannot do it fails the check, naming it
        return CheckResult(name, False, f"raised {type(err).__name__}: {one_line(err)}")


def _setup_check(rt: Runtime, device: DeviceCandidate, plugin: str) -> CheckResult:
    trace = str(rt.explain())
    problems = []
    if rt.device_type != device.device_type or getattr(rt.device, "type", None) != device.device_type:
        problems.append(f"runtime device {rt.device} is not the plugin's {device.device_type}")
    if f"device: {rt.plan.device.torch_device}" not in trace or plugin not in trace:
        problems.append("explain() does not name the device and the plugin")
    detail = f"device {rt.device}, backend {rt.backend}, precision {rt.amp.dtype}, plugin {plugin}"
    return CheckResult("live setup", not problems, "; ".join(problems) or detail)


def _teardown(hooks: Any) -> str:
    hooks.teardown()
    assert hooks.get_runtime() is None, "teardown() left a runtime behind"
    return "teardown() forgot the runtime"


# -- the checks: each returns what it saw, or raises AssertionError saying what is wrong -------------------------


def _model(rt: Runtime) -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1)).to(rt.device)


def _batch(rt: Runtime) -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 8, generator=g).to(rt.device), torch.randn(4, 1, generator=g).to(rt.device)


def _round_trip(rt: Runtime) -> str:
    import torch

    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    y = x.to(rt.device)
    assert y.device.type == rt.device_type, f"x.to({rt.device}) gave a tensor on {y.device}"
    z = (y * 2 + 1).t().contiguous()
    back = z.cpu()
    want = (x * 2 + 1).t().contiguous()
    assert back.device.type == "cpu" and torch.equal(back, want), "arithmetic on the device came back wrong"
    plus_one = x + 1  # before: on the CPU, x.to("cpu") is x itself
    y.add_(1)
    assert torch.equal(y.cpu(), plus_one), "an in-place op on the device did not stick"
    return f"cpu -> {y.device} -> cpu: values, a view and an in-place op as on the CPU"


def _autocast(rt: Runtime) -> str:
    import torch

    model = _model(rt)
    x, _ = _batch(rt)
    with rt.autocast():
        out = model(x)
    if not rt.amp.autocast:
        assert out.dtype == torch.float32, f"autocast is off ({rt.amp.dtype}) but the output is {out.dtype}"
        return f"policy {rt.amp.dtype}: autocast off, outputs fp32"
    want = rt.amp.torch_dtype
    assert out.dtype == want, f"under rt.autocast() ({rt.amp.dtype}) a Linear gave {out.dtype}, not {want}"
    return f"a Linear under rt.autocast() gives {out.dtype}"


def _training_step(rt: Runtime) -> str:
    import torch

    model = _model(rt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = _batch(rt)
    before = [p.detach().cpu().clone() for p in model.parameters()]
    with rt.autocast():
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and g.device.type == rt.device_type for g in grads), "gradients missing or off-device"
    opt.step()
    moved = sum(not torch.equal(b, p.detach().cpu()) for b, p in zip(before, model.parameters()))
    value = loss.item()
    assert math.isfinite(value), f"loss {value}"
    assert moved == len(before), f"only {moved} of {len(before)} parameters changed after optimizer.step()"
    return f"forward, backward and SGD on {rt.device}: loss {value:.4f}, every parameter updated"


def _grad_scaler(rt: Runtime) -> str:
    import torch

    said = []
    model = _model(rt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = _batch(rt)
    scaler = rt.grad_scaler()
    with rt.autocast():
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    said.append(f"rt.grad_scaler() ({'enabled' if scaler.is_enabled() else 'disabled: ' + rt.amp.dtype}) steps")
    if rt.amp.grad_scaler or rt.amp.why_unsupported("fp16", rt.device_type) is None:
        scaler = rt.grad_scaler(enabled=True, init_scale=2.0**8)
        model.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        next(model.parameters()).grad.view(-1)[0] = float("inf")
        before = [p.detach().cpu().clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        skipped = all(torch.equal(b, p.detach().cpu()) for b, p in zip(before, model.parameters()))
        assert skipped, "an enabled GradScaler stepped over an inf gradient"
        assert scaler.get_scale() < 2.0**8, f"the scale did not back off after an inf ({scaler.get_scale()})"
        said.append("an enabled one skips an inf step and backs off")
    return "; ".join(said)


def _step(rt: Runtime) -> str:
    first = rt.step()
    second = rt.step()
    assert second == first + 1, f"rt.step() returned {first} then {second}"
    mark = rt.plan.step.name if rt.plan.step is not None else "none"
    return f"rt.step() counts ({second}); step boundary: {mark}"


def _synchronize(rt: Runtime) -> str:
    rt.synchronize()
    return "rt.synchronize() returned"


def _memory_stats(rt: Runtime) -> str:
    stats = rt.memory_stats()
    bad = {k: v for k, v in stats.items() if not isinstance(k, str) or not isinstance(v, float)}
    assert not bad, f"not str -> float: {bad}"
    assert "host_peak_rss_bytes" in stats, "no host_peak_rss_bytes"
    return f"{len(stats)} figure(s): {', '.join(sorted(stats))}"


def _range(rt: Runtime) -> str:
    import torch

    with rt.range(_RANGE):
        (torch.ones(2).to(rt.device) + 1).cpu()
    return "rt.range() outside the profiler"


def _profiler(rt: Runtime) -> str:
    import torch

    model = _model(rt)
    x, _ = _batch(rt)
    with rt.profiler() as prof:
        with rt.range(_RANGE):
            model(x).sum().cpu()
        rt.synchronize()
    names = {e.key for e in prof.key_averages()}
    assert _RANGE in names, f"rt.range({_RANGE!r}) is not in the profile ({len(names)} event names)"
    ops = [n for n in names if n.startswith("aten::")]
    assert ops, "no aten:: operator in the profile"
    return f"activities {', '.join(rt.profiling.activities)}: the range and {len(ops)} aten op(s) recorded"


def _compile(rt: Runtime) -> str:
    import torch

    policy = rt.plan.compile
    if policy is None or policy.backend == "none":
        reason = policy.reason if policy is not None else "no plugin answered ezpz_compile_policy"
        assert reason.strip(), "compile refused without a reason"
        return f"refused, with the reason: {reason}"
    model = _model(rt)
    x, _ = _batch(rt)
    want = model(x).detach().cpu()
    got = rt.compile(model)(x).detach().cpu()
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-5), f"compiled ({policy.backend}) output differs from eager"
    return f"{policy.backend}: compiled output equals eager"


def _checkpoint(rt: Runtime) -> str:
    import torch

    model = _model(rt)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf, map_location="cpu", weights_only=True)
    fresh = _model(rt)
    fresh.load_state_dict(state["model"])
    assert all(p.device.type == rt.device_type for p in fresh.parameters()), "loaded parameters left the device"
    same = all(torch.equal(a.detach().cpu(), b.detach().cpu()) for a, b in zip(model.parameters(), fresh.parameters()))
    assert same, "the resumed weights differ from the saved ones"
    return f"torch.save of {rt.device} weights, torch.load(map_location='cpu'), load_state_dict back onto the device"


_CHECKS: tuple[tuple[str, Callable[[Runtime], str]], ...] = (
    ("live tensor round trip", _round_trip),
    ("live autocast", _autocast),
    ("live training step", _training_step),
    ("live grad scaler", _grad_scaler),
    ("live step", _step),
    ("live synchronize", _synchronize),
    ("live memory_stats", _memory_stats),
    ("live range", _range),
    ("live profiler", _profiler),
    ("live compile", _compile),
    ("live checkpoint", _checkpoint),
)
