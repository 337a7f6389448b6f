"""The conformance kit's live mode: a real setup() on the plugin's device, each check named (ezpz.testing.live), then
2 ranks of the kit's own on it (ezpz.testing.live_ranks): real child processes, a real rendezvous on localhost."""

from __future__ import annotations

import pytest

import ezpz
from ezpz import hookimpl
from ezpz.decisions import BackendChoice, PrecisionOption
from ezpz.facts import DeviceCandidate, ProbeReport
from ezpz.policies import choose_precision
from ezpz.testing import assert_conformant, check_plugin, make_host
from ezpz.testing.live import LIVE_CHECKS
from ezpz.testing.live_ranks import RANK_CHECK_NAMES, live_rank_checks, loadable_name, run_ranks
from ezpz.testing.hookimpls import resolve
from ezpz.testing.pytest_plugin import ezpz_live  # noqa: F401  (fixture)


class _Facts:
    pass


class ClaimsMeta:
    """Offers torch's ``meta`` device as if it were an accelerator: tensors go there, values never come back."""

    @hookimpl
    def ezpz_probe_devices(self, build, environ):
        return ProbeReport.found(DeviceCandidate(device_type="meta", vendor="acme", reason="claims a device",
                                                 priority=-5, shared=True, facts=_Facts()))

    @hookimpl
    def ezpz_select_backend(self, device, build, launch, requested):
        return BackendChoice(name="gloo", reason="acme talks gloo") if isinstance(device.facts, _Facts) else None

    @hookimpl
    def ezpz_amp_policy(self, device, requested):
        if not isinstance(device.facts, _Facts):
            return None
        return choose_precision([PrecisionOption(dtype="bf16", supported=False, reason="no")], requested=requested,
                                device="meta")


class ClaimsNothing:
    @hookimpl
    def ezpz_probe_devices(self, build, environ):
        return ProbeReport.rejected("fakegpu", "acme", "no fakegpu on this host")


def test_the_builtin_cpu_plugin_passes_every_live_check_on_one_rank_and_on_two(ezpz_live):
    report = ezpz_live("cpu", isolated_import=False)
    live = [r for r in report.results if r.name.startswith("live")]
    assert [r.name for r in live] == [*LIVE_CHECKS, *RANK_CHECK_NAMES], str(report)
    assert all(r.passed and not r.skipped for r in live), str(report)
    assert report["live setup"].detail.startswith("device cpu, backend gloo") and "plugin cpu" in report["live setup"].detail
    assert "the range and" in report["live profiler"].detail
    assert report["live ranks setup"].detail.startswith("2 ranks: device cpu, backend gloo"), str(report)
    assert "rendezvous 127.0.0.1:" in report["live ranks setup"].detail
    assert "losses equal DDP's" in report["live ranks FSDP2 step"].detail
    assert ezpz.hooks.get_runtime() is None  # torn down


def test_a_plugin_claiming_a_device_it_cannot_drive_fails_naming_the_check():
    report = check_plugin(ClaimsMeta(), environ={}, isolated_import=False, live=True)
    assert report["live setup"].passed, str(report)  # setup() itself accepts a torch device type
    result = report["live tensor round trip"]
    assert not result.passed and "meta" in result.detail, str(report)
    assert not report.passed and report["live teardown"].passed
    with pytest.raises(AssertionError, match="FAIL live tensor round trip"):
        assert_conformant(ClaimsMeta(), environ={}, isolated_import=False, live=True)
    assert ezpz.hooks.get_runtime() is None


def test_a_plugin_object_no_new_process_can_load_skips_the_ranks_saying_why():
    report = check_plugin(ClaimsMeta(), environ={}, isolated_import=False, live=True)
    ranks = report["live ranks"]
    assert ranks.skipped and ranks.passed and "pass its entry-point name or import path" in ranks.detail, str(report)
    assert not any(r.name.startswith("live ranks ") for r in report.results)


def test_a_plugin_is_loaded_in_the_ranks_by_the_name_that_loads_it_here():
    assert loadable_name(resolve("cpu")) == "cpu"  # an entry point
    assert loadable_name(resolve("ezpz.builtin.cpu")) == "ezpz.builtin.cpu"  # an import path
    assert loadable_name(resolve(ClaimsMeta())) is None  # an instance: no name loads it
    assert loadable_name(resolve(ClaimsMeta)) == f"{__name__}:ClaimsMeta"  # a class in an importable module


@pytest.mark.parametrize(("device", "why"), [
    (DeviceCandidate(device_type="cpu", vendor="acme", reason="one", count=1, shared=False),
     "2 ranks need 2 cpu devices (or a shared one); cpu offers 1 here"),
    (DeviceCandidate(device_type="meta", vendor="acme", reason="lazy", count=8),  # as torch_xla's xla
     "torch has no device module for 'meta'"),
])
def test_where_the_ranks_cannot_apply_they_are_one_skipped_result_saying_why(device, why):
    (result,) = live_rank_checks(resolve("cpu"), device, {})  # decided before any process starts
    assert result.name == "live ranks" and result.skipped and result.passed and why in result.detail, result


def test_ranks_that_cannot_start_fail_live_ranks_setup_with_their_output():
    (result,) = run_ranks("no_such_plugin_module_ezpz", "cpu", {})
    assert result.name == "live ranks setup" and not result.passed, result
    assert "rank 0: could not load plugin 'no_such_plugin_module_ezpz': ModuleNotFoundError" in result.detail, result


def test_ranks_past_the_deadline_are_stopped_and_named():
    (result,) = run_ranks("cpu", "cpu", {}, timeout_s=0.5)  # not even torch imports in half a second
    assert result.name == "live ranks setup" and not result.passed, result
    for rank in (0, 1):  # both, whichever of them had reached setup when the deadline came
        assert f"rank {rank} stopped in 'live ranks setup': the job's deadline (0.5 s) passed" in result.detail, result


def test_no_device_here_is_one_skipped_live_result():
    report = check_plugin(ClaimsNothing(), environ={}, isolated_import=False, live=True)
    (live,) = [r for r in report.results if r.name.startswith("live")]
    assert live.skipped and live.passed and "no fakegpu on this host" in live.detail


def test_live_mode_is_off_unless_asked_for():
    report = check_plugin(ClaimsMeta(), environ={}, isolated_import=False)
    assert not any(r.name.startswith("live") for r in report.results) and report.passed, str(report)


def test_using_plugin_host_swaps_the_host_for_setup_and_restores_it():
    before = ezpz.hooks.get_plugin_host()
    host = make_host(builtins=True)
    with ezpz.hooks.using_plugin_host(host):
        assert ezpz.hooks.get_plugin_host() is host
        rt = ezpz.hooks.setup()
        with pytest.raises(ezpz.errors.SetupError, match="teardown"):
            with ezpz.hooks.using_plugin_host(host):
                pass
        ezpz.hooks.teardown()
        assert rt.device_type == "cpu"
    assert ezpz.hooks.get_plugin_host() is before
