"""The conformance kit's live mode on emu: every runtime check through a real setup(), on one rank and on 2 ranks of the
kit's own; a plugin that cannot drive it fails, and so does a backend without reduce_scatter_tensor, naming it."""

from __future__ import annotations

import json
import textwrap

from emu_testlib import PY, child_env, run
from ezpz.testing.live import LIVE_CHECKS
from ezpz.testing.live_ranks import RANK_CHECK_NAMES
from ezpz.testing.pytest_plugin import ezpz_live  # noqa: F401  (fixture)


def test_every_live_check_passes_on_emu(ezpz_live):
    report = ezpz_live("example-emu", environ={"EZPZ_DEVICE": "emu"})
    live = {r.name: r for r in report.results if r.name.startswith("live")}
    assert list(live) == [*LIVE_CHECKS, *RANK_CHECK_NAMES], str(report)
    assert all(r.passed and not r.skipped for r in live.values()), str(report)
    assert live["live setup"].detail == "device emu, backend emuccl, precision bf16, plugin example-emu"
    assert live["live autocast"].detail == "a Linear under rt.autocast() gives torch.bfloat16"
    assert "an enabled one skips an inf step and backs off" in live["live grad scaler"].detail
    assert live["live compile"].detail.startswith("aot_eager")
    assert "emu_allocated_bytes_total" in live["live memory_stats"].detail
    assert live["live ranks setup"].detail.startswith("2 ranks: device emu, backend emuccl"), str(report)
    assert live["live ranks FSDP2 step"].detail.startswith("fully_shard over 2 ranks"), str(report)


def test_without_being_asked_for_the_live_checks_skip():
    # in a child: this process may hold a runtime's leftovers from other tests, and needs none
    code = "from ezpz.testing import check_plugin; r = check_plugin('example-emu', environ={}, live=True); " \
           "l = r['live']; print(l.skipped, l.passed, '|', l.detail)"
    proc = run([PY, "-c", code], env=child_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("True True | skipped: example-emu offers no device here"), proc.stdout


CLAIMS_EMU = textwrap.dedent('''
    import json
    from ezpz import hookimpl
    from ezpz.facts import ProbeReport
    from ezpz.testing import check_plugin
    from ezpz_example_emu import core, plugin


    @hookimpl
    def probe_without_registering(build, environ):
        requested_by = core.read_request(environ)
        return ProbeReport.found(core.emu_candidate(core.read_torch(requested_by))) if requested_by else None


    class ClaimsEmu:
        """Offers emu with the example's own answers, but never registers the device with torch."""

        ezpz_probe_devices = staticmethod(probe_without_registering)
        ezpz_select_backend = staticmethod(plugin.ezpz_select_backend)
        ezpz_amp_policy = staticmethod(plugin.ezpz_amp_policy)


    report = check_plugin(ClaimsEmu(), environ={"EZPZ_DEVICE": "emu"}, live=True, isolated_import=False)
    print(json.dumps({r.name: [r.passed, r.detail] for r in report.results}))
''')


def test_a_plugin_that_claims_emu_but_cannot_drive_it_fails_naming_the_check():
    proc = run([PY, "-c", CLAIMS_EMU], env=child_env())
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    passed, detail = results["live setup"]
    assert not passed and "setup(device='emu') raised" in detail, results
    assert not results["device type known to torch (emu)"][0]  # the recorded-facts checks say why, too
    assert "emu" in detail and not any(k.startswith("live ") and k != "live setup" for k in results)


def test_a_backend_without_reduce_scatter_fails_the_kit_naming_that_collective():
    """emuccl rebuilt without its reduce-scatter methods (emu_without_reduce_scatter.py): every other collective
    passes on the kit's 2 ranks; reduce_scatter_tensor fails with torch's error, and FSDP2, which needs it, too."""
    import ezpz
    from ezpz.testing import check_plugin

    try:
        report = check_plugin("emu_without_reduce_scatter", environ={"EZPZ_DEVICE": "emu"}, live=True,
                              isolated_import=False)
    finally:
        ezpz.hooks.teardown()
    assert report["live setup"].passed and report["live ranks setup"].passed, str(report)
    assert "backend emunors" in report["live ranks setup"].detail, str(report)
    missing = report["live ranks reduce_scatter_tensor"]
    assert not missing.passed and not missing.skipped, str(report)
    assert ("torch.distributed.reduce_scatter_tensor on emu:0 tensors failed with backend emunors: RuntimeError: "
            in missing.detail), missing.detail
    for name in ("all_reduce", "all_gather_into_tensor", "broadcast", "all_to_all_single", "send/recv", "barrier",
                 "DDP step", "1-D mesh", "2-D mesh"):
        assert report[f"live ranks {name}"].passed, str(report)
    assert not report["live ranks FSDP2 step"].passed, str(report)
    assert not report.passed and "FAIL live ranks reduce_scatter_tensor" in str(report)
