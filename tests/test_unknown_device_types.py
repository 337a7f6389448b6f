"""A plugin that offers a device type (or names a backend) torch does not know: refused with the fix, never torch's
raw error (issue 28). The plugin is a real pip-installed package (tests/plugins/nimbus), written as a third party
following docs/hooks.md, whose torch extension is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, pip_install_target

NIMBUS = ROOT / "tests" / "plugins" / "nimbus" / "ezpz-test-nimbus"

SETUP = """
import json, ezpz
rt = ezpz.hooks.setup()
device = rt.explain()["device"]
print(json.dumps({"device": str(rt.device), "backend": rt.backend,
                  "refused": [a.reason for a in device.alternatives if a.name == "nimbus"]}))
"""


@pytest.fixture(scope="module")
def nimbus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("nimbus")
    pip_install_target(target, NIMBUS)
    return target


def _env(nimbus_dir: Path, **extra: str) -> dict[str, str]:
    return clean_env(PYTHONPATH=str(nimbus_dir), NIMBUS_VISIBLE_DEVICES="0,1", **extra)


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)


def test_setup_picks_cpu_and_the_trace_says_why_not_nimbus(nimbus_dir: Path) -> None:
    proc = _run([sys.executable, "-c", SETUP], _env(nimbus_dir))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["device"] == "cpu" and got["backend"] == "gloo"
    (reason,) = got["refused"]
    assert "plugin 'nimbus'" in reason and "device type 'nimbus'" in reason and "does not know" in reason
    assert "install the vendor's torch extension" in reason and "EZPZ_DISABLE_PLUGINS=nimbus" in reason


def test_asking_for_nimbus_raises_a_named_unavailable_error_with_the_fix(nimbus_dir: Path) -> None:
    code = ("import ezpz\nfrom ezpz.errors import UnavailableError\ntry:\n    ezpz.hooks.setup()\n"
            "except UnavailableError as err:\n    print('NAMED', err.name, '|', err)\n")
    proc = _run([sys.executable, "-c", code], _env(nimbus_dir, EZPZ_DEVICE="nimbus"))
    assert proc.returncode == 0, proc.stderr
    assert "NAMED EZPZ_DEVICE |" in proc.stdout
    assert "plugin 'nimbus'" in proc.stdout and "install the vendor's torch extension" in proc.stdout
    assert "Expected one of cpu" not in proc.stderr  # torch's raw error never reaches the user alone


def test_doctor_counts_the_refusal_as_a_problem_naming_the_plugin(nimbus_dir: Path) -> None:
    proc = _run([sys.executable, "-m", "ezpz", "doctor"], _env(nimbus_dir))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # setup() works (on cpu), but the plugin's device cannot
    assert "device: cpu" in proc.stdout
    lines = [line for line in proc.stdout.splitlines() if "nimbus" in line and "does not know" in line]
    assert lines, proc.stdout
    verdict = proc.stdout[proc.stdout.rindex("problem(s):"):]
    assert "plugin 'nimbus' offers device 'nimbus', which setup() refuses" in verdict, verdict
    assert "EZPZ_DISABLE_PLUGINS=nimbus" in verdict
    as_json = _run([sys.executable, "-m", "ezpz", "doctor", "--json"], _env(nimbus_dir))
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and report["ok"] is False
    assert any("plugin 'nimbus'" in p["what"] and "does not know" in p["what"] for p in report["problems"])
    device = next(d for d in report["decisions"] if d["topic"] == "device")
    assert [a["problem"] for a in device["alternatives"] if a["name"] == "nimbus"] == [True]
    # acknowledged by disabling the plugin, as the fix says: nothing broken
    quiet = _run([sys.executable, "-m", "ezpz", "doctor"], _env(nimbus_dir, EZPZ_DISABLE_PLUGINS="nimbus"))
    assert quiet.returncode == 0, quiet.stdout


def test_asking_for_a_disabled_plugins_device_says_it_is_disabled_and_how_to_enable_it(nimbus_dir: Path) -> None:
    code = ("import ezpz\nfrom ezpz.errors import UnavailableError\ntry:\n    ezpz.hooks.setup()\n"
            "except UnavailableError as err:\n    print('NAMED', err.name, '|', err)\n")
    proc = _run([sys.executable, "-c", code], _env(nimbus_dir, EZPZ_DEVICE="nimbus", EZPZ_DISABLE_PLUGINS="nimbus"))
    assert proc.returncode == 0, proc.stderr
    assert "NAMED EZPZ_DEVICE |" in proc.stdout
    assert "plugin 'nimbus' is installed but not loaded: named in EZPZ_DISABLE_PLUGINS" in proc.stdout, proc.stdout
    assert "remove 'nimbus' from EZPZ_DISABLE_PLUGINS to enable it" in proc.stdout
    assert "install the plugin" not in proc.stdout


def test_the_conformance_kit_fails_it_naming_the_check(nimbus_dir: Path) -> None:
    code = ("import json\nfrom ezpz.testing import check_plugin\n"
            "r = check_plugin('nimbus', isolated_import=False)\n"
            "print(json.dumps({x.name: [x.passed, x.detail] for x in r.results}))\n")
    proc = _run([sys.executable, "-c", code], _env(nimbus_dir))
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    passed, detail = results["device type known to torch (nimbus)"]
    assert not passed and "torch.device('nimbus') fails" in detail
    passed, detail = results["backend known to torch.distributed (nimbus: nimbusccl)"]
    assert not passed and "does not know" in detail


def test_a_backend_torch_does_not_know_is_refused_before_init_process_group() -> None:
    """Direct check of the guard on a real 2-rank plan: the error names the plugin, the backend and the fix."""
    import attrs

    from ezpz.errors import UnavailableError
    from ezpz.startup.process_group import init_process_group
    from ezpz.testing import make_host, make_plan, recorded_build

    plan = make_plan(make_host(), build=recorded_build("cpu"),
                     environ={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                              "MASTER_PORT": "1", "TORCHELASTIC_RUN_ID": "x", "GROUP_RANK": "0",
                              "LOCAL_WORLD_SIZE": "2"})
    bad = attrs.evolve(plan, backend=attrs.evolve(plan.backend, name="nimbusccl"))
    with pytest.raises(UnavailableError, match="nimbusccl") as info:
        init_process_group(bad, environ={})
    assert info.value.name == "backend" and "plugin 'cpu'" in str(info.value)
    assert "register" in info.value.fix and "EZPZ_BACKEND" in info.value.fix


def test_policy_refuses_only_unknown_types() -> None:
    from ezpz.facts import DeviceCandidate
    from ezpz.policies import refuse_unknown_device_types

    cpu = DeviceCandidate(device_type="cpu", vendor="cpu", count=1, reason="always", plugin="cpu", shared=True)
    npu = DeviceCandidate(device_type="npu", vendor="huawei", count=8, reason="8 NPUs", plugin="ascend")
    kept, refused = refuse_unknown_device_types([cpu, npu], {"npu": "Expected one of cpu ..."})
    assert kept == [cpu]
    (rejection,) = refused
    assert rejection.plugin == "ascend" and rejection.device_type == "npu"
    assert "plugin 'ascend'" in rejection.reason and "Expected one of cpu" in rejection.reason
