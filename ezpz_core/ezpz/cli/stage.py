"""``ezpz stage`` and ``ezpz launch --stage-env``: put the Python environment on every node's local storage first.

Packs the active venv or conda environment (or a given directory or tarball) into a tarball beside it, reused
while its content hash is unchanged; copies it to ``--stage-dir`` on every node of the allocation by a fan-out
over the nodes themselves (each node that holds it serves up to ``--stage-fanout`` others; failed copies are
retried from another holder); unpacks it once per node and rewrites its paths. ``ezpz launch --stage-env`` then
starts the ranks with the staged interpreter, Torch's compile caches on node-local storage. A node that fails is
left out, named, when ``--min-nodes`` allows it; else nothing starts. See docs/staging.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ezpz.cli._util import err
from ezpz.errors import ConfigError
from ezpz.staging.fanout import MAX_CAP
from ezpz.staging.stage import StageOptions, StageReport, cache_env, default_stage_dir, stage, stage_hosts, staged_argv

__all__ = ["add_parser", "add_stage_flags", "run", "stage_for_launch"]

P = "ezpz stage"


def _cap(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_CAP:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 1 to {MAX_CAP} copies per source")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds, more than 0")
    return value


def add_stage_flags(g: argparse._ActionsContainer) -> None:
    g.add_argument("--stage-dir", metavar="PATH",
                   help="node-local directory the environment is unpacked into (default /tmp/ezpz-stage-$USER)")
    g.add_argument("--stage-pack-to", metavar="PATH",
                   help="where the tarball is written (default: <env>.ezpz-stage.tar beside the environment)")
    g.add_argument("--stage-fanout", type=_cap, default=MAX_CAP, metavar="K",
                   help=f"copies one node sends at once (1 to {MAX_CAP}, default {MAX_CAP})")
    g.add_argument("--stage-retries", type=int, default=2, metavar="N",
                   help="retries of a node's failed copy, each from another holder when there is one (default 2)")
    g.add_argument("--stage-timeout", type=_seconds, default=600.0, metavar="SECONDS",
                   help="limit on packing, on each copy+unpack, and on agents starting (default 600)")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("stage", help="copy the Python environment to node-local storage on every node",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", nargs="?", metavar="SRC", help="directory or tarball (default: the active venv/conda env)")
    p.add_argument("--launcher", metavar="NAME", help="launch driver that reaches the nodes (default: as ezpz launch)")
    p.add_argument("--hostfile", metavar="PATH", help="nodes, one per line (default: the scheduler's)")
    p.add_argument("--min-nodes", type=int, metavar="K",
                   help="succeed when K or more nodes staged, naming those left out (default: every node)")
    p.add_argument("--job-dir", metavar="PATH",
                   help="shared directory for the plan and the agents' log (default ./ezpz-jobs/stage-<time>)")
    p.add_argument("--pack-only", action="store_true", help="pack (or check) the tarball and stop")
    add_stage_flags(p)
    p.set_defaults(func=run)


def _options(args: argparse.Namespace, src: str | None, work_dir: Path, environ: Mapping[str, str]) -> StageOptions:
    if args.stage_retries < 0:
        raise ConfigError(name="--stage-retries", value=args.stage_retries, expected="0 or more",
                          fix="pass --stage-retries 2 (the default)")
    if args.min_nodes is not None and args.min_nodes < 1:
        raise ConfigError(name="--min-nodes", value=args.min_nodes, expected="a whole number of nodes, 1 or more",
                          fix="pass --min-nodes K, the fewest nodes the job may run on")
    return StageOptions(src=src, stage_dir=args.stage_dir or default_stage_dir(environ), pack_to=args.stage_pack_to,
                        cap=args.stage_fanout, retries=args.stage_retries, copy_timeout_s=args.stage_timeout,
                        register_timeout_s=min(args.stage_timeout, 120.0), min_nodes=args.min_nodes,
                        launcher=args.launcher, work_dir=work_dir)


def _report(report: StageReport, prefix: str) -> None:
    for host, why in report.verdict.left_out:
        err(f"{prefix}: node {host} left out: {why}")
    err(f"{prefix}: {report.verdict.reason}")


def run(args: argparse.Namespace) -> int:
    work = Path(args.job_dir or f"ezpz-jobs/stage-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}").absolute()
    opts = _options(args, args.src, work, os.environ)
    if args.pack_only:
        from ezpz.staging.pack import ensure_tarball, what_to_stage

        src, why = what_to_stage(opts.src, os.environ, sys.prefix, sys.base_prefix)
        packed = ensure_tarball(src, Path(opts.pack_to) if opts.pack_to else None, opts.copy_timeout_s)
        err(f"{P}: {src} ({why}): {packed.reason}")
        print(packed.tarball, flush=True)
        return 0
    hosts, source = stage_hosts(args.launcher, args.hostfile, os.environ)
    report = stage(opts, hosts, source, os.environ, lambda line: err(f"{P}: {line}"))
    _report(report, P)
    if report.verdict.go_on:
        print(report.staged_env, flush=True)
    return 0 if report.verdict.go_on else 1


def stage_for_launch(args: argparse.Namespace, command: list[str],
                     environ: Mapping[str, str]) -> tuple[list[str], str | None] | int:
    """``ezpz launch --stage-env``: stage, then ``(command, hostfile)`` to launch with, or an exit status (stop)."""
    prefix = "ezpz launch: stage"
    job = Path(args.job_dir).absolute() if args.job_dir else Path(f"ezpz-jobs/stage-{os.getpid()}").absolute()
    opts = _options(args, args.stage_src, job / "stage", environ)
    hosts, source = stage_hosts(args.launcher, args.hostfile, environ)
    report = stage(opts, hosts, source, environ, lambda line: err(f"{prefix}: {line}"))
    _report(report, prefix)
    if not report.verdict.go_on:
        err(f"ezpz launch: error: staging stopped the job before any rank started: {report.verdict.reason}")
        return 1
    hostfile = args.hostfile
    if report.verdict.left_out:
        path = opts.work_dir / "hostfile-staged"
        path.write_text("".join(h + "\n" for h in report.verdict.hosts))
        hostfile = str(path)
        err(f"{prefix}: launching on the {len(report.verdict.hosts)} node(s) that staged ({path})")
    caches, why = cache_env(opts.stage_dir, environ)
    for line in why:
        err(f"{prefix}: compile cache: {line}")
    argv, reason = staged_argv(command, report.packed.prefix, report.staged_env, environ, caches)
    err(f"{prefix}: {reason}")
    return argv, hostfile
