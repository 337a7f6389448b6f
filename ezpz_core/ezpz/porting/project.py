"""Port a file or a project directory: agree on one ``setup()`` call, port every module, keep the rest.

Two passes: :func:`ezpz.porting.source.scan` every module for what it asks
explicitly (a precision its autocast names, a backend other than NCCL), then
:func:`ezpz.porting.source.port_source` each with the ``setup()`` arguments the
whole project agreed on, so that every module's ``setup()`` returns the same
runtime. Nothing is written here: :func:`port_path` returns the new texts and
the report; :func:`write_outputs` writes them where the user said.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import attrs
import libcst as cst

from ezpz.porting.report import FileReport, PortReport
from ezpz.porting.rewriter import SetupArgs
from ezpz.porting.source import Scan, port_source, scan, setup_arguments

__all__ = ["Ported", "port_path", "project_files", "python_files", "write_outputs"]

_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})


@attrs.frozen
class Ported:
    """The result of a port: the root it read, each module's old and new text (by relative path), the report."""

    root: Path
    is_dir: bool
    texts: dict[str, tuple[str, str]]
    report: PortReport


def project_files(root: Path) -> Iterator[Path]:
    """Every file of the project under ``root``, skipping hidden folders, caches, builds and virtual environments."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS
                         and not (Path(folder) / d / "pyvenv.cfg").exists())
        for name in sorted(files):
            yield Path(folder) / name


def python_files(root: Path) -> Iterator[Path]:
    """The project's modules: the ``*.py`` files of :func:`project_files`."""
    return (f for f in project_files(root) if f.suffix == ".py")


def _decide(scans: dict[str, Scan]) -> tuple[SetupArgs, list[str]]:
    """One precision and one backend for the project, from what its modules name; conflicts are left to ezpz."""
    why: list[str] = []
    chosen: dict[str, str | None] = {}
    for kind in ("precision", "backend"):
        asked: dict[str, list[str]] = {}
        for path, s in scans.items():
            for value, lines in getattr(s.requests, kind).items():
                asked.setdefault(value, []).extend(f"{path}:{line}" for line in lines)
        if len(asked) == 1:
            value, where = next(iter(asked.items()))
            chosen[kind] = value
            source = "an autocast dtype" if kind == "precision" else "init_process_group's backend"
            why.append(f"{kind}={value!r}: {source} the script names explicitly ({', '.join(where)}), kept")
        elif asked:
            chosen[kind] = None
            listed = "; ".join(f"{v!r} at {', '.join(w)}" for v, w in sorted(asked.items()))
            why.append(f"{kind}: the script names several ({listed}); setup() is left to choose, and each call keeps "
                       "its own argument")
    return SetupArgs(precision=chosen.get("precision"), backend=chosen.get("backend")), why


def port_path(path: Path) -> Ported:
    """Port ``path`` (a ``.py`` file or a directory of them) in memory. Unparsable modules are skipped, reported."""
    path = Path(path)
    is_dir = path.is_dir()
    files = list(python_files(path)) if is_dir else [path]
    rel = {f: (f.relative_to(path).as_posix() if is_dir else f.name) for f in files}
    texts: dict[str, str] = {}
    scans: dict[str, Scan] = {}
    skipped: dict[str, str] = {}
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            texts[rel[f]] = ""
            skipped[rel[f]] = f"not UTF-8 ({error.reason} at byte {error.start}): copied unchanged"
            continue
        texts[rel[f]] = text
        try:
            scans[rel[f]] = scan(text, rel[f])
        except cst.ParserSyntaxError as error:
            skipped[rel[f]] = f"libcst cannot parse it ({str(error).splitlines()[0]}): copied unchanged"
    setup, why = _decide(scans)
    report = PortReport(source=str(path), setup_call=f"ezpz.hooks.setup({setup_arguments(setup)})", setup_why=why)
    out: dict[str, tuple[str, str]] = {}
    cuda_project = any(s.cuda for s in scans.values())  # a script already written for ezpz is left as it is
    for name, text in texts.items():
        if name in skipped:
            report.files.append(FileReport(path=name, status="skipped", skipped=skipped[name]))
            continue  # not in the texts: written nowhere, copied as it is into a mirror
        new, file_report = port_source(text, name, setup, opportunistic=cuda_project and scans[name].needs_rt,
                                       drop_device_ids=cuda_project)
        report.files.append(file_report)
        out[name] = (text, new)
    return Ported(root=path, is_dir=is_dir, texts=out, report=report)


def write_outputs(ported: Ported, out: Path | None) -> list[Path]:
    """Write the ported modules to ``out`` (a file, or a mirror of the directory), or over the sources when None.

    A directory mirror gets every other file of the project copied as it is (a skipped module too); hidden
    folders, caches, builds and virtual environments are left out. Returns the ported files written.
    """
    written: list[Path] = []
    if not ported.is_dir:
        ((name, (_old, new)),) = ported.texts.items()
        target = ported.root if out is None else (out / name if out.is_dir() else out)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new, encoding="utf-8")
        return [target]
    root = ported.root
    if out is not None:  # the mirror: the project's other files as they are (hidden folders, venvs and caches not)
        for source in project_files(root):
            relative = source.relative_to(root).as_posix()
            if relative in ported.texts:
                continue
            target = out / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for name, (old, new) in ported.texts.items():
        target = (out if out is not None else root) / name
        if out is None and new == old:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new, encoding="utf-8")
        written.append(target)
    return written
