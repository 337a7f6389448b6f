"""``ezpz check-plugin NAME``: the conformance kit from the command line; ``--ops`` adds torch's own databases.

NAME is an entry-point name in group ``ezpz`` (``example-emu``) or an import
path (``ezpz_example_emu.plugin``). The report lists every check; with
``--ops`` the float32 samples of torch's ``op_db`` and ``module_db`` run on
the plugin's device against the CPU in worker processes (a crash is a
verdict), and every verdict goes to a JSON file. Exit status: 0 conformant,
1 a check failed.
"""

from __future__ import annotations

import argparse

from ezpz.errors import ConfigError

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("check-plugin", help="run the conformance kit on a plugin (--live, --ops: torch's databases)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("plugin", help="entry-point name (example-emu) or import path (ezpz_example_emu.plugin)")
    p.add_argument("--live", action="store_true", help="also drive the device through a real setup() and 2 ranks")
    p.add_argument("--ops", action="store_true",
                   help="also run torch's op_db and module_db float32 samples on the device against the CPU "
                        "(needs ezpz[kit])")
    p.add_argument("--only", action="append", default=[], metavar="ENTRY",
                   help="with --ops: run only this database entry (fft.hfft, nn.LSTM); repeatable")
    p.add_argument("--json", metavar="PATH",
                   help="with --ops: where the verdicts go (default ./ezpz-jobs/check-plugin/NAME-torch-db.json)")
    p.add_argument("--deadline", type=float, default=600.0, metavar="S",
                   help="with --ops: no sample starts after S seconds (default 600); the rest are 'not run'")
    p.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="environment for the plugin's hooks and workers (EZPZ_EXAMPLE_EMU=1); repeatable")
    p.set_defaults(func=run)


def _environ(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(name="--env", value=pair, expected="KEY=VALUE", fix="write it as --env KEY=VALUE")
        env[key] = value
    return env


def run(args: argparse.Namespace) -> int:
    if (args.only or args.json) and not args.ops:
        raise ConfigError(name="--only/--json", value=" ".join(args.only) or args.json, expected="with --ops",
                          fix="add --ops, or drop --only and --json")
    if args.deadline <= 0:
        raise ConfigError(name="--deadline", value=str(args.deadline), expected="seconds > 0",
                          fix="pass --deadline 600")
    from ezpz.testing.conformance import check_plugin

    report = check_plugin(args.plugin, environ=_environ(args.env) or None, live=args.live, ops=args.ops,
                          ops_only=args.only, ops_json=args.json, ops_deadline_s=args.deadline)
    print(report)
    return 0 if report.passed else 1
