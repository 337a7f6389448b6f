"""``ezpz port PATH``: rewrite a CUDA-only script (a file or a project directory) into a portable ezpz one.

Without ``-o`` or ``--in-place`` nothing is written: the unified diff goes to
stdout and the report's summary to stderr. ``-o OUT`` writes the ported file
(or a mirror of the directory, every other file copied) plus the report as
``.json`` and ``.txt``; ``--in-place`` rewrites the sources. Exit status 0 when
everything CUDA-specific was ported, 1 when some lines need a hand (the report
lists them), 2 on a usage error or when libcst is missing.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from ezpz.cli._util import err

__all__ = ["add_parser", "run"]

REPORT = "ezpz-port-report"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("port", help="rewrite a CUDA-only script or project into a portable ezpz one (needs ezpz[port])",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", type=Path, metavar="PATH", help="a .py file or a project directory")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", type=Path, metavar="OUT",
                       help="write the ported file (or directory mirror) and its report here")
    where.add_argument("--in-place", action="store_true", help="rewrite PATH itself")
    p.add_argument("--force", action="store_true", help="let -o write over an existing OUT")
    p.add_argument("--report", type=Path, metavar="FILE",
                   help="also write the JSON report here (with -o it goes next to OUT by default)")
    p.add_argument("--json", action="store_true", help="print the JSON report on stdout instead of the diff")
    p.set_defaults(func=run)


def _usage(message: str, fix: str) -> int:
    err(f"ezpz port: error: {message}")
    err(f"ezpz port: fix: {fix}")
    return 2


def _check_paths(args: argparse.Namespace) -> int | None:
    path: Path = args.path
    if not path.exists():
        return _usage(f"PATH={str(path)!r} does not exist", "give a .py file or a project directory")
    if path.is_file() and path.suffix != ".py":
        return _usage(f"PATH={str(path)!r} is not a .py file", "give a .py file or a project directory")
    out: Path | None = args.output
    if out is None:
        return None
    if out.resolve() == path.resolve():
        return _usage(f"-o {str(out)!r} is PATH itself", "use --in-place to rewrite the sources")
    if path.is_dir() and out.resolve().is_relative_to(path.resolve()):
        return _usage(f"-o {str(out)!r} is inside PATH {str(path)!r}", "write the mirror outside the project")
    exists = out.exists() and (out.is_file() or any(out.iterdir())) if path.is_dir() else out.is_file()
    if exists and not args.force:
        return _usage(f"-o {str(out)!r} already exists", "choose a new OUT, or add --force to write over it")
    if path.is_dir() and out.exists() and out.is_file():
        return _usage(f"-o {str(out)!r} is a file but PATH is a directory", "give a directory for the mirror")
    return None


def run(args: argparse.Namespace) -> int:
    from ezpz.porting import LIBCST_FIX, libcst_missing

    if libcst_missing():
        return _usage("ezpz port needs libcst, which is not installed (it is the optional extra 'port')",
                      LIBCST_FIX)
    problem = _check_paths(args)
    if problem is not None:
        return problem
    from ezpz.porting.project import port_path, write_outputs

    ported = port_path(args.path)
    report = ported.report
    if not ported.is_dir and report.files[0].skipped:
        return _usage(f"PATH={str(args.path)!r} cannot be ported: {report.files[0].skipped.split(':')[0]}",
                      "fix the file so that Python 3 parses it (python -m py_compile PATH says where), then port it")
    out: Path | None = args.output
    report_file: Path | None = args.report
    if out is not None:
        written = write_outputs(ported, out)
        if report_file is None:
            report_file = out / f"{REPORT}.json" if ported.is_dir else written[0].with_name(
                written[0].stem + ".port-report.json")
        err(f"ezpz port: wrote {len(written)} file(s) under {out}")
    elif args.in_place:
        written = write_outputs(ported, None)
        err(f"ezpz port: rewrote {len(written)} file(s) in place")
    if report_file is not None:
        report_file.parent.mkdir(parents=True, exist_ok=True)
        report_file.write_text(report.to_json(), encoding="utf-8")
        report_file.with_suffix(".txt").write_text(report.summary(), encoding="utf-8")
        err(f"ezpz port: report in {report_file} and {report_file.with_suffix('.txt')}")
    if args.json:
        sys.stdout.write(report.to_json())
    elif out is None and not args.in_place:
        for name, (old, new) in ported.texts.items():
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                                       f"a/{name}", f"b/{name}"))
    sys.stderr.write(report.summary())
    return 1 if report.needs_hand else 0
