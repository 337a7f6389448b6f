"""``python -m ezpz.cuda_compat [--project-root DIR] SCRIPT [ARGS...]``: the command line of the CUDA-compat mode.

The CLI side of :mod:`ezpz.cuda_compat`: it runs the session and prints the one-line summary on rank 0
(stderr) at exit; the library itself never prints.
"""

from __future__ import annotations

import sys

USAGE = "usage: python -m ezpz.cuda_compat [--project-root DIR] SCRIPT [ARGS...]"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = None
    if args and args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        print("Runs SCRIPT as __main__ after ezpz.hooks.setup(); CUDA calls from the user's code go to the chosen "
              "device: files under DIR, else under SCRIPT's directory, PYTHONPATH, the current directory and the "
              "project's editable installs (never the standard library, torch, ezpz or installed packages). "
              "Report: ./ezpz-jobs/cuda-compat/<run>/rank-N.json (EZPZ_CUDA_COMPAT_DIR overrides; where it is "
              "read-only: under <tmp>/ezpz-<uid>, with a warning). "
              "Docs: docs/cuda-scripts.md", file=sys.stderr)
        return 0
    if args and args[0].startswith("--project-root"):
        if "=" in args[0]:
            root = args.pop(0).split("=", 1)[1]
        elif len(args) > 1:
            args.pop(0)
            root = args.pop(0)
    if not args:
        print(USAGE, file=sys.stderr)
        return 2
    from ezpz.cuda_compat.session import Session

    session = Session(args[0], args[1:], project_root=root)
    code = 0
    try:
        session.start()
        session.run()
    except SystemExit as leaving:
        code = leaving.code if isinstance(leaving.code, int) else (0 if leaving.code is None else 1)
        if not isinstance(leaving.code, int) and leaving.code is not None:
            print(leaving.code, file=sys.stderr)
    finally:
        data = session.finish()
        if data is not None and session.rank == 0:
            from ezpz.cuda_compat.report import child_reports, summary_line

            children = child_reports(session.report_path.parent) if session.report_path is not None else []
            print(summary_line(data, session.report_path, children), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
