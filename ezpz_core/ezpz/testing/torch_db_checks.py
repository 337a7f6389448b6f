"""``check_plugin(..., ops=True)``: the torch-database verdicts as conformance checks.

``torch ops`` passes when no sample crashed and at least :data:`OPS_EQUAL`
of the compared op samples equal the CPU's; ``torch modules`` when every
compared module sample does. A plugin that offers no device here gets one
skipped ``torch databases`` result, as the live checks do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ezpz.testing.hookimpls import Target
from ezpz.testing.report import CheckResult

__all__ = ["OPS_EQUAL", "torch_db_checks"]

#: The share of compared ``op_db`` samples that must equal the CPU's.
OPS_EQUAL = 0.99
_SHOWN = 8  # entries named in a failing check's detail; the JSON file has them all


def torch_db_checks(t: Target, environ: Mapping[str, str] | None, *, only: Sequence[str] = (),
                    json_path: str | os.PathLike[str] | None = None, deadline_s: float = 600.0,
                    workers: int = 2) -> list[CheckResult]:
    from ezpz.probes.torch_build import probe_torch_build
    from ezpz.testing.live import offered_device
    from ezpz.testing.torch_db import run_torch_db

    device = offered_device(t, probe_torch_build(), {**os.environ, **(environ or {})})
    if isinstance(device, str):
        return [CheckResult("torch databases", True, f"skipped: {device}", skipped=True)]
    report = run_torch_db(t.name, t.target, environ=environ, only=only, json_path=json_path, deadline_s=deadline_s,
                          workers=workers)
    if report.error:
        return [CheckResult("torch databases", False, report.summary)]
    results = []
    for kind, name in (("op", "torch ops"), ("module", "torch modules")):
        counts = report.counts(kind)
        if not counts:
            continue
        enough = report.equal_fraction(kind) >= (OPS_EQUAL if kind == "op" else 1.0)
        passed = enough and not counts["crashed"] and not counts["not run"]
        bad = report.not_equal(kind)
        named = f"; not equal: {', '.join(bad[:_SHOWN])}{' ...' if len(bad) > _SHOWN else ''}" if bad else ""
        results.append(CheckResult(name, passed, f"{report.part(kind)}{named}"))
    return [CheckResult("torch databases", all(r.passed for r in results), report.summary), *results]
