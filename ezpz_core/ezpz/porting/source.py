"""Port one module's source text: the CUDA rewrites, then ``import ezpz`` and the ``setup()`` line.

:func:`scan` is the first pass (what the file asks explicitly, whether it needs
``rt`` at all); :func:`port_source` the second, with the ``setup()`` arguments the
whole project agreed on (:mod:`ezpz.porting.project`).
"""

from __future__ import annotations

import attrs
import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper

from ezpz.porting.placement import place
from ezpz.porting.report import Change, FileReport
from ezpz.porting.rewriter import Requests, Rewriter, SetupArgs

__all__ = ["Scan", "port_source", "runtime_name", "scan", "setup_arguments"]


@attrs.frozen
class Scan:
    """The first pass's findings: what the file asks for and whether it uses (or will use) ``rt``."""

    requests: Requests
    needs_rt: bool
    cuda: bool
    """Whether the first pass rewrote anything CUDA-specific at all."""


def runtime_name(module: cst.Module) -> str:
    """``rt``, unless the script already uses that name for something else (then ``ezpz_rt``)."""
    setup = m.Call(func=m.Attribute(value=m.Attribute(value=m.Name("ezpz"), attr=m.Name("hooks")),
                                    attr=m.Name("setup")))
    for name in ("rt", "ezpz_rt"):
        if m.findall(module, m.Assign(targets=[m.AssignTarget(target=m.Name(name))], value=setup)):
            return name
        if not m.findall(module, m.Name(name)):
            return name
    return "ezpz_rt"


def setup_arguments(args: SetupArgs) -> str:
    """The keyword arguments of the ``setup()`` call, as source."""
    parts = [f"{k}={v!r}" for k, v in (("precision", args.precision), ("backend", args.backend)) if v is not None]
    return ", ".join(parts)


def _run(module: cst.Module, path: str, setup: SetupArgs, opportunistic: bool,
         drop_device_ids: bool) -> tuple[cst.Module, Rewriter]:
    report = FileReport(path=path)
    rewriter = Rewriter(report, setup, rt=runtime_name(module), opportunistic=opportunistic,
                        drop_device_ids=drop_device_ids)
    return MetadataWrapper(module).visit(rewriter), rewriter


def scan(text: str, path: str) -> Scan:
    """First pass: the precision and backend the file names explicitly, and whether it needs ``rt``."""
    module = cst.parse_module(text)
    _, rewriter = _run(module, path, SetupArgs(), opportunistic=False, drop_device_ids=False)
    has_setup = runtime_name(module) != "rt" or bool(m.findall(module, m.Name("rt")))
    return Scan(requests=rewriter.requests, needs_rt=rewriter.needs_rt or has_setup,
                cuda=bool(rewriter.report.changes))


def port_source(text: str, path: str, setup: SetupArgs, *, opportunistic: bool,
                drop_device_ids: bool = True) -> tuple[str, FileReport]:
    """The ported text of one module and its report. Raises ``libcst.ParserSyntaxError`` on unparsable source.

    ``opportunistic`` and ``drop_device_ids``: see :class:`~ezpz.porting.rewriter.Rewriter`.
    """
    module = cst.parse_module(text)
    new, rewriter = _run(module, path, setup, opportunistic, drop_device_ids)
    new, added = place(new, rewriter.rt, setup_arguments(setup))
    report = rewriter.report
    code = new.code
    report.status = "ported" if code != text else "unchanged"
    if added:
        report.changes.extend(_additions(new, added))
    return code, report


def _additions(module: cst.Module, added: list[tuple[str, str]]) -> list[Change]:
    """The lines placement added, as changes (their line numbers are in the ported file)."""
    lines = module.code.splitlines()
    out = []
    for code, where in added:
        line = next((i + 1 for i, text in enumerate(lines) if text.strip() == code), 0)
        why = ("the portable calls need the ezpz package" if code == "import ezpz" else
               "setup() picks device, backend, precision and rank layout for this machine (rt.explain() says why) "
               "and starts the process group")
        out.append(Change(line=line, before="", after=code, rule="added", why=f"{why}; placed {where}"))
    return out
