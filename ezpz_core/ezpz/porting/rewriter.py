"""The libcst transformer that rewrites CUDA-only calls into ``rt`` calls, one catalogue rule at a time.

It changes expressions and statements only; adding ``import ezpz`` and the
``rt = ezpz.hooks.setup(...)`` line is :mod:`ezpz.porting.placement`'s job. Each
rewrite is recorded in the file's :class:`~ezpz.porting.report.FileReport` with
its line in the original file; CUDA uses it leaves are recorded as unported,
unknown or kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs
import libcst as cst
import libcst.matchers as m
from libcst.metadata import ParentNodeProvider, PositionProvider, QualifiedNameProvider

from ezpz.porting import catalogue as cat
from ezpz.primitives.cuda_device import is_cuda_device_string
from ezpz.porting.report import Change, FileReport, Finding

__all__ = ["Requests", "Rewriter", "SetupArgs"]

_GRAD_SCALER_POSITIONAL = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")
_DDP = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel")
_PROFILE = ("torch.profiler.profile", "torch.profiler.profiler.profile")
_CUDA_ACTIVITY = ("torch.profiler.ProfilerActivity.CUDA", "torch.autograd.ProfilerActivity.CUDA")
_STALE_COMMENT = re.compile(r"cuda|nccl|gpu", re.IGNORECASE)


@attrs.frozen
class SetupArgs:
    """What the ``setup()`` call of every ported file asks for (``None``: left to ezpz's policies)."""

    precision: str | None = None
    backend: str | None = None


@attrs.define
class Requests:
    """What the script asks explicitly (a precision an autocast names, a backend other than NCCL), by line."""

    precision: dict[str, list[int]] = attrs.field(factory=dict)
    backend: dict[str, list[int]] = attrs.field(factory=dict)


def _string_value(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _is_cuda_string(node: cst.CSTNode) -> bool:
    """``'cuda'``, ``'cuda:0'`` or ``f'cuda:{i}'``."""
    value = _string_value(node)
    if value is not None:
        return is_cuda_device_string(value)
    if isinstance(node, cst.FormattedString) and node.parts:
        first = node.parts[0]
        return (isinstance(first, cst.FormattedStringText) and first.value == "cuda:" and len(node.parts) == 2
                and isinstance(node.parts[1], cst.FormattedStringExpression))
    return False


def _is_nccl_string(node: cst.CSTNode) -> bool:
    value = _string_value(node)
    return value is not None and bool(cat.NCCL_LITERAL.search(value))


class Rewriter(cst.CSTTransformer):
    """One pass over one module. ``setup`` is the project's decided ``setup()`` arguments; ``rt`` the runtime's name.

    ``opportunistic``: also rewrite ``torch.save``/``torch.load`` (worth it only in a file that needs ``rt``
    anyway: a CPU-only helper module is not made to call ``setup()`` for them). ``drop_device_ids``: drop DDP's
    ``device_ids`` (only in a project the first pass found CUDA in: a script written for ezpz keeps its own).
    """

    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ParentNodeProvider)

    def __init__(self, report: FileReport, setup: SetupArgs, rt: str = "rt", opportunistic: bool = False,
                 drop_device_ids: bool = False) -> None:
        super().__init__()
        self.report, self.setup, self.rt, self.opportunistic = report, setup, rt, opportunistic
        self.drop_device_ids = drop_device_ids
        self.requests = Requests()
        self.needs_rt = False  # a rewrite that is worth calling setup() for
        self._module: cst.Module | None = None
        self._lines: list[str] | None = None
        self._claimed: set[int] = set()  # original nodes a rule replaces whole (their children are not visited)
        self._handled: set[int] = set()  # CUDA references a rule took care of
        self._references: list[tuple[cst.CSTNode, str]] = []  # every outermost torch.cuda.* reference, in order
        self._guards: list[bool] = []  # per enclosing `if`: does its test ask dist.is_initialized()?
        self._cuda_imports: list[tuple[str, int]] = []  # `from torch.cuda... import ...`: (code, line)

    # -- helpers -----------------------------------------------------------------------------------------
    def _expr(self, code: str) -> cst.BaseExpression:
        return cst.parse_expression(code.replace("rt.", f"{self.rt}."))

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _code(self, node: cst.CSTNode) -> str:
        assert self._module is not None
        return self._module.code_for_node(node).strip()

    def _names(self, node: cst.CSTNode) -> set[str]:
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def _is(self, node: cst.CSTNode, names: Sequence[str] | str) -> bool:
        wanted = (names,) if isinstance(names, str) else tuple(names)
        return bool(self._names(node) & set(wanted))

    def _changed(self, original: cst.CSTNode, after: cst.CSTNode | str, rule: str, why: str, *,
                 needs_rt: bool = True) -> None:
        after_code = after if isinstance(after, str) else cst.Module(body=[]).code_for_node(after).strip()
        self.report.changes.append(Change(line=self._line(original), before=self._code(original), after=after_code,
                                          rule=rule, why=why))
        self.needs_rt = self.needs_rt or needs_rt

    def _finding(self, kind: str, node: cst.CSTNode, api: str, why: str) -> None:
        """A line left as it was; ``source`` is the whole line, as the reader finds it in the file."""
        line = self._line(node)
        if self._lines is None:
            assert self._module is not None
            self._lines = self._module.code.splitlines()
        source = self._lines[line - 1].strip() if 0 < line <= len(self._lines) else self._code(node)
        getattr(self.report, kind).append(Finding(line=line, api=api, source=source, why=why))

    def _handle(self, node: cst.CSTNode) -> None:
        self._handled.add(id(node))

    def _request(self, kind: str, value: str, node: cst.CSTNode) -> None:
        getattr(self.requests, kind).setdefault(value, []).append(self._line(node))

    def _dtype(self, node: cst.CSTNode | None) -> str | None:
        """The precision a dtype expression names (``torch.bfloat16``, ``'float16'``), or None when not a literal."""
        if node is None:
            return None
        value = _string_value(node)
        if value is not None:
            return cat.DTYPE_PRECISIONS.get(value)
        for name in self._names(node):
            if name in cat.DTYPE_PRECISIONS:
                return cat.DTYPE_PRECISIONS[name]
        return None

    # -- module, references ---------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> bool:
        self._module = node
        return True

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        parent = self.get_metadata(ParentNodeProvider, node, None)
        if node.attr.value == "is_cuda":
            self._finding("unported", node, ".is_cuda", cat.UNPORTABLE[".is_cuda"])
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return True  # not the outermost name of a chain: its parent is the reference
        for name in sorted(self._names(node)):
            if cat.is_cuda_api(name) and name != "torch.cuda":
                self._references.append((node, name))
                break
        return True

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            self._check_module(node, self._code(alias.name))
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.module is not None and node.relative == ():
            module = self._code(node.module)
            self._check_module(node, module)
            if module.startswith("torch.cuda"):
                self._cuda_imports.append((self._code(node), self._line(node)))
        return False

    def _check_module(self, node: cst.CSTNode, module: str) -> None:
        for name, why in cat.UNPORTABLE_MODULES.items():
            if module == name or module.startswith(name + "."):
                self._finding("unported", node, module, why)
                return

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        for node, name in self._references:
            if id(node) in self._handled:
                continue
            if name in cat.KEPT:
                self._finding("kept", node, name, cat.KEPT[name])
            elif name in cat.UNPORTABLE:
                self._finding("unported", node, name, cat.UNPORTABLE[name])
            else:
                self._finding("unknown", node, name, "not in ezpz port's catalogue: check what it does on other "
                              "devices (torch.accelerator and torch.get_device_module(rt.device) have "
                              "device-neutral forms of many torch.cuda calls)")
        return self._prune_imports(original, updated)

    def _prune_imports(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        """``from torch.cuda.amp import autocast, GradScaler`` whose names only the rewritten lines used: dropped."""
        body = list(updated.body)
        for index, stmt in enumerate(updated.body):
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            if not (isinstance(small, cst.ImportFrom) and small.module is not None and small.relative == ()
                    and isinstance(small.names, Sequence)):
                continue
            if not cst.Module(body=[]).code_for_node(small.module).startswith("torch.cuda"):
                continue
            keep = []
            for alias in small.names:
                local = alias.evaluated_alias or alias.evaluated_name
                inside = _name_count(stmt, local)
                was_used = _name_count(original, local) > inside
                if not was_used or _name_count(updated, local) > inside:
                    keep.append(alias)
            if len(keep) == len(small.names):
                continue
            code = cst.Module(body=[]).code_for_node(small).strip()
            line = next((line for text, line in self._cuda_imports if text == code), 0)
            if keep:
                last = keep[-1].with_changes(comma=small.names[-1].comma)
                new_import = small.with_changes(names=[*keep[:-1], last])
                body[index] = stmt.with_changes(body=[new_import])
                after = cst.Module(body=[]).code_for_node(new_import).strip()
            else:
                body[index] = cst.RemovalSentinel.REMOVE  # type: ignore[call-overload]
                after = ""
            self.report.changes.append(Change(line=line, before=code, after=after, rule="import",
                                              why="the names it imported are no longer used: the lines that used "
                                                  "them call rt now"))
        return updated.with_changes(body=[b for b in body if not isinstance(b, cst.RemovalSentinel)])

    # -- whole-expression patterns (claimed top-down) --------------------------------------------------------
    def visit_IfExp(self, node: cst.IfExp) -> bool:
        if self._if_exp_rewrite(node) is not None:
            self._claimed.add(id(node))
            return False
        return True

    def _if_exp_rewrite(self, node: cst.IfExp) -> tuple[str, str, str] | None:
        """(replacement, rule, why) for a CUDA-derived conditional the catalogue knows, else None."""
        test_calls = {n for c in m.findall(node.test, m.Call()) if isinstance(c, cst.Call) for n in self._names(c.func)}
        if "torch.cuda.is_bf16_supported" in test_calls:
            body, orelse = self._dtype(node.body), self._dtype(node.orelse)
            if body and orelse:
                if isinstance(node.body, cst.SimpleString):
                    return ("{'bf16': 'bfloat16', 'fp16': 'float16', 'fp32': 'float32'}[rt.amp.dtype]", "dtype-choice",
                            "the dtype was chosen from what the CUDA GPU supports; rt.amp.dtype is the precision "
                            "the chosen device's policy picked (EZPZ_PRECISION overrides it), spelled as the script "
                            "spells dtypes")
                return ("rt.amp.torch_dtype", "dtype-choice", "the dtype was chosen from what the CUDA GPU supports; "
                        "rt.amp.torch_dtype is the precision the chosen device's policy picked")
        if "torch.cuda.is_available" in test_calls:
            branches = (node.body, node.orelse)
            if any(_is_cuda_string(b) for b in branches) and any(_string_value(b) == "cpu" for b in branches):
                return ("str(rt.device)", "device-choice", cat.DEVICE_STR_WHY + "; the fallback to 'cpu' is "
                        "setup()'s too (EZPZ_DEVICE=cpu forces it), said in rt.explain() instead of silently")
        if (_string_value(node.body) == "cuda" and _string_value(node.orelse) == "cpu"
                and m.matches(node.test, m.Comparison(left=m.SimpleString(), comparisons=[m.ComparisonTarget(
                    operator=m.In())]))):
            assert isinstance(node.test, cst.Comparison)
            if _string_value(node.test.left) == "cuda":
                where = self._code(node.test.comparisons[0].comparator)
                return (f"torch.device({where}).type", "device-type",
                        "the device type was sniffed from the string ('cuda' in it or not), which calls every "
                        "other accelerator 'cpu' and so switched autocast off there; torch.device(...).type is "
                        "the type of the device the script runs on")
        return None

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp) -> cst.BaseExpression:
        found = self._if_exp_rewrite(original) if id(original) in self._claimed else None
        if found is None:
            return self._if_exp_branches(original, updated)
        code, rule, why = found
        new = self._expr(code)
        self._changed(original, new, rule, why)
        for c in m.findall(original, m.Attribute()):
            self._handle(c)
        return new

    def _if_exp_branches(self, original: cst.IfExp, updated: cst.IfExp) -> cst.IfExp:
        """``'cuda' if args.cuda else 'cpu'``: the script's own switch stays, its CUDA branch becomes the device."""
        changes = {}
        for field in ("body", "orelse"):
            branch = getattr(original, field)
            if _is_cuda_string(branch):
                new = self._expr("str(rt.device)")
                self._changed(branch, new, "device", cat.DEVICE_STR_WHY + "; the script's own condition is kept")
                changes[field] = new
        return updated.with_changes(**changes) if changes else updated

    # -- statements -----------------------------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> bool:
        self._guards.append(bool(m.findall(node.test, m.Attribute(attr=m.Name("is_initialized")))))
        return True

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        self._guards.pop()
        return updated

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        if len(node.body) == 1 and isinstance(node.body[0], cst.Expr) and isinstance(node.body[0].value, cst.Call):
            call = node.body[0].value
            if self._is(call.func, tuple(cat.REMOVED_CALLS)):
                self._claimed.add(id(call))
                self._handle(call.func)
        return True

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.BaseStatement | cst.RemovalSentinel:
        if len(original.body) == 1 and isinstance(original.body[0], cst.Expr):
            call = original.body[0].value
            if isinstance(call, cst.Call) and id(call) in self._claimed:
                name = next(iter(self._names(call.func) & set(cat.REMOVED_CALLS)))
                self._changed(original, "", "removed", cat.REMOVED_CALLS[name].why, needs_rt=False)
                return cst.RemoveFromParent()
            if isinstance(call, cst.Call) and self._is(call.func, cat.INIT_PROCESS_GROUP) and not any(self._guards):
                return self._guard_init(original, updated)
        if updated.trailing_whitespace.comment is not None and not original.deep_equals(updated):
            if _STALE_COMMENT.search(updated.trailing_whitespace.comment.value):
                # the comment described the CUDA literal that is gone (e.g. "# 'nccl', 'gloo', etc.")
                updated = updated.with_changes(trailing_whitespace=cst.TrailingWhitespace())
        return updated

    def _guard_init(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine) -> cst.BaseStatement:
        call = updated.body[0].value  # type: ignore[attr-defined]
        assert isinstance(call, cst.Call)
        func = self._code(original.body[0].value.func)  # type: ignore[attr-defined]
        module = func.rsplit(".", 1)[0] if "." in func else "torch.distributed"
        guard = cst.parse_statement(f"if not {module}.is_initialized():\n    pass\n")
        assert isinstance(guard, cst.If)
        inner = updated.with_changes(leading_lines=(), trailing_whitespace=cst.TrailingWhitespace(
            whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment("# setup() started it when the world size is > 1")))
        new = guard.with_changes(body=guard.body.with_changes(body=[inner]), leading_lines=updated.leading_lines)
        self._changed(original, new, "init_process_group", cat.INIT_WHY)
        return new

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign | cst.RemovalSentinel:
        target = original.targets[0].target if len(original.targets) == 1 else None
        if target is not None and isinstance(target, cst.Attribute):
            names = self._names(target)
            flag = next((n for n in names if n in cat.TF32_FLAGS), None)
            if flag is not None and m.matches(original.value, m.Name("True")):
                self._handle(target)
                self._changed(original, "", "tf32", cat.TF32_WHY, needs_rt=False)
                return cst.RemoveFromParent()
        value = self._value(original.value, updated.value, "assignment")
        return updated if value is None else updated.with_changes(value=value)

    def leave_AnnAssign(self, original: cst.AnnAssign, updated: cst.AnnAssign) -> cst.AnnAssign:
        if original.value is None or updated.value is None:
            return updated
        value = self._value(original.value, updated.value, "assignment")
        return updated if value is None else updated.with_changes(value=value)

    def _value(self, original: cst.BaseExpression, updated: cst.BaseExpression,
               context: str) -> cst.BaseExpression | None:
        """A CUDA device or NCCL string in a value position (assigned, a default): its portable form."""
        if _is_cuda_string(original):
            new = self._expr("str(rt.device)")
            self._changed(original, new, "device", cat.DEVICE_STR_WHY)
            return new
        if _is_nccl_string(original):
            new = self._expr("rt.backend")
            self._changed(original, new, "backend", cat.BACKEND_WHY)
            return new
        return None

    def visit_SimpleString(self, node: cst.SimpleString) -> bool:
        self._check_stray(node)
        return False

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        self._check_stray(node)
        return True

    def _check_stray(self, node: cst.BaseExpression) -> None:
        """A CUDA/NCCL string somewhere no rule rewrites: a comparison is kept (with a note), the rest reported."""
        cuda, nccl = _is_cuda_string(node), _is_nccl_string(node)
        if not (cuda or nccl):
            return
        parent = self.get_metadata(ParentNodeProvider, node, None)
        if isinstance(parent, (cst.Arg, cst.Assign, cst.AnnAssign)) or (
                cuda and isinstance(parent, cst.IfExp) and node is not parent.test):
            return  # rewritten by the call's, the assignment's or the conditional's rule
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            holder = self.get_metadata(ParentNodeProvider, parent, None) if isinstance(parent, cst.ComparisonTarget) \
                else parent
            self._finding("kept", holder or node, "device_type == 'cuda'", cat.KEPT["device_type == 'cuda'"])
            return
        key = "cuda-string" if cuda else "nccl-string"
        self._finding("unported", node, key, cat.UNPORTABLE[key])

    # -- calls ---------------------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> bool:
        if self._is(node.func, "torch.device") and node.args and _is_cuda_string(node.args[0].value):
            self._claimed.add(id(node))
            return False
        if self._is(node.func, _PROFILE):
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "activities":
                    for attr in m.findall(arg.value, m.Attribute()):
                        if self._is(attr, _CUDA_ACTIVITY):
                            self._claimed.add(id(node))
        return True

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if id(original) in self._claimed:
            return self._claimed_call(original, updated)
        names = self._names(original.func)
        for rewrite in (self._simple, self._memory, self._dot_cuda, self._environ_rank, self._autocast,
                        self._grad_scaler, self._ddp, self._init_backend, self._nvtx, self._save_load):
            new = rewrite(original, updated, names)
            if new is not None:
                return new
        return self._call_strings(original, updated)

    def _claimed_call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if self._is(original.func, "torch.device"):
            new = self._expr("rt.device")
            self._changed(original, new, "device", cat.DEVICE_WHY)
            return new
        if self._is(original.func, _PROFILE):
            for attr in m.findall(original, m.Attribute()):
                self._handle(attr)
            args = [a for a in updated.args if not (a.keyword is not None and a.keyword.value == "activities")]
            new = updated.with_changes(func=self._expr("rt.profiler"), args=_fix_commas(args, updated.args))
            self._changed(original, new, "profiler", "rt.profiler() profiles the chosen device's activities "
                          "(CUDA, XPU, ... as its plugin says) besides the CPU; ProfilerActivity.CUDA exists "
                          "only with CUDA")
            return new
        return updated  # a statement-level call (torch.cuda.set_device) its line's rule removes

    def _simple(self, original: cst.Call, updated: cst.Call, names: set[str]) -> cst.BaseExpression | None:
        for name in names & set(cat.SIMPLE_CALLS):
            rule = cat.SIMPLE_CALLS[name]
            assert rule.target is not None
            new = self._expr(rule.target)
            self._handle(original.func)
            self._changed(original, new, name.rsplit(".", 1)[1], rule.why)
            return new
        if "torch.device" in names and len(updated.args) == 1 and m.matches(updated.args[0].value, m.Call(
                func=m.Name("str"), args=[m.Arg(value=m.Attribute(value=m.Name(self.rt), attr=m.Name("device")))])):
            # torch.device(<a CUDA-or-CPU choice, now str(rt.device)>): the runtime's device itself, one change
            inner = self.report.changes.pop() if self.report.changes and self.report.changes[-1].rule == \
                "device-choice" else None
            new = self._expr("rt.device")
            self._changed(original, new, "device-choice", inner.why if inner else cat.DEVICE_WHY)
            return new
        return None

    def _memory(self, original: cst.Call, updated: cst.Call, names: set[str]) -> cst.BaseExpression | None:
        for name in names & set(cat.MEMORY_STATS):
            new = self._expr(f"rt.memory_stats().get('{cat.MEMORY_STATS[name]}', float('nan'))")
            self._handle(original.func)
            self._changed(original, new, "memory_stats", cat.MEMORY_WHY)
            return new
        return None

    def _dot_cuda(self, original: cst.Call, updated: cst.Call, names: set[str]) -> cst.BaseExpression | None:
        """``x.cuda()``, ``x.cuda(i)``, ``x.cuda(non_blocking=True)``: ``x.to(rt.device, ...)``."""
        func = updated.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "cuda") or "torch.cuda" in names:
            return None
        kept = [a for a in updated.args if a.keyword is not None and a.keyword.value in ("non_blocking",
                                                                                          "memory_format")]
        args = [cst.Arg(self._expr("rt.device")), *kept]
        new = updated.with_changes(func=func.with_changes(attr=cst.Name("to")), args=_fix_commas(args, updated.args))
        self._changed(original, new, ".cuda()", ".cuda() moves to an NVIDIA/AMD GPU only; .to(rt.device) moves to "
                      "the device setup() chose for this rank (an index the script passed is the rank's own there)")
        return new

    def _environ_rank(self, original: cst.Call, updated: cst.Call, names: set[str]) -> cst.BaseExpression | None:
        """``int(os.environ['LOCAL_RANK'])`` (or ``.get(..., 0)``/``os.getenv(..., 0)``): the runtime's field."""
        if not (isinstance(original.func, cst.Name) and original.func.value == "int" and len(original.args) == 1):
            return None
        inner = original.args[0].value
        key: str | None = None
        if isinstance(inner, cst.Subscript) and self._is(inner.value, "os.environ") and len(inner.slice) == 1:
            index = inner.slice[0].slice
            key = _string_value(index.value) if isinstance(index, cst.Index) else None
        elif isinstance(inner, cst.Call) and self._is(inner.func, ("os.environ.get", "os.getenv")) \
                and len(inner.args) == 2:
            key = _string_value(inner.args[0].value)
            default = self._code(inner.args[1].value).strip("'\"")
            # the default must be what a plain process has (rank 0, size 1); -1 marks "not launched": kept
            if key is not None and default != ("1" if "SIZE" in key else "0"):
                key = None
        if key is None or key not in cat.RANK_VARIABLES:
            return None
        new = self._expr(cat.RANK_VARIABLES[key])
        self._changed(original, new, "rank", cat.RANK_WHY)
        return new

    def _autocast(self, original: cst.Call, updated: cst.Call, names: set[str]) -> cst.BaseExpression | None:
        name = next((n for n in names if n in cat.AUTOCAST_CALLS), None)
        if name is None:
            return None
        pairs = list(zip(original.args, updated.args))  # the original's carry the metadata (qualified names)
        if name.startswith("torch.cuda.amp"):
            order: tuple[str, ...] = ("enabled", "dtype", "cache_enabled")
        else:
            device = _pop_pair(pairs, 0, "device_type")
            if device is None or not _is_cuda_string(device[0].value):
                return None  # a device type the script computes: device-neutral already
            order = ("dtype", "enabled", "cache_enabled")
        rest: list[cst.Arg] = []
        dtype: tuple[cst.Arg, cst.Arg] | None = None
        for i, (orig, arg) in enumerate(pairs):
            key = arg.keyword.value if arg.keyword is not None else (order[i] if i < len(order) else None)
            if key == "dtype":
                dtype = (orig, arg)
            elif key == "enabled" and m.matches(arg.value, m.Name("True")):
                continue
            else:
                rest.append(_as_keyword(arg, key) if key else arg)
        precision = self._dtype(dtype[0].value) if dtype is not None else None
        if precision is not None:
            self._request("precision", precision, original)
        self._handle(original.func)
        if not rest and (dtype is None or (precision is not None and precision == self.setup.precision)):
            new: cst.BaseExpression = self._expr("rt.autocast()")
            why = cat.AUTOCAST_WHY + ("; the dtype the script names is kept: setup() is asked for precision="
                                      f"{precision!r}" if precision else "; the script named no dtype (CUDA's "
                                      "implicit fp16), so the device's precision policy picks (EZPZ_PRECISION)")
        else:
            kwargs = ([_as_keyword(dtype[1], "dtype")] if dtype is not None else []) + rest
            new = cst.Call(func=self._expr("torch.autocast"), args=_fix_commas(
                [cst.Arg(self._expr("rt.device_type")), *kwargs]))
            why = ("autocast on the chosen device with the arguments the script gives (kept as they are: "
                   "rt.autocast() takes none)")
            if precision is not None:
                why += "; the script names more than one precision, so setup() was not asked for one"
        self._changed(original, new, "autocast", why)
        return new

    def _grad_scaler(self, original: cst.Call, updated: cst.Call, names: set[str]) -> cst.BaseExpression | None:
        name = next((n for n in names if n in cat.GRAD_SCALER_CALLS), None)
        if name is None:
            return None
        args = list(updated.args)
        if not name.startswith("torch.cuda.amp"):
            device = _pop_arg(args, 0, "device")
            if device is not None and not _is_cuda_string(device.value):
                return None  # torch.amp.GradScaler(device_type, ...): device-neutral already
        kwargs = []
        for i, arg in enumerate(args):
            if arg.keyword is None:
                if i >= len(_GRAD_SCALER_POSITIONAL):
                    return None
                arg = arg.with_changes(keyword=cst.Name(_GRAD_SCALER_POSITIONAL[i]), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            kwargs.append(arg)
        new = cst.Call(func=self._expr("rt.grad_scaler"), args=_fix_commas(kwargs, updated.args))
        self._handle(original.func)
        self._changed(original, new, "grad_scaler", cat.GRAD_SCALER_WHY)
        return new

    def _ddp(self, original: cst.Call, updated: cst.Call, names: set[str]) -> cst.BaseExpression | None:
        if not names & set(_DDP) or not self.drop_device_ids:
            return None
        positional = [a for a in updated.args if a.keyword is None]
        dropped = [a for a in updated.args if a.keyword is not None and a.keyword.value in ("device_ids",
                                                                                            "output_device")]
        if len(positional) > 1:
            self._finding("unported", original, "device_ids", cat.UNPORTABLE["device_ids"])
            return None
        if not dropped:
            return None
        args = [a for a in updated.args if a not in dropped]
        new = updated.with_changes(args=_fix_commas(args, updated.args))
        self._changed(original, new, "ddp", "DDP finds a single-device module's device itself; device_ids names "
                      "CUDA ordinals and must be None for CPU and most other devices, so it is dropped "
                      "(the module is already on rt.device)", needs_rt=False)
        return new

    def _init_backend(self, original: cst.Call, updated: cst.Call, names: set[str]) -> cst.BaseExpression | None:
        """The backend argument of init_process_group: NCCL becomes rt.backend; another one is asked of setup()."""
        if cat.INIT_PROCESS_GROUP not in names:
            return None
        self._handle(original.func)
        args = list(updated.args)
        index = next((i for i, a in enumerate(args) if (a.keyword is not None and a.keyword.value == "backend")
                      or (i == 0 and a.keyword is None)), None)
        if index is None:
            args.insert(0, cst.Arg(self._expr("rt.backend"), keyword=cst.Name("backend"), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
            new = updated.with_changes(args=_fix_commas(args, updated.args))
            self._changed(original, new, "backend", cat.BACKEND_WHY + "; without a backend torch would pick NCCL "
                          "for CUDA tensors")
            return new
        value = original.args[index].value
        if _is_nccl_string(value):
            args[index] = args[index].with_changes(value=self._expr("rt.backend"))
            new = updated.with_changes(args=args)
            self._changed(original, new, "backend", cat.BACKEND_WHY)
            return new
        literal = _string_value(value)
        if literal is not None:
            self._request("backend", literal, original)
        return updated if updated is not original else None

    def _nvtx(self, original: cst.Call, updated: cst.Call, names: set[str]) -> cst.BaseExpression | None:
        if "torch.cuda.nvtx.range" not in names:
            return None
        new = updated.with_changes(func=self._expr("rt.range"))
        self._handle(original.func)
        self._changed(original, new, "range", "rt.range() marks the region with the chosen device's tool (NVTX, "
                      "roctx, ITT) and in the torch profiler; NVTX exists only with CUDA")
        return new

    def _save_load(self, original: cst.Call, updated: cst.Call, names: set[str]) -> cst.BaseExpression | None:
        if not self.opportunistic:
            return None
        if "torch.save" in names:
            new = updated.with_changes(func=self._expr("rt.save"))
            self._changed(original, new, "save", "rt.save() is torch.save on eager devices; on a lazy device "
                          "(XLA) it brings every tensor to the host in one transfer first", needs_rt=False)
            return new
        if "torch.load" in names and not any(
                (a.keyword is not None and a.keyword.value == "map_location") or (i == 1 and a.keyword is None)
                for i, a in enumerate(updated.args)):
            args = [*updated.args, cst.Arg(self._expr("rt.device"), keyword=cst.Name("map_location"),
                                           equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                                 whitespace_after=cst.SimpleWhitespace("")))]
            new = updated.with_changes(args=_fix_commas(args, updated.args))
            self._changed(original, new, "load", "a file saved on cuda:N holds storages tagged cuda:N, which "
                          "torch.load restores there unless told otherwise: that fails where CUDA is absent or has "
                          "fewer devices; map_location=rt.device loads onto the chosen device", needs_rt=False)
            return new
        return None

    def _call_strings(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """CUDA/NCCL strings passed to any other call: as a device where the parameter is one, else as a string."""
        args = list(updated.args)
        changed = False
        is_to = isinstance(original.func, cst.Attribute) and original.func.attr.value == "to"
        for i, (orig, arg) in enumerate(zip(original.args, updated.args)):
            key = orig.keyword.value if orig.keyword is not None else None
            if _is_cuda_string(orig.value):
                if key == "device_type":
                    code, why = "rt.device_type", cat.DEVICE_WHY
                elif key in ("device", "map_location", "device_id") or (is_to and key is None and i == 0):
                    code, why = "rt.device", cat.DEVICE_WHY
                else:
                    code, why = "str(rt.device)", cat.DEVICE_STR_WHY
            elif _is_nccl_string(orig.value) and key in ("backend", "default", None):
                code, why = "rt.backend", cat.BACKEND_WHY
            else:
                continue
            new_value = self._expr(code)
            self._changed(orig.value, new_value, "device" if "device" in code else "backend", why)
            args[i] = arg.with_changes(value=new_value)
            changed = True
        mapping = next((a.value for a in original.args if a.keyword is not None and a.keyword.value ==
                        "map_location" and isinstance(a.value, cst.Dict)), None)
        if isinstance(mapping, cst.Dict):
            if any(_is_cuda_string(e.key) for e in mapping.elements if isinstance(e, cst.DictElement)):
                self._finding("unported", original, "map_location-dict", cat.UNPORTABLE["map_location-dict"])
        return updated.with_changes(args=args) if changed else updated


class _NameCount(cst.CSTVisitor):
    """How often a name is read or bound, not counting attribute names (``rt.autocast`` is no ``autocast``)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.count = name, 0

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> bool:
        self.count += node.value == self.name
        return False


def _name_count(tree: cst.CSTNode, name: str) -> int:
    counter = _NameCount(name)
    tree.visit(counter)
    return counter.count


def _as_keyword(arg: cst.Arg, key: str) -> cst.Arg:
    """``arg`` passed as ``key=...`` (a positional argument moved after another one must be named)."""
    return arg.with_changes(keyword=cst.Name(key), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))


def _pop_pair(pairs: list[tuple[cst.Arg, cst.Arg]], position: int,
              keyword: str) -> tuple[cst.Arg, cst.Arg] | None:
    """Remove and return the (original, updated) argument given as ``keyword=`` or at ``position``, if any."""
    for i, (orig, _arg) in enumerate(pairs):
        if orig.keyword is not None and orig.keyword.value == keyword:
            return pairs.pop(i)
    positional = [i for i, (a, _u) in enumerate(pairs) if a.keyword is None and a.star == ""]
    if len(positional) > position:
        return pairs.pop(positional[position])
    return None


def _pop_arg(args: list[cst.Arg], position: int, keyword: str) -> cst.Arg | None:
    """Remove and return the argument given as ``keyword=`` or at ``position`` (positionally), if any."""
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            return args.pop(i)
    positional = [i for i, a in enumerate(args) if a.keyword is None and a.star == ""]
    if len(positional) > position:
        return args.pop(positional[position])
    return None


def _fix_commas(args: Sequence[cst.Arg], like: Sequence[cst.Arg] = ()) -> list[cst.Arg]:
    """Arguments with a comma after every one but the last (libcst keeps commas on the nodes).

    ``like`` is the call's argument list before the change: when it ended with a trailing comma (a call laid out
    one argument per line), the new last argument keeps one too, with the old last comma's line break and comment.
    """
    trailing = bool(like) and isinstance(like[-1].comma, cst.Comma)
    fixed = []
    for i, arg in enumerate(args):
        if i < len(args) - 1:
            fixed.append(arg if isinstance(arg.comma, cst.Comma)
                         else arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))))
        elif trailing:
            fixed.append(arg.with_changes(comma=_closing_comma(arg, like[-1])))
        else:
            fixed.append(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT))
    return fixed


def _closing_comma(arg: cst.Arg, old_last: cst.Arg) -> cst.Comma:
    """The comma for a new last argument: its own line's comment, then the old last comma's way to the ``)``."""
    closing = old_last.comma
    assert isinstance(closing, cst.Comma)
    own = arg.comma
    if arg is old_last or not isinstance(own, cst.Comma):
        return closing
    if isinstance(own.whitespace_after, cst.ParenthesizedWhitespace) and isinstance(
            closing.whitespace_after, cst.ParenthesizedWhitespace):
        return closing.with_changes(whitespace_after=closing.whitespace_after.with_changes(
            first_line=own.whitespace_after.first_line))
    return closing
