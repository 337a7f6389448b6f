"""The seams are typed: no ``Any`` where a hook or the runtime meets its caller.

mypy (``python -m mypy``; ``[tool.mypy]`` in pyproject.toml, run by scripts/test.sh) proves the code agrees with
its annotations. It accepts ``Any`` anywhere, so these tests keep the annotations at the seams from drifting back
to it: every hook specification and implementation (core and plugins/*), every parameter that carries the
runtime, the :class:`~ezpz.runtime.Runtime` fields and methods, and the plugin host's typed calls.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "ezpz_core" / "ezpz"
ANY = re.compile(r"\bAny\b")


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in [*sorted(CORE.rglob("*.py")), *sorted(ROOT.glob("plugins/*/ezpz_*/**/*.py"))]:
        yield path, _parsed(path)


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"


def _params(fn: ast.FunctionDef) -> list[ast.arg]:
    a = fn.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs]


def _decorated(fn: ast.FunctionDef, name: str) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (isinstance(target, ast.Name) and target.id == name) or (
                isinstance(target, ast.Attribute) and target.attr == name):
            return True
    return False


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef]:
    yield from (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))


def _specs() -> dict[str, ast.FunctionDef]:
    tree = _parsed(CORE / "hookspecs.py")
    return {fn.name: fn for fn in _functions(tree) if _decorated(fn, "hookspec")}


def _impls() -> Iterator[tuple[Path, ast.FunctionDef]]:
    for path, tree in _modules():
        for fn in _functions(tree):
            if fn.name.startswith("ezpz_") and _decorated(fn, "hookimpl"):
                yield path, fn


def _class(path: Path, name: str) -> ast.ClassDef:
    tree = _parsed(path)
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


def test_the_scan_finds_the_specs_and_the_implementations() -> None:
    assert len(_specs()) >= 12
    impls = {fn.name for _, fn in _impls()}
    assert {"ezpz_cuda_answers", "ezpz_mesh_support", "ezpz_failure_signatures", "ezpz_probe_devices"} <= impls


def test_no_parameter_carrying_the_runtime_is_typed_any() -> None:
    bad = [f"{_where(path, arg)} {fn.name}({arg.arg}: {ast.unparse(arg.annotation)})"
           for path, tree in _modules() for fn in _functions(tree) for arg in _params(fn)
           if arg.arg in {"rt", "runtime"} and arg.annotation is not None and ANY.search(ast.unparse(arg.annotation))]
    assert not bad, "type these as ezpz.runtime.Runtime (an `if TYPE_CHECKING:` import):\n" + "\n".join(bad)


def test_hook_specs_and_implementations_name_their_types() -> None:
    found = [(CORE / "hookspecs.py", fn) for fn in _specs().values()] + list(_impls())
    bad = []
    for path, fn in found:
        for arg in _params(fn):
            if arg.annotation is not None and ANY.search(ast.unparse(arg.annotation)):
                bad.append(f"{_where(path, arg)} {fn.name}: parameter {arg.arg}: {ast.unparse(arg.annotation)}")
        if fn.returns is None or ANY.search(ast.unparse(fn.returns)):
            shown = ast.unparse(fn.returns) if fn.returns is not None else "(none)"
            bad.append(f"{_where(path, fn)} {fn.name}: returns {shown}")
    assert not bad, "a hook seam typed Any (name the record, as hookspecs.py does):\n" + "\n".join(bad)


def test_every_implementation_takes_each_parameter_in_the_specs_shape() -> None:
    specs = _specs()
    shapes = {name: {a.arg: ast.unparse(a.annotation) for a in _params(fn) if a.annotation is not None}
              for name, fn in specs.items()}
    bad = []
    for path, fn in _impls():
        if fn.name not in shapes:
            bad.append(f"{_where(path, fn)} {fn.name}: no such hook spec")
            continue
        for arg in _params(fn):
            want = shapes[fn.name].get(arg.arg)
            got = ast.unparse(arg.annotation) if arg.annotation is not None else None
            if got is not None and got != want:
                bad.append(f"{_where(path, arg)} {fn.name}: {arg.arg}: {got}, the spec says {want}")
    assert not bad, "\n".join(bad)


def test_hooks_that_get_the_collective_backend_get_its_name() -> None:
    takes = {name: ast.unparse(a.annotation) for name, fn in _specs().items() for a in _params(fn)
             if a.arg == "backend" and a.annotation is not None}
    assert takes == {"ezpz_mesh_support": "str", "ezpz_cuda_answers": "str"}


def test_the_runtime_names_the_types_it_hands_out() -> None:
    runtime = _class(CORE / "runtime" / "__init__.py", "Runtime")
    bad = [f"field {n.target.id}: Any" for n in runtime.body  # type: ignore[union-attr]
           if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and not n.target.id.startswith("_")
           and ast.unparse(n.annotation) == "Any"]
    bad += [f"{fn.name}() -> {ast.unparse(fn.returns) if fn.returns else '(none)'}" for fn in runtime.body
            if isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_")
            and (fn.returns is None or ast.unparse(fn.returns) == "Any")]
    assert not bad, "ezpz.runtime.Runtime: " + ", ".join(bad)


def test_the_plugin_hosts_typed_calls_return_records() -> None:
    hooks = _class(CORE / "plugin_host" / "calls.py", "Hooks")
    bad = [f"Hooks.{fn.name}() -> {ast.unparse(fn.returns) if fn.returns else '(none)'}" for fn in hooks.body
           if isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_")
           and (fn.returns is None or ANY.search(ast.unparse(fn.returns)))]
    assert not bad, ", ".join(bad)
