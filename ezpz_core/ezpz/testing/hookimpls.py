"""Finding a plugin's hook implementations and checking them against the hook specs (by hand, then by pluggy)."""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import inspect
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import pluggy

from ezpz import hookspecs
from ezpz.primitives.frozen_records import frozen
from ezpz.plugin_host.host import ENTRY_POINT_GROUP
from ezpz.testing.report import CheckResult

__all__ = ["Impl", "Target", "check_specs", "find_impls", "one_line", "resolve", "spec_args"]

_PREFIX = "ezpz_"


@frozen
class Target:
    plugin: Any
    name: str
    target: str
    module: str | None  # importable module name for the isolated-import check


def resolve(plugin: object | str) -> Target:
    if not isinstance(plugin, str):
        module = plugin.__name__ if isinstance(plugin, ModuleType) else getattr(inspect.getmodule(plugin), "__name__", None)
        name = getattr(plugin, "__name__", None) or type(plugin).__name__
        return Target(plugin, name, module or name, module)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == plugin:
            return Target(ep.load(), ep.name, ep.value, ep.value.split(":", 1)[0])
    module_name, _, attr = plugin.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return Target(obj, plugin, plugin, module_name)


@frozen
class Impl:
    attr: str
    hook: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    opts: Mapping[str, Any]


def spec_args() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if name.startswith(_PREFIX) and hasattr(fn, "ezpz_spec"):
            out[name] = tuple(inspect.signature(fn).parameters)
    return out


def find_impls(plugin: object) -> tuple[list[Impl], list[str]]:
    """Marked hook implementations, and names of ``ezpz_*`` routines left unmarked."""
    impls, unmarked = [], []
    for attr in dir(plugin):
        try:
            value = getattr(plugin, attr)
        except Exception:  # noqa: BLE001  (properties that raise are not hooks)
            continue
        if not inspect.isroutine(value):
            continue
        opts = getattr(value, "ezpz_impl", None)
        if isinstance(opts, dict):
            params = inspect.signature(value).parameters
            impls.append(Impl(attr, opts.get("specname") or attr, value, tuple(params), dict(opts)))
        elif attr.startswith(_PREFIX) and not hasattr(value, "ezpz_spec"):
            unmarked.append(attr)
    return impls, unmarked


def check_specs(t: Target, impls: Sequence[Impl]) -> CheckResult:
    specs = spec_args()
    problems: list[str] = []
    for impl in impls:
        if impl.hook not in specs:
            close = difflib.get_close_matches(impl.hook, list(specs), n=1)
            hint = f" (did you mean {close[0]}?)" if close else f" (hooks: {', '.join(sorted(specs))})"
            problems.append(f"{impl.hook}: no hook spec of that name{hint}")
            continue
        extra = [a for a in impl.argnames if a not in specs[impl.hook]]
        if extra:
            problems.append(
                f"{impl.hook}: argument(s) {', '.join(extra)} not in the spec's ({', '.join(specs[impl.hook])})"
            )
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    try:
        pm.register(t.plugin, name=t.name)
        pm.check_pending()
    except Exception as err:  # noqa: BLE001  (PluginValidationError and duplicate names)
        problems.append(f"pluggy: {type(err).__name__}: {one_line(err)}")
    if not impls and not problems:
        return CheckResult("hookimpls match specs", False, "no @ezpz.hookimpl functions found: nothing to register")
    if problems:
        return CheckResult("hookimpls match specs", False, "; ".join(problems))
    return CheckResult("hookimpls match specs", True, ", ".join(sorted({i.hook for i in impls})))


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split())
