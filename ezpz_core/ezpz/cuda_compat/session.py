"""One run of the mode: ``setup()``, the device's answers, the redirections, the script, the report, teardown.

``explain()`` says the mode is on: the mode registers itself as an in-process plugin whose
``ezpz_before_init`` answer becomes a ``lifecycle`` line of the trace. Where the device's answers say
``redirect=False`` (CUDA itself), nothing is put in place and the run is the plain one.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ezpz.cuda_compat.scope import Scope
from ezpz.primitives.markers import hookimpl

if TYPE_CHECKING:
    from ezpz.cuda_answers import CudaAnswers
    from ezpz.decisions import LifecycleAction, SetupPlan
    from ezpz.facts import LaunchEnv

__all__ = ["Session", "run_script"]

#: The redirections, one module per concern, in the order they are put in place.
INSTALLERS = ("indirect", "tensors", "facade", "accelerator", "amp", "distributed", "loading", "optimizers",
              "profiler", "unsupported", "children")


def installers_for(answers: CudaAnswers) -> tuple[str, ...]:
    """The redirections to put in place for the device's answers: none where ``torch.cuda`` drives it already."""
    return INSTALLERS if answers.redirect else ()


class _ModeRecord:
    """The in-process plugin that puts "CUDA-compat mode on" into ``explain()`` (a ``lifecycle`` decision)."""

    def __init__(self, script: Path, roots: list[str]) -> None:
        self.script, self.roots = script, roots

    @hookimpl
    def ezpz_before_init(self, plan: SetupPlan) -> LifecycleAction:
        from ezpz.decisions import LifecycleAction

        return LifecycleAction(reason=(
            f"CUDA-compat mode on (python -m ezpz.cuda_compat {self.script.name}): CUDA requests from the files "
            f"under {', '.join(self.roots)} are answered by {plan.device.torch_device} ({plan.backend.name}, "
            f"{plan.amp.dtype} policy) as its plugin says (ezpz_cuda_answers); every redirected call site goes to "
            "the mode's report"))


def torchrun_variables(launch: LaunchEnv, environ: Mapping[str, str]) -> dict[str, str]:
    """The torchrun variables a CUDA script reads (``RANK``, ``LOCAL_RANK`` ...) that its launcher did not set.

    Scripts written for CUDA are mostly written for torchrun: they decide "is this DDP?" from ``RANK`` and
    pick their GPU from ``LOCAL_RANK``. Under mpiexec, srun or PALS those are missing, so the mode sets them
    from the layout ``setup()`` read (for jobs of more than one process; a variable already set is kept).
    """
    if launch.world_size < 2:
        return {}
    wanted = {"RANK": launch.rank, "WORLD_SIZE": launch.world_size, "LOCAL_RANK": launch.local_rank,
              "LOCAL_WORLD_SIZE": launch.local_world_size, "GROUP_RANK": launch.node_rank,
              "MASTER_ADDR": launch.master_addr, "MASTER_PORT": launch.master_port}
    return {k: str(v) for k, v in wanted.items() if v is not None and k not in environ}


class Session:
    """``start()`` (setup and redirections), ``run()`` (the script as ``__main__``), ``finish()`` (report)."""

    def __init__(self, script: str, argv: list[str], *, project_root: str | None = None) -> None:
        from ezpz.errors import ConfigError

        self.script = Path(script).resolve()
        if not self.script.is_file():
            raise ConfigError(name="SCRIPT", value=script, expected="a Python file",
                              fix="python -m ezpz.cuda_compat path/to/train.py [ARGS...]")
        self.argv = list(argv)
        self.project_root = project_root
        self.roots: list[Any] = []  # roots.Root: every candidate, in or out, with why (set by start())
        self.process = "launched"  # or how a child process of the run was started (.children)
        self.report_name: str | None = None  # default rank-<N>.json
        self.compat: Any = None
        self.report_path: Path | None = None
        """Where this rank's report went (its fallback when the configured place is read-only); None: nowhere."""
        self.rank = 0
        self.globals: dict[str, Any] = {}
        self.exported: dict[str, str] = {}  # the script's module globals once it has run (runpy's result)

    def start(self) -> Any:
        import ezpz.hooks
        from ezpz.cuda_compat.answers import ask
        from ezpz.cuda_compat.context import Compat
        from ezpz.inputs.settings import SetupSettings

        import importlib

        from ezpz.cuda_compat.roots import project_roots

        host = ezpz.hooks.get_plugin_host()
        record = _ModeRecord(self.script, [])
        host.register("cuda-compat", record, target="ezpz.cuda_compat", reason="python -m ezpz.cuda_compat")
        if not self.roots:  # a child process (.children) is handed its parent's
            self.roots = project_roots(self.script, self.project_root, os.environ, os.getcwd())
        record.roots = [r.path for r in self.roots if r.included]
        rt = ezpz.hooks.setup()
        self.rank = rt.rank
        self.exported = torchrun_variables(rt.plan.launch, os.environ)
        os.environ.update(self.exported)
        answers = ask(rt)
        precision = SetupSettings.resolve(os.environ).precision
        self.compat = c = Compat(rt, answers, Scope(record.roots), precision_asked=precision)
        c.session = self
        for name in installers_for(answers):
            importlib.import_module(f"ezpz.cuda_compat.{name}").install(c)
        return rt

    def run(self) -> None:
        """The script as ``__main__``, as ``python SCRIPT ARGS`` would run it (its directory first on sys.path)."""
        sys.argv = [str(self.script), *self.argv]
        sys.path.insert(0, str(self.script.parent))
        self.globals = runpy.run_path(str(self.script), run_name="__main__")

    def finish(self) -> dict[str, Any] | None:
        """Take the redirections out, write this rank's report, tear down; the report's data (None: never started).

        The report goes where :func:`~ezpz.cuda_compat.report.write_report` could put it (``report_path``)."""
        c = self.compat
        if c is None:
            return None
        import ezpz.hooks
        from ezpz.cuda_compat.report import report_dir, write_report

        c.patches.undo()
        rt, answers = c.rt, c.answers
        step = rt.plan.step
        header = {
            "script": str(self.script), "argv": self.argv, "rank": rt.rank, "process": self.process,
            "project_roots": [{"path": r.path, "included": r.included, "why": r.why} for r in self.roots],
            "world_size": rt.world_size, "device": c.target, "backend": rt.backend, "precision": rt.amp.dtype,
            "redirecting": answers.redirect, "reason": answers.reason, "answers_from": answers.plugin,
            "device_notes": dict(answers.notes),
            "step_boundary": (f"{step.name} after every optimizer.step() (EZPZ_STEP_HOOK)"
                              if step is not None and step.mark is not None and rt.boundary.installed
                              else (step.name if step is not None else "none")),
            "unsupported": c.unsupported,
            "set_for_the_script": self.exported,
        }
        try:  # the report never changes how the script ends; write_report says where it went (or why not)
            data, self.report_path = write_report(
                report_dir(os.environ, rt.world_size) / (self.report_name or f"rank-{rt.rank}.json"),
                header, c.scope.redirected)
        finally:
            ezpz.hooks.teardown()
        return data


def run_script(script: str, argv: list[str], *, project_root: str | None = None) -> dict[str, Any] | None:
    """Run ``script`` under the mode; the report's data. The script's ``SystemExit`` passes through."""
    session = Session(script, argv, project_root=project_root)
    try:
        session.start()
        session.run()
    finally:
        data = session.finish()
    return data
