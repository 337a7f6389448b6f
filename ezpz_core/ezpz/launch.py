"""``ezpz.launch``: the original ezpz's launcher module; ``python -m ezpz.launch ARGS`` runs ``ezpz launch ARGS``.

In the original ezpz, ``python -m ezpz.launch [flags] [--] COMMAND`` started
COMMAND on the job's nodes with the launcher that fits (``mpiexec`` under PBS,
``srun`` under Slurm, ``mpirun`` elsewhere). Here the ``ezpz launch`` command
does that, with the flags ``docs/migrating.md`` lists, so this module runs it.
The original's Python helpers (``launch()``, ``build_executable()``,
``run_command()``, ...) are not included: asking for one raises an
``AttributeError`` that says what to use instead.

Which launcher started *this* process is launch detection, :mod:`ezpz.launch_env`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "run"]

_INSTEAD = ("run the `ezpz launch` command (or ezpz.launch.run(['-n', '4', '--', 'python', 'train.py'])); "
            "ezpz.pbs.build_launch_cmd() gives the launcher prefix")


def run(argv: Sequence[str] | None = None) -> int:
    """``ezpz launch ARGV``, as the original's ``ezpz.launch.run(argv)``; the exit status."""
    from ezpz.cli import main as cli_main

    return cli_main(["launch", *(argv or [])])


def main() -> int:
    """``python -m ezpz.launch ARGS``: ``ezpz launch ARGS``."""
    return run(sys.argv[1:])


def __getattr__(name: str) -> Any:
    """The original's other names in this module raise an AttributeError that says what to use instead."""
    if name.startswith("_"):
        raise AttributeError(name)
    from ezpz.original.migration import MIGRATION_PAGE

    raise AttributeError(f"ezpz.launch.{name}: the original ezpz's launcher helpers are not included in this "
                         f"package. Instead: {_INSTEAD}. See {MIGRATION_PAGE}")


if __name__ == "__main__":
    raise SystemExit(main())
