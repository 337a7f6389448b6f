"""Host-level checks: the plugin registers beside the built-ins without quarantine, and planning with it works."""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.facts import TorchBuild
from ezpz.testing.hookimpls import Target, one_line
from ezpz.testing.report import CheckResult

__all__ = ["host_checks"]


def host_checks(t: Target, build: TorchBuild, environ: Mapping[str, str]) -> list[CheckResult]:
    """Register the plugin in a fresh host beside the built-ins, then plan with it: no quarantine either time."""
    from ezpz.testing.hosts import make_host, make_plan

    host = make_host(builtins=True)
    if not host.pm.is_registered(t.plugin):
        host.register(t.name, t.plugin, target=t.target)
        host.validate()
    failed = [f"{r.name} at {r.stage}: {r.error}" for r in host.failures]
    results = [CheckResult("registers cleanly", not failed,
                           "; ".join(failed) if failed else f"registered beside {', '.join(sorted(host.loaded()))}")]
    if failed:
        return results
    try:
        plan = make_plan(host, environ=environ, build=build)
    except Exception as err:  # noqa: BLE001
        quarantined = "".join(f"; quarantined {r.name} at {r.stage}: {r.error}" for r in host.failures)
        results.append(CheckResult("plan with the built-ins", False,
                                   f"raised {type(err).__name__}: {one_line(err)}{quarantined}"))
        return results
    failed = [f"{r.name} at {r.stage}: {r.error}" for r in host.failures]
    results.append(CheckResult(
        "plan with the built-ins", not failed,
        "quarantined: " + "; ".join(failed) if failed
        else f"device {plan.device.torch_device}, backend {plan.backend.name}, precision {plan.amp.dtype}",
    ))
    return results
