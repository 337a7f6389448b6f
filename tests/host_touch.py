"""Which core tests can depend on the host: recorded in the core pass, rerun alone by the stand-in pass.

scripts/standin-suite.sh reruns the core suite on a stand-in for a one-GPU host (a test-only plugin
installed into the tests' venv). All it changes is what ezpz's plugin discovery finds, so a test can only
see it by using a plugin host (discovering, listing, or calling a hook: the stand-in's hooks answer
there), by listing the installed distributions, or through a process it starts (any child may import
ezpz). The rule (docs/ci.md): a test that PASSED in the core pass and did none of these in its setup, call
or teardown is not rerun; every other test is (one that touched the host, failed, skipped, or is not in
the record at all, such as a test new since the record).

``EZPZ_TEST_HOST_RECORD=DIR`` (the core pass): each pytest process writes ``DIR/host-touch-<pid>.tsv``,
one line per test: its node id, ``-`` or the first way it touched the host, and its seconds.
``EZPZ_TEST_HOST_ONLY=DIR`` (the stand-in pass): the tests the record shows as passed and untouched are
deselected (pytest counts them as "deselected"); an empty or missing record deselects nothing.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

RECORD_VAR, ONLY_VAR = "EZPZ_TEST_HOST_RECORD", "EZPZ_TEST_HOST_ONLY"
UNTOUCHED = "-"


def register(config: pytest.Config) -> None:
    """Called from tests/conftest.py: record, or select from a record, as the environment asks."""
    if os.environ.get(RECORD_VAR):
        config.pluginmanager.register(Recorder(Path(os.environ[RECORD_VAR])), "ezpz-host-touch-recorder")
    if os.environ.get(ONLY_VAR):
        config.pluginmanager.register(Selector(Path(os.environ[ONLY_VAR])), "ezpz-host-touch-selector")


def test_key(nodeid: str) -> str:
    """``nodeid`` without the ``@<group>`` pytest-xdist appends under ``--dist loadgroup`` (a test's name and its
    parameters' ids, in brackets, never end in one), so a record made with workers selects a run without them."""
    return re.sub(r"@[\w.-]+$", "", nodeid)


def read_record(directory: Path) -> dict[str, str]:
    """Node id -> ``-`` (passed, touched nothing) or what it did, from every record file in ``directory``."""
    seen: dict[str, str] = {}
    for file in sorted(directory.glob("host-touch-*.tsv")):
        for line in file.read_text().splitlines():
            nodeid, _, rest = line.partition("\t")
            how = rest.split("\t")[0]
            if nodeid and how:
                seen[nodeid] = how if seen.get(nodeid, UNTOUCHED) == UNTOUCHED else seen[nodeid]
    return seen


class Selector:
    """The stand-in pass: deselect the tests the record shows passed without touching the host."""

    def __init__(self, directory: Path) -> None:
        self.record = read_record(directory) if directory.is_dir() else {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        os.environ.pop(ONLY_VAR, None)  # for this run only: never a pytest run a test starts
        keep = [item for item in items if self.record.get(test_key(item.nodeid)) != UNTOUCHED]
        dropped = [item for item in items if self.record.get(test_key(item.nodeid)) == UNTOUCHED]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


class Recorder:
    """The core pass: note, per test, the first way it touched the host (or that it passed untouched)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.file = directory / f"host-touch-{os.getpid()}.tsv"
        self.current: str | None = None
        self.how: dict[str, str] = {}
        self.passed: dict[str, bool] = {}
        self.seconds: dict[str, float] = {}
        self._undo: list[Callable[[], None]] = []

    def touched(self, how: str) -> None:
        if self.current is not None:
            self.how.setdefault(self.current, how)

    # -- pytest hooks ----------------------------------------------------------------------------------------
    def pytest_sessionstart(self) -> None:
        self._watch()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        os.environ.pop(RECORD_VAR, None)  # for this run only: never a pytest run a test starts
        self.current = test_key(item.nodeid)
        self.passed[self.current] = True
        try:
            return (yield)
        finally:
            self.current = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        key = test_key(report.nodeid)
        self.seconds[key] = self.seconds.get(key, 0.0) + report.duration
        if not report.passed or (report.when == "call" and hasattr(report, "wasxfail")):
            self.passed[key] = False

    def pytest_sessionfinish(self) -> None:
        for undo in reversed(self._undo):
            undo()
        lines = []
        for nodeid, passed in self.passed.items():
            how = self.how.get(nodeid) or (UNTOUCHED if passed else "did not pass")
            lines.append(f"{nodeid}\t{how}\t{self.seconds.get(nodeid, 0.0):.2f}\n")
        self.file.write_text("".join(lines))

    # -- the ways a test can touch the host ------------------------------------------------------------------
    def _patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        raw = vars(owner)[name]  # a classmethod stays one when wrapped, and is put back as it was
        real = raw.__func__ if isinstance(raw, classmethod) else raw
        setattr(owner, name, classmethod(make(real)) if isinstance(raw, classmethod) else make(real))
        self._undo.append(lambda: setattr(owner, name, raw))

    def _calls(self, owner: Any, name: str, how: str | Callable[..., str | None]) -> None:
        def make(real: Any) -> Any:
            @functools.wraps(real)
            def noted(*args: Any, **kwargs: Any) -> Any:
                said = how(*args, **kwargs) if callable(how) else how
                if said is not None:
                    self.touched(said)
                return real(*args, **kwargs)
            return noted
        if name in vars(owner):
            self._patch(owner, name, make)

    def _watch(self) -> None:
        import _posixsubprocess
        import subprocess

        import pluggy
        from ezpz.plugin_host.host import PluginHost

        # Any process: a child may import ezpz and find the stand-in (subprocess, multiprocessing, os.*).
        self._calls(subprocess.Popen, "_execute_child", _child)
        self._calls(_posixsubprocess, "fork_exec", "started a process")  # multiprocessing's spawn and forkserver
        for name in ("posix_spawn", "posix_spawnp", "fork", "forkpty", "system"):
            self._calls(os, name, f"started a process (os.{name})")
        # Any use of an ezpz plugin host, in-process: discovery, its records, its plugin manager.
        real_getattribute = PluginHost.__getattribute__

        def host_getattribute(host: Any, attr: str) -> Any:
            self.touched("used a plugin host")
            return real_getattribute(host, attr)

        PluginHost.__getattribute__ = host_getattribute  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(PluginHost, "__getattribute__", real_getattribute))
        # A hook of an ezpz plugin manager called (or its implementations listed) through a reference kept earlier.
        caller = pluggy.HookCaller

        def ezpz_manager(hook: Any, *args: Any, **kwargs: Any) -> str | None:
            manager = getattr(getattr(hook, "_hookexec", None), "__self__", None)
            return "called a plugin hook" if getattr(manager, "project_name", None) == "ezpz" else None

        for name in ("__call__", "call_historic", "call_extra", "get_hookimpls"):
            self._calls(caller, name, ezpz_manager)
        # Listing every installed distribution (entry points, pluggy's setuptools loading, packages_distributions).
        self._calls(importlib.metadata.Distribution, "discover",
                    lambda cls, **k: "listed the installed distributions" if k.get("name") is None
                    and getattr(k.get("context"), "name", None) is None else None)


def _child(popen: Any, args: Any, executable: Any, preexec_fn: Any, close_fds: Any, pass_fds: Any, cwd: Any,
           env: Any, *rest: Any, **kw: Any) -> str | None:
    """How a child of ``subprocess`` can see the stand-in, or None where it cannot: a program of another Python
    environment (its own venv: the stand-in is installed in this one only), this one kept off its ``PYTHONPATH``."""
    words = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    shell = bool(rest[2]) if len(rest) > 2 else True  # startupinfo, creationflags, shell, ...
    program = os.fsdecode(executable if executable is not None else words[0]) if words and not shell else ""
    if program and os.sep not in program:
        program = shutil.which(program, path=(env if env is not None else os.environ).get("PATH")) or program
    home = os.path.dirname(os.path.dirname(os.path.abspath(program))) if program else ""
    elsewhere = (bool(home) and os.path.isfile(os.path.join(home, "pyvenv.cfg"))
                 and os.path.realpath(home) != os.path.realpath(sys.prefix))
    ours = os.path.realpath(sys.prefix)
    python_path = (env if env is not None else os.environ).get("PYTHONPATH", "")
    if elsewhere and not any(os.path.realpath(p).startswith(ours) for p in python_path.split(os.pathsep) if p):
        return None
    return f"started {_program(args)}"


def _program(args: Any) -> str:
    """``python -m pip``, ``torchrun``, ``sh -c``: what a child runs, for the record."""
    words = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    words = [os.fsdecode(w) for w in words]
    if not words:
        return "a process"
    head = [os.path.basename(words[0])]
    if len(words) > 1 and words[1] in ("-m", "-c"):
        head += words[1:3] if words[1] == "-m" else ["-c"]
    elif len(words) > 1:
        head.append(os.path.basename(words[1]))
    return " ".join(head)[:80]
