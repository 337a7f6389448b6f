"""Where a ported file gets ``import ezpz`` and its ``rt = ezpz.hooks.setup(...)`` line.

``import ezpz`` goes into the import group that holds ``import torch``, in
alphabetical place. ``setup()`` runs once, as late as it can and as early as it
must: at module level just before the first top-level statement that uses
``rt``; in a file that uses ``rt`` only inside functions (a library module of
the project), in each outermost function that does, before its first use, as
``rt = ezpz.hooks.get_runtime() or ezpz.hooks.setup(...)`` (the runtime the entry
script set up, else set up now with the arguments every ported file of the
project shares; ``get_runtime()`` is a plain read, cheap in a per-batch helper). A file that already has a
``setup()`` line gets no second one, which keeps porting idempotent.
"""

from __future__ import annotations

import sys

import libcst as cst
import libcst.matchers as m

__all__ = ["place"]


def _is_setup(stmt: cst.CSTNode, rt: str) -> bool:
    return m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(
        targets=[m.AssignTarget(target=m.Name(rt))],
        value=m.Call(func=m.Attribute(value=m.Attribute(value=m.Name("ezpz"), attr=m.Name("hooks")),
                                      attr=m.Name("setup"))))]))


class _Uses(cst.CSTVisitor):
    """Whether ``rt`` is used at module level (outside every def) and inside some def."""

    def __init__(self, rt: str) -> None:
        super().__init__()
        self.rt, self.depth, self.module_level, self.in_function = rt, 0, False, False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.depth += 1
        return True

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth -= 1

    def visit_Name(self, node: cst.Name) -> bool:
        if node.value == self.rt:
            if self.depth:
                self.in_function = True
            else:
                self.module_level = True
        return False


def _any_use(node: cst.CSTNode, rt: str) -> bool:
    uses = _uses(node, rt)
    return uses.module_level or uses.in_function


def _uses(node: cst.CSTNode, rt: str) -> _Uses:
    visitor = _Uses(rt)
    node.visit(visitor)
    return visitor


def _import_name(stmt: cst.CSTNode) -> str | None:
    if not isinstance(stmt, cst.SimpleStatementLine) or not stmt.body:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Import):
        return cst.Module(body=[]).code_for_node(small.names[0].name)
    if isinstance(small, cst.ImportFrom) and small.module is not None and small.relative == ():
        return cst.Module(body=[]).code_for_node(small.module)
    if isinstance(small, cst.ImportFrom):
        return "."  # a relative import: the project's own group
    return None


def _has_import_ezpz(body: list[cst.BaseStatement]) -> bool:
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine) and stmt.body and isinstance(stmt.body[0], cst.Import):
            if any(cst.Module(body=[]).code_for_node(a.name).split(".")[0] == "ezpz" and a.asname is None
                   for a in stmt.body[0].names):
                return True
    return False


def _import_index(body: list[cst.BaseStatement]) -> int:
    """Where ``import ezpz`` goes: alphabetically in the group holding ``import torch``, else after the imports."""
    names = [_import_name(s) for s in body]
    torch_at = next((i for i, n in enumerate(names) if n is not None and n.split(".")[0] == "torch"), None)
    if torch_at is None:
        imports = [i for i, n in enumerate(names) if n is not None]
        if imports:
            return imports[-1] + 1
        first = 0
        while first < len(body) and (m.matches(body[first], m.SimpleStatementLine(body=[m.Expr(m.SimpleString())]))
                                     or names[first] == "__future__"):
            first += 1
        return first
    start = torch_at
    while start > 0 and names[start - 1] not in (None, "__future__", ".") and not _blank_before(body[start]):
        start -= 1
    while start < torch_at and (names[start] or "").split(".")[0] in sys.stdlib_module_names:
        start += 1  # a group mixing the standard library and third parties: ezpz goes among the third parties
    for i in range(start, torch_at + 1):
        if (names[i] or "") > "ezpz":
            return i
    return torch_at


def _blank_before(stmt: cst.BaseStatement) -> bool:
    return any(line.comment is None for line in getattr(stmt, "leading_lines", ()))


def _insert(body: list[cst.BaseStatement], index: int, stmt: cst.SimpleStatementLine,
            take_lines: bool) -> list[cst.BaseStatement]:
    """``stmt`` before ``body[index]``; with ``take_lines`` it takes over that statement's leading blank lines."""
    body = list(body)
    after = body[index] if index < len(body) else None
    if take_lines and isinstance(after, cst.SimpleStatementLine):
        stmt = stmt.with_changes(leading_lines=after.leading_lines)
        body[index] = after.with_changes(leading_lines=())
    body.insert(index, stmt)
    return body


class _FunctionSetup(cst.CSTTransformer):
    """Adds the setup line to each outermost function that uses ``rt`` and has none, before its first use."""

    def __init__(self, rt: str, setup: cst.SimpleStatementLine) -> None:
        super().__init__()
        self.rt, self.setup, self.depth, self.added = rt, setup, 0, 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.depth += 1
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.depth -= 1
        if self.depth or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        body = list(updated.body.body)
        if not _any_use(updated.body, self.rt):
            return updated
        if any(m.findall(updated.body, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(
                target=m.Name(self.rt))])]))):
            return updated  # it has its own rt (a setup line from an earlier port, or the script's)
        at = next(i for i, stmt in enumerate(body) if _any_use(stmt, self.rt))  # as late as it can, as at top level
        body.insert(at, self.setup)
        self.added += 1
        return updated.with_changes(body=updated.body.with_changes(body=body))


def place(module: cst.Module, rt: str, setup_args: str) -> tuple[cst.Module, list[tuple[str, str]]]:
    """``module`` with ``import ezpz`` and its setup line(s) where ``rt`` is used; and what was added: (code, where)."""
    uses = _uses(module, rt)
    if not (uses.module_level or uses.in_function):
        return module, []
    body: list[cst.BaseStatement] = list(module.body)
    setup = cst.parse_statement(f"{rt} = ezpz.hooks.setup({setup_args})\n")
    assert isinstance(setup, cst.SimpleStatementLine)
    added: list[tuple[str, str]] = []
    has_setup = any(_is_setup(s, rt) for s in body)
    if uses.module_level and not has_setup:
        first_use = next(i for i, s in enumerate(body) if _uses(s, rt).module_level)
        body = _insert(body, first_use, setup, take_lines=False)
        added.append((f"{rt} = ezpz.hooks.setup({setup_args})", f"before the first top-level use of {rt}"))
        has_setup = True
    if not _has_import_ezpz(body):
        first_setup = next((i for i, s in enumerate(body) if _is_setup(s, rt)), len(body))
        index = min(_import_index(body), first_setup)
        import_ezpz = cst.parse_statement("import ezpz\n")
        assert isinstance(import_ezpz, cst.SimpleStatementLine)
        body = _insert(body, index, import_ezpz, take_lines=True)
        added.append(("import ezpz", "with the imports"))
    module = module.with_changes(body=body)
    if not has_setup:
        lazy = cst.parse_statement(f"{rt} = ezpz.hooks.get_runtime() or ezpz.hooks.setup({setup_args})\n")
        assert isinstance(lazy, cst.SimpleStatementLine)
        adder = _FunctionSetup(rt, lazy)
        module = module.visit(adder)
        if adder.added:
            added.append((f"{rt} = ezpz.hooks.get_runtime() or ezpz.hooks.setup({setup_args})",
                          f"in {adder.added} function(s) using {rt}, before the first use (the file uses it only inside "
                          "functions): the runtime the entry script set up, or set up now; get_runtime() is a plain "
                          "read, cheap in a per-batch helper"))
    return module, added
