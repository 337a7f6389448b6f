"""The plugin conformance kit (ezpz.testing): passes good plugins, fails bad ones with specific messages."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ezpz import hookspecs
from ezpz.facts import TorchBuild
from ezpz.testing import (
    BUILDS,
    HOOK_RETURNS,
    assert_conformant,
    check_plugin,
    make_host,
    make_plan,
    recorded_build,
)
from ezpz.testing.pytest_plugin import ezpz_host  # noqa: F401  (fixture)
from ezpz.testing.pytest_plugin import recorded_build as recorded_build_fixture  # noqa: F401  (fixture)

# The kit plans with a host of its own (the built-ins and the plugin under test), and its checks need that
# plugin's device chosen: no CPU pin here (tests/conftest.py), and nothing of this host's plugins is used.
pytestmark = pytest.mark.device_choice

HEADER = '''
from ezpz import hookimpl
from ezpz.decisions import AmpPolicy, BackendChoice, PrecisionOption, ProfilingSupport
from ezpz.facts import Alternative, DeviceCandidate, ProbeReport, Rejection
from ezpz.policies import choose_precision


class FakeFacts:
    pass
'''

GOOD_HOOKS = '''
@hookimpl
def ezpz_probe_devices(build, environ):
    return ProbeReport.found(DeviceCandidate(device_type="privateuseone", vendor="acme", reason="always here", priority=100,
                                             facts=FakeFacts()))


@hookimpl
def ezpz_select_backend(device, build, launch, requested):
    if not isinstance(device.facts, FakeFacts):
        return None
    return BackendChoice(name="gloo", reason="acme talks gloo")


@hookimpl
def ezpz_amp_policy(device, requested):
    if not isinstance(device.facts, FakeFacts):
        return None
    return choose_precision([PrecisionOption(dtype="bf16", supported=True, reason="acme has bf16")],
                            requested=requested, device="privateuseone")
'''


@pytest.fixture
def write_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    """Write a plugin module into tmp_path (importable here and in child interpreters); returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(source: str) -> str:
        name = f"kitplugin_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}_{len(written)}"
        (tmp_path / f"{name}.py").write_text(HEADER + textwrap.dedent(source))
        importlib.invalidate_caches()
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


def fails(report, check: str, *fragments: str) -> None:
    """``check`` failed and its detail mentions every fragment."""
    result = report[check]
    assert not result.passed, str(report)
    for fragment in fragments:
        assert fragment in result.detail, f"{fragment!r} not in {result.detail!r}"
    assert not report.passed


# -- good plugins pass ------------------------------------------------------------------------------


def test_builtin_cpu_plugin_is_conformant():
    report = assert_conformant("cpu")
    assert report["imports without vendor SDKs"].passed and not report["imports without vendor SDKs"].skipped
    assert report["ezpz_select_backend(cpu, 2 ranks)"].passed
    assert report["ezpz_select_backend(foreign device)"].detail == "None"


def test_builtin_launchers_plugin_is_conformant():
    report = assert_conformant("launchers", isolated_import=False)
    assert report["ezpz_detect_launch_env(empty environment)"].passed


def test_example_hpu_plugin_is_conformant_absent_and_simulated():
    pytest.importorskip("ezpz_example_hpu")
    absent = assert_conformant("example-hpu", environ={})
    assert "habana_frameworks not installed" in absent["ezpz_probe_devices(inputs)"].detail
    simulated = assert_conformant("ezpz_example_hpu.plugin", environ={"EZPZ_EXAMPLE_HPU_SIMULATE": "2"},
                                  isolated_import=False)
    assert simulated["ezpz_select_backend(hpu, 2 ranks)"].detail.startswith("gloo")
    assert simulated["plan with the built-ins"].detail.startswith("device hpu:0")


def test_in_test_good_plugin_passes_every_check(write_plugin):
    name = write_plugin(GOOD_HOOKS)
    report = assert_conformant(name)
    assert report["answers for its own devices"].passed
    assert report["ezpz_amp_policy(privateuseone, fp16)"].passed  # refusing fp16 with a ConfigError is fine
    assert "refused" in report["ezpz_amp_policy(privateuseone, fp16)"].detail
    assert str(report).startswith(f"plugin {name!r}")


def test_module_object_and_recorded_candidates(write_plugin):
    module = importlib.import_module(write_plugin(GOOD_HOOKS + '''
@hookimpl
def ezpz_profiling(device, build):
    if not isinstance(device.facts, FakeFacts):
        return None
    return ProfilingSupport(activities=("CPU",), reason="host activity only")
'''))
    recorded = module.DeviceCandidate(device_type="privateuseone", vendor="acme", reason="recorded on a real node",
                                      count=8, facts=module.FakeFacts())
    report = check_plugin(module, build=recorded_build("cuda"), environ={}, candidates=[recorded],
                          isolated_import=False)
    assert report.passed, str(report)
    assert "privateuseone#1" in " ".join(report.names())  # the probe's candidate plus the recorded one


# -- bad plugins fail, saying exactly what is wrong ---------------------------------------------------


def test_typo_in_hook_name_fails(write_plugin):
    name = write_plugin('''
@hookimpl
def ezpz_probe_device(build, environ):
    return None
''')
    report = check_plugin(name, isolated_import=False)
    fails(report, "hookimpls match specs", "ezpz_probe_device: no hook spec of that name",
          "did you mean ezpz_probe_devices?", "unknown hook 'ezpz_probe_device'")
    fails(report, "registers cleanly", "at validate", "ezpz_probe_device")


def test_argument_not_in_spec_fails(write_plugin):
    name = write_plugin('''
@hookimpl
def ezpz_profiling(device, build, verbose):
    return None
''')
    report = check_plugin(name, isolated_import=False)
    fails(report, "hookimpls match specs", "ezpz_profiling: argument(s) verbose not in the spec's (device, build)")
    fails(report, "registers cleanly", "at register")


def test_unmarked_hook_function_fails(write_plugin):
    name = write_plugin(GOOD_HOOKS + '''
def ezpz_profiling(device, build):
    return None
''')
    fails(check_plugin(name, isolated_import=False), "hookimpls marked",
          "ezpz_profiling not decorated with @ezpz.hookimpl")


def test_hook_returning_a_str_fails(write_plugin):
    name = write_plugin(GOOD_HOOKS.replace('BackendChoice(name="gloo", reason="acme talks gloo")', '"gloo"'))
    report = check_plugin(name, isolated_import=False)
    fails(report, "ezpz_select_backend(privateuseone, single)", "returned str ('gloo'), expected BackendChoice or None")
    fails(report, "plan with the built-ins", "quarantined", "ezpz_select_backend returned str")


def test_probe_returning_a_str_fails(write_plugin):
    name = write_plugin('''
@hookimpl
def ezpz_probe_devices(build, environ):
    return "no device"
''')
    fails(check_plugin(name, isolated_import=False), "ezpz_probe_devices(inputs)",
          "returned str ('no device'), expected ProbeReport or None")


def test_empty_alternative_reason_fails(write_plugin):
    name = write_plugin(GOOD_HOOKS.replace(
        'BackendChoice(name="gloo", reason="acme talks gloo")',
        'BackendChoice(name="gloo", reason="acme talks gloo", alternatives=[Alternative(name="nccl", reason="")])',
    ))
    fails(check_plugin(name, isolated_import=False), "ezpz_select_backend(privateuseone, 2 ranks)",
          "alternatives[0].reason is empty")


def test_empty_rejection_reason_fails(write_plugin):
    name = write_plugin('''
import attrs


@hookimpl
def ezpz_probe_devices(build, environ):
    with attrs.validators.disabled():  # sneaks past the record's own validator
        return ProbeReport(rejections=[Rejection(device_type="privateuseone", vendor="acme", reason="  ")])
''')
    fails(check_plugin(name, isolated_import=False), "ezpz_probe_devices(inputs)", "rejections[0].reason is empty")


def test_answering_for_a_device_it_did_not_offer_fails(write_plugin):
    name = write_plugin(GOOD_HOOKS.replace("if not isinstance(device.facts, FakeFacts):\n        return None\n    return BackendChoice",
                                           "return BackendChoice"))
    fails(check_plugin(name, isolated_import=False), "ezpz_select_backend(foreign device)",
          "answered BackendChoice for a device the plugin did not offer")


def test_probe_that_raises_fails(write_plugin):
    name = write_plugin('''
@hookimpl
def ezpz_probe_devices(build, environ):
    raise RuntimeError("driver exploded")
''')
    report = check_plugin(name, isolated_import=False)
    fails(report, "ezpz_probe_devices(inputs)", "raised RuntimeError: driver exploded")
    fails(report, "ezpz_probe_devices(bare: cpu-only torch, empty environment)", "driver exploded")


def test_offering_a_device_without_backend_or_precision_hooks_fails(write_plugin):
    name = write_plugin('''
@hookimpl
def ezpz_probe_devices(build, environ):
    return ProbeReport.found(DeviceCandidate(device_type="privateuseone", vendor="acme", reason="here", priority=100,
                                             facts=FakeFacts()))
''')
    report = check_plugin(name, isolated_import=False)
    fails(report, "answers for its own devices", "offers privateuseone but implements no ezpz_select_backend or ezpz_amp_policy")
    fails(report, "plan with the built-ins", "did not answer ezpz_select_backend")


def test_hook_wrapper_fails(write_plugin):
    name = write_plugin('''
@hookimpl(wrapper=True)
def ezpz_profiling(device, build):
    return (yield)
''')
    fails(check_plugin(name, isolated_import=False), "no hook wrappers", "ezpz_profiling")


def test_importing_a_blocked_sdk_at_module_import_fails(write_plugin):
    name = write_plugin("import pynvml\n" + GOOD_HOOKS)
    report = check_plugin(name, environ={})
    fails(report, "imports without vendor SDKs", "tried to import pynvml at module import",
          "import failed without the SDKs: ModuleNotFoundError", "blocked by ezpz.testing")


def test_guarded_sdk_import_at_module_import_still_fails(write_plugin):
    name = write_plugin("try:\n    import amdsmi\nexcept ImportError:\n    amdsmi = None\n" + GOOD_HOOKS)
    report = check_plugin(name, environ={})
    fails(report, "imports without vendor SDKs", "tried to import amdsmi at module import")
    assert "import failed" not in report["imports without vendor SDKs"].detail


def test_sdk_imported_inside_a_hook_body_passes(write_plugin):
    name = write_plugin(GOOD_HOOKS + '''
@hookimpl
def ezpz_profiling(device, build):
    if not isinstance(device.facts, FakeFacts):
        return None
    try:
        import pynvml  # noqa: F401  (inside the hook: fine)
    except ImportError:
        pass
    return ProfilingSupport(activities=("CPU",), reason="host only")
''')
    assert check_plugin(name, environ={})["imports without vendor SDKs"].passed


def test_heavy_module_level_import_fails_unless_allowed(write_plugin):
    name = write_plugin("import torch  # noqa: F401\n" + GOOD_HOOKS)
    fails(check_plugin(name, environ={}), "imports without vendor SDKs", "imports torch at module import")
    assert check_plugin(name, environ={}, allow_imports=["torch"])["imports without vendor SDKs"].passed


def test_unknown_plugin_fails_to_resolve():
    report = check_plugin("no_such_ezpz_plugin_module_xyz")
    fails(report, "resolve", "ModuleNotFoundError")
    assert report.names() == ["resolve"]


def test_assert_conformant_lists_every_failure(write_plugin):
    name = write_plugin('''
@hookimpl
def ezpz_probe_device(build, environ):
    return None


@hookimpl
def ezpz_profiling(device, build):
    return "cpu"
''')
    with pytest.raises(AssertionError) as info:
        assert_conformant(name, isolated_import=False)
    text = str(info.value)
    assert f"plugin {name!r}" in text and "is not conformant" in text
    assert "FAIL hookimpls match specs" in text and "FAIL ezpz_profiling(foreign device)" in text


# -- contract and helpers -------------------------------------------------------------------------------


def test_every_hookspec_has_a_documented_return_type():
    specs = {n for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(f, "ezpz_spec")}
    assert set(HOOK_RETURNS) == specs


def test_recorded_builds():
    assert recorded_build("rocm").hip and recorded_build("rocm").cuda is None
    assert recorded_build("xpu").at_least(2, 8) and "xccl" in recorded_build("xpu").distributed_backends
    assert "xccl" not in recorded_build("xpu-ccl").distributed_backends
    assert recorded_build("cuda", cuda="11.8").cuda == "11.8"
    assert isinstance(recorded_build("this"), TorchBuild)
    assert set(BUILDS) >= {"cpu", "cuda", "rocm", "xpu", "xpu-ccl", "mps"}
    with pytest.raises(ValueError, match="unknown build 'tpu'"):
        recorded_build("tpu")


def test_make_host_holds_only_the_builtins_and_plans_cpu():
    host = make_host()
    assert {"cpu", "launchers"} <= set(host.loaded())
    assert not any(r.builtin is False for r in host.records.values())
    plan = make_plan(host, build=recorded_build("cpu"))
    assert plan.device.torch_device == "cpu" and plan.backend.name == "gloo"


def test_fixtures(ezpz_host, recorded_build_fixture):  # noqa: F811
    assert "cpu" in ezpz_host.loaded()
    assert recorded_build_fixture("cuda").cuda == "12.6"


def test_pytest_plugin_loads_with_dash_p(tmp_path):
    (tmp_path / "test_uses_fixtures.py").write_text(textwrap.dedent('''
        def test_it(ezpz_host, recorded_build):
            assert "cpu" in ezpz_host.loaded()
            assert recorded_build("xpu").xpu_built
    '''))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "ezpz.testing.pytest_plugin", "-p", "no:cacheprovider",
         str(tmp_path / "test_uses_fixtures.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
