"""The plugin conformance check: :func:`check_plugin` and :func:`assert_conformant`.

A plugin passes when:

* every ``@ezpz.hookimpl`` names a hook spec and takes a subset of its
  arguments (checked by hand for clear messages, then by pluggy's own
  ``register``/``check_pending`` in a fresh manager), and no ``ezpz_*``
  function is left unmarked (pluggy would silently ignore it);
* registering it in a fresh :class:`~ezpz.plugin_host.host.PluginHost` beside the
  built-ins quarantines nothing, and planning with that host works;
* each hook, called with this machine's (or the given, recorded) inputs and
  with synthetic ones, returns its documented type or None, never raises,
  and every reason it gives (candidates, rejections, backend, precision,
  profiling, lifecycle, alternatives) is a non-empty string;
* hooks return None for a device the plugin did not offer;
* its module imports in a fresh interpreter where the vendor SDKs are
  unimportable, without even trying to import them, and pulls in nothing
  beyond the standard library, ezpz and ezpz's own dependencies.

With ``live=True`` it also drives the plugin's device, where it is present,
through a real ``setup()`` (:mod:`ezpz.testing.live`), and on 2 ranks of its
own (:mod:`ezpz.testing.live_ranks`). With ``ops=True`` it runs torch's own
test databases on the device against the CPU (:mod:`ezpz.testing.torch_db`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ezpz import hookspecs
from ezpz.facts import DeviceCandidate, TorchBuild
from ezpz.testing.exercise import Caller, exercise
from ezpz.testing.hookimpls import check_specs, find_impls, one_line, resolve
from ezpz.testing.host_checks import host_checks
from ezpz.testing.import_check import VENDOR_SDK_MODULES, findable, isolated_import_check
from ezpz.testing.report import CheckResult, ConformanceReport

__all__ = [
    "HOOK_RETURNS",
    "VENDOR_SDK_MODULES",
    "CheckResult",
    "ConformanceReport",
    "assert_conformant",
    "check_plugin",
]

HOOK_RETURNS: dict[str, type | None] = {hook: hookspecs.return_type(hook) for hook in hookspecs.RETURNS}
"""The documented non-None return type of every hook (None: ignored), from :data:`ezpz.hookspecs.RETURNS`."""


def check_plugin(
    plugin: object | str,
    *,
    sdk_modules: Sequence[str] = VENDOR_SDK_MODULES,
    build: TorchBuild | None = None,
    environ: Mapping[str, str] | None = None,
    candidates: Sequence[DeviceCandidate] = (),
    allow_imports: Iterable[str] = (),
    isolated_import: bool = True,
    live: bool = False,
    ops: bool = False,
    ops_only: Sequence[str] = (),
    ops_json: str | os.PathLike[str] | None = None,
    ops_deadline_s: float = 600.0,
) -> ConformanceReport:
    """Run every conformance check against ``plugin`` and report; never raises for a bad plugin.

    :param plugin: A plugin module or object, an entry-point name in group
        ``ezpz`` (``"cuda"``), or an import path (``"ezpz_cuda.plugin"``,
        ``"pkg.mod:obj"``).
    :param sdk_modules: Top-level vendor SDK modules made unimportable for the
        import check (default :data:`VENDOR_SDK_MODULES`).
    :param build: Torch build facts to feed the hooks (default: the installed
        torch); pass a recorded one (:func:`ezpz.testing.recorded_build`).
    :param environ: Environment to feed the hooks (default: ``os.environ``).
    :param candidates: Recorded :class:`~ezpz.facts.DeviceCandidate` records
        (with this plugin's ``facts``) to exercise the device hooks with, in
        addition to what the probe finds here; this is how a vendor suite
        checks its backend/precision/profiling hooks on a machine without the
        device.
    :param allow_imports: Extra top-level modules the plugin may import at
        module import time.
    :param isolated_import: Run the import check in a child interpreter
        (about a second); turn off only for plugins defined inside a test.
    :param live: Also run the live checks (:mod:`ezpz.testing.live`): where the
        plugin offers a device here (with ``os.environ`` plus ``environ``), a real
        ``setup()`` on it, then tensors, autocast, a training step, the grad
        scaler, ``step()``, ``synchronize()``, memory stats, ranges, the profiler,
        ``compile()`` and a checkpoint round trip, each a named result; then 2
        ranks of the kit's own (:mod:`ezpz.testing.live_ranks`, child processes
        with a real rendezvous on localhost) check the collectives, a DDP step,
        a 1-D and a 2-D device mesh, an FSDP2 step against DDP and a sharded
        checkpoint (``live ranks ...``). They run with the installed torch
        (``build`` is ignored) and change the process as ``setup()`` does.
    :param ops: Also run the float32 samples of torch's ``op_db`` and
        ``module_db`` (the first 3 of each entry) on the plugin's device, where
        it offers one here, against the CPU, in worker processes of their own
        (a crash is a verdict): ``torch ops`` passes with no crash and at least
        99% of the compared samples equal, ``torch modules`` with every sample
        equal. Every verdict goes to a JSON file. Needs ``ezpz[kit]``.
    :param ops_only: Database entries to run (``"fft.hfft"``, ``"nn.LSTM"``); all when empty.
    :param ops_json: Where the verdicts go (default ``./ezpz-jobs/check-plugin/<plugin>-torch-db.json``).
    :param ops_deadline_s: No sample starts after it; the rest are ``not run``.
    """
    try:
        t = resolve(plugin)
    except Exception as err:  # noqa: BLE001
        failed = [CheckResult("resolve", False, f"could not load {plugin!r}: {type(err).__name__}: {one_line(err)}")]
        module = plugin.partition(":")[0] if isinstance(plugin, str) else None
        if isolated_import and module and findable(module):  # say whether a vendor SDK import is the cause
            failed.append(isolated_import_check(module, sdk_modules, allow_imports))
        return ConformanceReport(plugin=str(plugin), target=str(plugin), results=tuple(failed))
    results: list[CheckResult] = [CheckResult("resolve", True, f"{t.name} -> {t.target}")]
    impls, unmarked = find_impls(t.plugin)
    results.append(CheckResult(
        "hookimpls marked", not unmarked,
        f"{', '.join(unmarked)} not decorated with @ezpz.hookimpl: pluggy ignores unmarked functions"
        if unmarked else f"{len(impls)} hook implementation(s)",
    ))
    results.append(check_specs(t, impls))
    wrappers = [i.hook for i in impls if i.opts.get("hookwrapper") or i.opts.get("wrapper")]
    results.append(CheckResult(
        "no hook wrappers", not wrappers,
        f"{', '.join(wrappers)}: ezpz calls each plugin on its own and quarantines wrappers" if wrappers else "",
    ))
    if build is None:
        from ezpz.probes.torch_build import probe_torch_build

        build = probe_torch_build()
    env = dict(os.environ if environ is None else environ)
    results += host_checks(t, build, env)
    caller = Caller([i for i in impls if i.hook in hookspecs.RETURNS])
    cross = exercise(caller, t.name, build, env, candidates)
    results += caller.results + cross
    if isolated_import:
        results.append(isolated_import_check(t.module, sdk_modules, allow_imports))
    if live:
        results += _live(t, environ)
    if ops:
        from ezpz.testing.torch_db_checks import torch_db_checks

        results += torch_db_checks(t, environ, only=ops_only, json_path=ops_json, deadline_s=ops_deadline_s)
    return ConformanceReport(plugin=t.name, target=t.target, results=tuple(results))


def _live(t: Any, environ: Mapping[str, str] | None) -> list[CheckResult]:
    """The live checks in this process, then, where ``live setup`` passed, on several ranks of the kit's own."""
    from ezpz.probes.torch_build import probe_torch_build
    from ezpz.testing.live import live_checks, offered_device
    from ezpz.testing.live_ranks import live_rank_checks

    build = probe_torch_build()
    results = live_checks(t, build, environ)
    if not any(r.name == "live setup" and r.passed for r in results):
        return results  # no device here (one skipped result), or one process cannot set it up: no ranks
    device = offered_device(t, build, {**os.environ, **(environ or {})})
    if isinstance(device, str):  # the probe changed its mind between the two calls
        return [*results, CheckResult("live ranks", False, f"the plugin's probe no longer offers a device: {device}")]
    return [*results, *live_rank_checks(t, device, environ or {})]


def assert_conformant(plugin: object | str, **kwargs: Any) -> ConformanceReport:
    """:func:`check_plugin`, raising ``AssertionError`` listing every failed check; returns the report."""
    report = check_plugin(plugin, **kwargs)
    if not report.passed:
        failed = "\n".join(f"  FAIL {r.name}: {r.detail}" for r in report.failures)
        raise AssertionError(f"plugin {report.plugin!r} ({report.target}) is not conformant:\n{failed}")
    return report
