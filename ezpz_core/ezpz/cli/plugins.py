"""``ezpz plugins``: every plugin with its distribution, version, hooks and status, and the launch drivers."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ezpz.cli._util import table
from ezpz.plugin_host.host import PluginHost
from ezpz.primitives.redact import scrub

__all__ = ["add_parser", "driver_rows", "plugin_rows", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("plugins", help="list plugins and launch drivers with version, hooks and status",
                       description=__doc__)
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    p.set_defaults(func=run)


def plugin_rows(host: PluginHost) -> list[dict[str, Any]]:
    """One row per discovered plugin (entry-point group ``ezpz``)."""
    rows = []
    for key, rec in sorted(host.records.items(), key=lambda kv: (not kv[1].builtin, kv[1].name, kv[0])):
        dist, version = rec.distribution
        rows.append({"name": rec.name, "key": key, "target": rec.target, "distribution": dist, "version": version,
                     "status": rec.status, "builtin": rec.builtin, "hooks": list(rec.hooks), "reason": rec.reason,
                     "error": rec.error, "stage": rec.stage})
    return rows


def driver_rows() -> list[dict[str, Any]]:
    """One row per launch driver entry point (group ``ezpz.launchers``); none is imported."""
    from ezpz.launch_drivers.registry import scan_drivers

    rows = []
    for f in sorted(scan_drivers(), key=lambda f: (f.name, f.refused is not None)):
        row = {"name": f.name, "target": f.target, "distribution": f.distribution, "version": f.version}
        rows.append({**row, "refused": f.refused} if f.refused else row)
    return rows


def _text(plugins: list[dict[str, Any]], drivers: list[dict[str, Any]]) -> str:
    rows = []
    for p in plugins:
        what = ", ".join(h.removeprefix("ezpz_") for h in p["hooks"]) or "-"
        if p["status"] == "failed":
            what = f"{p['stage']}: {p['error']}"
        elif p["status"] == "refused":
            what = f"refused: {p['reason']} (never imported)"
        elif p["status"] != "loaded":
            what = p["reason"]
        rows.append([p["name"], p["status"], p["distribution"], p["version"], what])
    lines = ["plugins (entry-point group 'ezpz')",
             *table(rows, ["NAME", "STATUS", "DISTRIBUTION", "VERSION", "HOOKS / WHY"])]
    lines += ["", "launch drivers (entry-point group 'ezpz.launchers', for ezpz launch --launcher NAME)",
              *table([[d["name"], d["distribution"], d["version"],
                       d["target"] + (f" (refused: {d['refused']}, never imported)" if d.get("refused") else "")]
                      for d in drivers],
                     ["NAME", "DISTRIBUTION", "VERSION", "TARGET"])]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import ezpz

    plugins, drivers = plugin_rows(ezpz.hooks.get_plugin_host()), driver_rows()
    out = json.dumps({"plugins": plugins, "launchers": drivers}, indent=2) if args.json else _text(plugins, drivers)
    print(scrub(out))
    return 1 if any(p["status"] in ("failed", "refused") for p in plugins) else 0
