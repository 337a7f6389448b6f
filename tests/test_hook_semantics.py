"""Spec and call agree, for every hook: ezpz's host returns what pluggy's own ``pm.hook.<name>(**kwargs)`` returns.

For each hook in ezpz.hookspecs, three plugins answer (a ``tryfirst`` one with None, then two that answer); the
host's call (:meth:`ezpz.plugin_host.calls.Hooks.call`) must give the same answers, by identity and in the same
order, as pluggy's caller: the first non-None in pluggy's order for a ``firstresult`` spec, the list otherwise.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable

import pytest

from ezpz import hookimpl, hookspecs
from ezpz.plugin_host.calls import Hooks
from ezpz.plugin_host.host import PluginHost
from ezpz.testing import make_host

HOOKS = list(hookspecs.RETURNS)


def _answer(hook: str) -> object:
    """A fresh answer of the type the hook returns: an instance made without its constructor (identity is compared)."""
    kind = hookspecs.return_type(hook)
    if kind is None:  # the return value is ignored by setup(), but pluggy still collects it
        return object()
    return kind() if kind is list else object.__new__(kind)


def _plugin(hook: str, name: str, answer: object, **opts: bool) -> types.ModuleType:
    """A plugin module implementing ``hook`` with every parameter of its spec, answering ``answer``."""
    params = list(inspect.signature(getattr(hookspecs, hook)).parameters)
    seen: dict[str, object] = {}
    namespace: dict[str, object] = {"answer": answer, "seen": seen}
    keep = "; ".join(f"seen[{p!r}] = {p}" for p in params) or "pass"
    exec(f"def {hook}({', '.join(params)}):\n    {keep}\n    return answer", namespace)  # noqa: S102
    module = types.ModuleType(name)
    setattr(module, hook, hookimpl(**opts)(namespace[hook]))
    module.seen = seen  # type: ignore[attr-defined]
    return module


def _host(hook: str) -> tuple[PluginHost, dict[str, object], list[object]]:
    """A host of three plugins for ``hook`` (no built-ins), the call's keyword arguments and the two answers."""
    older, newer = _answer(hook), _answer(hook)
    plugins = [_plugin(hook, "silent_first", None, tryfirst=True), _plugin(hook, "older", older),
               _plugin(hook, "newer", newer)]
    host = make_host(builtins=False, names={p.__name__: p for p in plugins})
    assert host.failures == []
    kwargs: dict[str, object] = {p: object() for p in inspect.signature(getattr(hookspecs, hook)).parameters}
    return host, kwargs, [older, newer]


@pytest.mark.parametrize("hook", HOOKS)
def test_the_host_returns_what_pluggy_returns(hook: str) -> None:
    host, kwargs, (older, newer) = _host(hook)
    pluggy_says = getattr(host.pm.hook, hook)(**kwargs)
    ours = [answer for _, answer in Hooks(host).call(hook, kwargs)]
    if getattr(host.pm.hook, hook).spec.opts["firstresult"]:
        assert pluggy_says is newer  # the most recently registered answers first, after the tryfirst None
        assert len(ours) == 1 and ours[0] is pluggy_says
    else:
        assert [id(a) for a in pluggy_says] == [id(newer), id(older)]
        assert [id(a) for a in ours] == [id(a) for a in pluggy_says]
    assert host.failures == []


@pytest.mark.parametrize("hook", HOOKS)
def test_every_plugin_gets_the_callers_arguments(hook: str) -> None:
    host, kwargs, _ = _host(hook)
    Hooks(host).call(hook, kwargs)
    for name in ("silent_first", "newer"):  # asked in every call; "older" only when the spec collects
        seen = host.pm.get_plugin(name).seen
        assert all(seen[k] is v for k, v in kwargs.items()), (hook, name)


@pytest.mark.parametrize("flip", [True, False])
def test_the_kind_is_read_from_the_spec_at_call_time(flip: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing the spec's own firstresult option changes the call: the host keeps no copy of the kind."""
    hook = next(h for h in HOOKS if bool(getattr(make_host(builtins=False).pm.hook, h).spec.opts["firstresult"]) != flip)
    host, kwargs, (older, newer) = _host(hook)
    monkeypatch.setitem(getattr(host.pm.hook, hook).spec.opts, "firstresult", flip)
    ours = [answer for _, answer in Hooks(host).call(hook, kwargs)]
    expected = getattr(host.pm.hook, hook)(**kwargs)
    assert [id(a) for a in ours] == ([id(expected)] if flip else [id(a) for a in expected])


def test_a_broken_plugin_is_quarantined_and_the_next_one_answers() -> None:
    """What pluggy's own caller cannot do, and the reason the host keeps its loop: one plugin raises, the next answers."""
    hook = "ezpz_select_backend"
    host, kwargs, (_, newer) = _host(hook)

    def broken(**_: object) -> object:
        raise RuntimeError("boom")

    module = types.ModuleType("broken")
    module.ezpz_select_backend = hookimpl(tryfirst=True)(_signature_of(hook, broken))  # type: ignore[attr-defined]
    host.register("broken", module)
    with pytest.raises(RuntimeError):
        getattr(host.pm.hook, hook)(**kwargs)  # pluggy stops at the exception
    found = Hooks(host).call(hook, kwargs)
    assert [(n, a) for n, a in found] == [("newer", newer)]
    assert [r.name for r in host.failures] == ["broken"]


def _signature_of(hook: str, fn: Callable[..., object]) -> Callable[..., object]:
    params = list(inspect.signature(getattr(hookspecs, hook)).parameters)
    namespace: dict[str, object] = {"fn": fn}
    exec(f"def {hook}({', '.join(params)}):\n    return fn()", namespace)  # noqa: S102
    return namespace[hook]  # type: ignore[return-value]
