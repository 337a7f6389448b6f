"""The hook specs: one table of return types (hookspecs.RETURNS), the specs written in the order setup() calls them."""

from __future__ import annotations

import inspect
import re
import types

from ezpz import hookimpl, hookspecs
from ezpz.testing import HOOK_RETURNS, make_host, make_plan, recorded_build


def _specs_in_source_order() -> list[str]:
    return re.findall(r"^def (ezpz_\w+)\(", inspect.getsource(hookspecs), re.M)


def test_returns_names_every_spec_in_the_order_they_are_written() -> None:
    specs = [n for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(f, "ezpz_spec")]
    assert sorted(specs) == sorted(hookspecs.RETURNS)
    assert _specs_in_source_order() == list(hookspecs.RETURNS)


def test_each_specs_annotation_states_the_type_in_the_table() -> None:
    for hook in hookspecs.RETURNS:
        annotation = inspect.signature(getattr(hookspecs, hook)).return_annotation
        expected = hookspecs.return_type(hook)
        outer = re.sub(r"\[.*\]", "", annotation)  # list[FailureSignature] | None -> list | None: the table holds the outer type
        assert outer == (f"{expected.__name__} | None" if expected else "None"), hook
        assert HOOK_RETURNS[hook] is expected  # ezpz.testing reads the same table


def test_planning_calls_the_hooks_in_the_order_they_are_written() -> None:
    called: list[str] = []
    recorder = types.ModuleType("ezpz_test_hook_order")
    for hook in hookspecs.RETURNS:
        params = ", ".join(inspect.signature(getattr(hookspecs, hook)).parameters)
        namespace: dict[str, object] = {"called": called}
        exec(f"def {hook}({params}):\n    called.append({hook!r})", namespace)  # noqa: S102
        setattr(recorder, hook, hookimpl(tryfirst=True)(namespace[hook]))
    make_plan(make_host(recorder), build=recorded_build("cpu"))
    planned = list(dict.fromkeys(called))
    assert planned == list(hookspecs.RETURNS)[: len(planned)]
    assert planned[-1] == "ezpz_mesh_support"  # the last hook plan() calls; setup() then calls the others
