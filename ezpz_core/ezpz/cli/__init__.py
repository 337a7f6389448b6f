"""The ``ezpz`` command (also ``python -m ezpz``): doctor, plugins, launch, stage, submit, kill, test, new-plugin, check-plugin, port.

Only this package configures logging: ``-v`` shows ezpz's info events on
stderr, ``-vv`` debug; ``-q`` only errors. Results go to stdout, diagnostics to
stderr. Exit status: 0 fine, 1 something broken (doctor, plugins) or the
launched command's own status, 2 a usage or configuration error.
"""

from __future__ import annotations

import argparse
import logging
import platform
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import structlog

import ezpz
from ezpz.cli import check_plugin, doctor, kill, launch, new_plugin, plugins, port, smoke, stage, submit
from ezpz.cli._util import err
from ezpz.errors import ConfigError, EzpzError
from ezpz.primitives.redact import ScrubFilter

__all__ = ["build_parser", "main"]


def _version() -> str:
    try:
        torch = version("torch")
    except PackageNotFoundError:
        torch = "not installed"
    return f"ezpz {ezpz.__version__} (torch {torch}, python {platform.python_version()})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ezpz", description=__doc__.splitlines()[0],
                                     epilog="Run `ezpz COMMAND --help` for a command's options.")
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more detail on stderr (-vv for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only errors on stderr")
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    for module in (doctor, plugins, launch, stage, submit, kill, smoke, new_plugin, check_plugin, port):
        module.add_parser(sub)
    return parser


def configure_logging(verbose: int, quiet: bool) -> Any:
    """stdlib logging to stderr for ezpz's events, and a structlog logger for the CLI's own."""
    level = logging.ERROR if quiet else max(logging.DEBUG, logging.WARNING - 10 * verbose)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(ScrubFilter())  # any record, ezpz's or a library's, leaves without secrets
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    return structlog.wrap_logger(logging.getLogger("ezpz.cli"), wrapper_class=structlog.stdlib.BoundLogger,
                                 processors=[structlog.processors.KeyValueRenderer(key_order=["event"])])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ezpz`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    log = configure_logging(args.verbose, args.quiet)
    log.debug("cli", command=args.subcommand, argv=list(sys.argv[1:] if argv is None else argv))
    try:
        return int(args.func(args))
    except ConfigError as error:
        err(f"ezpz {args.subcommand}: error: {error.name}={error.value!r} is not valid: expected {error.expected}")
        err(f"ezpz {args.subcommand}: fix: {error.fix}")
        return 2
    except EzpzError as error:
        err(f"ezpz {args.subcommand}: error: {error}")
        return 2
    except KeyboardInterrupt:
        err(f"ezpz {args.subcommand}: interrupted")
        return 130
