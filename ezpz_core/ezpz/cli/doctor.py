"""``ezpz doctor``: what ``setup()`` would decide here and why, and whatever is broken, with the fix."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ezpz
from ezpz.cli._util import jsonable, relevant_env, scrub, table
from ezpz.cli.plugins import plugin_rows
from ezpz.cli.versions import distribution_rows, text_lines, version_problems
from ezpz.errors import ConfigError, EzpzError
from ezpz.decisions import Explanation
from ezpz.probes.filesystems import read_mount_of
from ezpz.staging.advice import EnvironmentPlacement, staging_advice
from ezpz.staging.node_agent import read_stamp

__all__ = ["add_parser", "collect", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("doctor", help="explain what setup() would choose here; exit 1 if something is broken",
                       description=__doc__)
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    p.set_defaults(func=run)


def _problem(what: str, fix: str) -> dict[str, str]:
    return {"what": what, "fix": fix}


def _error(err: Exception) -> dict[str, Any]:
    row: dict[str, Any] = {"type": type(err).__name__, "message": str(err)}
    if isinstance(err, ConfigError):
        row.update(name=err.name, value=jsonable(err.value), expected=err.expected, fix=err.fix)
    return row


def _torch_build(plan: Any) -> dict[str, Any]:
    if plan is not None:
        return jsonable(plan.build)
    try:
        from ezpz.probes.torch_build import probe_torch_build

        return jsonable(probe_torch_build())
    except Exception as err:  # torch itself is broken: say so rather than crash
        return {"error": f"{type(err).__name__}: {err}"}


def _launcher(environ: Mapping[str, str]) -> dict[str, Any]:
    from ezpz.launch_drivers import select

    try:
        name, _driver, found, passed = select(environ)
    except EzpzError as err:
        return {"name": None, "reason": str(err), "passed_over": []}
    return {"name": name, "reason": found.reason, "passed_over": [{"name": n, "reason": r} for n, r in passed],
            "allocation": _allocation(environ)}


def _allocation(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The ranks the scheduler granted this job (what `ezpz launch` with no -n starts), or None."""
    from ezpz.launch_drivers.grant import granted

    try:
        grant = granted(environ)
    except ConfigError as err:
        return {"error": str(err)}
    return None if grant is None else jsonable(grant)


def _staged_from(prefix: str) -> str | None:
    """The original prefix from the stamp ``ezpz stage`` leaves in a copy it unpacked (hostile until checked)."""
    stamp = read_stamp(Path(prefix))
    original = stamp.get("prefix") if stamp is not None else None
    return original if isinstance(original, str) and original else None


def _python_environment(prefix: str) -> dict[str, Any]:
    """Where this interpreter's environment lives, and whether ``ezpz stage`` would help (docs/staging.md)."""
    mount = read_mount_of(prefix)
    facts = EnvironmentPlacement(prefix=prefix, mount_point=mount[0] if mount else None,
                                 fs_type=mount[1] if mount else None, staged_from=_staged_from(prefix))
    advice = staging_advice(facts)
    return {"prefix": facts.prefix, "mount_point": facts.mount_point, "fs_type": facts.fs_type,
            "staged_from": facts.staged_from, "where": advice.where, "reason": advice.reason}


def _plan_past_stuck_plugins(environ: Mapping[str, str]) -> tuple[Any, Explanation]:
    """``plan()``, again without each plugin that timed out (it is quarantined and listed as a problem)."""
    from ezpz.errors import PluginTimeoutError

    for _ in range(len(ezpz.hooks.get_plugin_host().records)):
        try:
            return ezpz.hooks.plan(environ=environ)
        except PluginTimeoutError:
            continue
    return ezpz.hooks.plan(environ=environ)


def collect(environ: Mapping[str, str]) -> tuple[dict[str, Any], Explanation | None]:
    """Everything doctor reports, as plain data (``ok`` False when something is broken), and the trace."""
    problems: list[dict[str, str]] = []
    plan = explanation = error = None
    try:
        plan, explanation = _plan_past_stuck_plugins(environ)
    except ConfigError as err:
        error = _error(err)
        problems.append(_problem(f"setup() would fail: {err.name}={err.value!r} is not valid: expected {err.expected}",
                                 err.fix))
    except EzpzError as err:
        error = _error(err)
        problems.append(_problem(f"setup() would fail: {err}", "follow the message above"))
    except Exception as err:  # a bug; still report everything else
        error = _error(err)
        problems.append(_problem(f"setup() would crash: {type(err).__name__}: {err}",
                                 "this is a bug in ezpz or a plugin; please report it with this output"))
    for decision in explanation.decisions if explanation else ():
        for alt in decision.alternatives:
            if alt.problem:  # e.g. a plugin's device type this torch does not know: setup() refuses it
                problems.append(_problem(
                    f"plugin {alt.plugin or '?'!r} offers {decision.topic} {alt.name!r}, which setup() refuses: "
                    f"{alt.reason}",
                    f"install what registers {alt.name!r} with torch and have the plugin import it in its probe, "
                    f"or set EZPZ_DISABLE_PLUGINS={alt.plugin or alt.name}",
                ))
    plugins = plugin_rows(ezpz.hooks.get_plugin_host())
    for row in plugins:
        if row["status"] == "failed":
            problems.append(_problem(
                f"plugin {row['name']!r} ({row['distribution']} {row['version']}) is quarantined: "
                f"failed at {row['stage']}: {row['error']}",
                f"upgrade or uninstall {row['distribution']}, or set EZPZ_DISABLE_PLUGINS={row['name']}",
            ))
        elif row["status"] == "refused":
            problems.append(_problem(
                f"plugin {row['name']!r} from {row['distribution']} {row['version']} was refused (never imported): "
                f"{row['reason']}",
                f"uninstall {row['distribution']}, or set EZPZ_DISABLE_PLUGINS={row['key']} to acknowledge it",
            ))
    distributions = distribution_rows(plugins)
    problems += version_problems(distributions)
    torch_build = _torch_build(plan)
    if "error" in torch_build:
        problems.append(_problem(f"torch cannot be inspected: {torch_build['error']}", "reinstall torch"))
    decisions = [jsonable(d) for d in explanation.decisions] if explanation else []
    return {
        "ok": not problems,
        "problems": problems,
        "ezpz": {"version": ezpz.__version__, "python": platform.python_version(), "executable": sys.executable,
                 "platform": platform.platform()},
        "torch": torch_build,
        "plugins": plugins,
        "distributions": distributions,
        "decisions": decisions,
        "error": error,
        "launcher": _launcher(environ),
        "python_environment": _python_environment(sys.prefix),
        "environment": relevant_env(environ),
    }, explanation


def _text(report: dict[str, Any], explanation: Explanation | None) -> str:
    info, build = report["ezpz"], report["torch"]
    lines = [f"ezpz {info['version']} doctor", f"  python  {info['python']} {info['executable']} ({info['platform']})"]
    if "error" in build:
        lines.append(f"  torch   BROKEN: {build['error']}")
    else:
        lines.append(f"  torch   {build['version']}  cuda={build['cuda']} hip={build['hip']} xpu={build['xpu_built']} "
                     f"mps={build['mps_built']} distributed={build['distributed']} "
                     f"backends={','.join(build['distributed_backends']) or 'none'}")
    lines += ["", "plugins (entry-point group 'ezpz')"]
    rows = []
    for p in report["plugins"]:
        detail = f"{p['stage']}: {p['error']}" if p["status"] == "failed" else (
            ", ".join(h.removeprefix("ezpz_") for h in p["hooks"]) if p["status"] == "loaded" else
            f"refused: {p['reason']}" if p["status"] == "refused" else p["reason"])
        rows.append([p["name"], p["status"].upper() if p["status"] == "failed" else p["status"],
                     f"{p['distribution']} {p['version']}", detail])
    lines += table(rows)
    lines += ["", "versions (core, and the core range each plugin declares)", *text_lines(report["distributions"])]
    lines += ["", "setup() here would decide"]
    if explanation is not None:  # plugin failures are listed above and under problems
        lines += ["  " + ln for ln in str(Explanation(decisions=explanation.decisions)).splitlines()]
    else:
        lines.append(f"  nothing: {report['error']['message']}")
    launcher = report["launcher"]
    lines += ["", "ezpz launch here would use"]
    lines.append(f"  {launcher['name'] or 'no launcher'}: {launcher['reason']}")
    lines += [f"    not {p['name']}: {p['reason']}" for p in launcher["passed_over"]]
    alloc = launcher.get("allocation")
    if alloc and "error" in alloc:
        lines.append(f"  allocation: unreadable: {alloc['error']}")
    elif alloc:
        lines.append(f"  allocation: {alloc['n']} task(s), at most {alloc['ppn']} per node, on {alloc['nodes']} "
                     f"node(s) ({alloc['source']})")
    placement = report["python_environment"]
    lines += ["", "python environment (ezpz stage)", f"  {placement['where']}: {placement['reason']}"]
    lines += ["", "environment (EZPZ_*, torch, launcher, scheduler and vendor variables; secrets redacted)"]
    lines += [f"  {k}={v}" for k, v in report["environment"].items()] or ["  none set"]
    lines.append("")
    if report["ok"]:
        lines.append("ok: nothing broken")
    else:
        lines.append(f"{len(report['problems'])} problem(s):")
        for prob in report["problems"]:
            lines += [f"  - {prob['what']}", f"    fix: {prob['fix']}"]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    environ = os.environ
    report, explanation = collect(environ)
    out = json.dumps(report, indent=2, default=str) if args.json else _text(report, explanation)
    print(scrub(out, environ))
    return 0 if report["ok"] else 1
