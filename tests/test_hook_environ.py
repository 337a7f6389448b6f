"""Hooks get a read-only view of the environment; plugins change it only through ezpz_before_init.

A probe or detect hook that writes to the mapping it was given raises inside
the hook, so the plugin is quarantined and named like any other fault, and
the process environment is untouched. Variables a plugin needs are returned
as ``LifecycleAction.env_defaults``, applied by ``setup()`` (the user's value
wins) and listed in the trace.
"""

from __future__ import annotations

import os

import pytest

import ezpz
from ezpz import hookimpl
from ezpz.decisions import LifecycleAction
from ezpz.startup.environ import EnvironSnapshot, EnvironWriteError, apply_env_defaults, snapshot
from ezpz.facts import ProbeReport
from ezpz.testing import make_host, make_plan

FLAG = "ACME_VENDOR_FLAG"


class ProbeWriter:
    """Sets a variable from its probe: the documented contract says it must not."""

    @hookimpl
    def ezpz_probe_devices(self, build, environ):
        environ[FLAG] = "set-by-probe"
        return ProbeReport.rejected("acme", "acme", "never reached")


class DetectWriter:
    """Deletes a variable from its launch detection."""

    @hookimpl(tryfirst=True)
    def ezpz_detect_launch_env(self, environ):
        environ.pop("PATH", None)


class EnvDefaults:
    """The sanctioned way: ask for variables from ezpz_before_init."""

    @hookimpl
    def ezpz_before_init(self, plan):
        return LifecycleAction(reason="acme runtime wants its flag", env_defaults={FLAG: "on", "HOME": "/elsewhere"})


class BadEnvDefaults:
    @hookimpl
    def ezpz_before_init(self, plan):
        return LifecycleAction(reason="returns a number", env_defaults={FLAG: 1})


@pytest.fixture(autouse=True)
def _no_flag(monkeypatch):
    monkeypatch.delenv(FLAG, raising=False)


def test_snapshot_reads_like_the_environment_and_refuses_every_write():
    snap = snapshot({"A": "1", "B": "2"})
    assert snap["A"] == "1" and snap.get("C") is None and "B" in snap and dict(snap) == {"A": "1", "B": "2"}
    assert snapshot(snap) is snap and snap.copy() == {"A": "1", "B": "2"}
    writes = [lambda: snap.__setitem__("A", "x"), lambda: snap.__delitem__("A"), lambda: snap.pop("A"),
              lambda: snap.update(A="x"), lambda: snap.setdefault("C", "3"), snap.clear, snap.popitem,
              lambda: setattr(snap, "_data", {})]
    for write in writes:
        with pytest.raises(EnvironWriteError, match="read-only snapshot.*ezpz_before_init"):
            write()
    assert dict(snap) == {"A": "1", "B": "2"}


def test_snapshot_is_taken_once_and_does_not_follow_the_source():
    source = {"A": "1"}
    snap = EnvironSnapshot(source)
    source["A"] = "2"
    assert snap["A"] == "1"


@pytest.mark.parametrize(("plugin", "hook"), [(ProbeWriter(), "ezpz_probe_devices"),
                                              (DetectWriter(), "ezpz_detect_launch_env")])
def test_a_hook_that_writes_is_quarantined_and_named(plugin, hook):
    before = dict(os.environ)
    host = make_host(names={"acme": plugin})
    plan = make_plan(host, environ=os.environ)
    (failed,) = host.failures
    assert failed.name == "acme" and failed.stage == f"hook {hook}"
    assert "EnvironWriteError" in failed.error and "read-only snapshot" in failed.error
    assert dict(os.environ) == before  # nothing leaked into the process
    assert plan.device.candidate.device_type == "cpu"  # the others kept answering


def test_env_defaults_are_applied_by_setup_and_shown_in_the_trace(monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    host = ezpz.hooks.get_plugin_host()
    assert host.register("acme-env", EnvDefaults())
    try:
        rt = ezpz.hooks.setup(device="cpu", precision="fp32")
        assert os.environ[FLAG] == "on" and os.environ["HOME"] == "/home/user"  # the user's value wins
        lifecycle = [d for d in rt.explain().decisions if d.topic == "lifecycle" and d.chosen == "acme-env"]
        assert lifecycle and lifecycle[0].details == {FLAG: "set to 'on'", "HOME": "kept '/home/user' (already set)"}
        assert f"{FLAG}: set to 'on'" in str(rt.explain())
        ezpz.hooks.teardown()
        assert FLAG not in os.environ  # removed again
    finally:
        host.pm.unregister(name="acme-env")
        host.records.pop("acme-env", None)


def test_a_bad_env_default_quarantines_the_plugin_before_anything_is_set():
    host = ezpz.hooks.get_plugin_host()
    assert host.register("acme-bad-env", BadEnvDefaults())
    try:
        rt = ezpz.hooks.setup(device="cpu", precision="fp32")
        assert FLAG not in os.environ
        record = host.records["acme-bad-env"]
        assert record.status == "failed" and record.stage == "hook ezpz_before_init"
        assert "is a int, not a str" in record.error
        assert rt.device.type == "cpu"
    finally:
        host.records.pop("acme-bad-env", None)


@pytest.mark.parametrize(("defaults", "why"), [({"1BAD": "x"}, "not a variable name"), ({"A=B": "x"}, "not a variable"),
                                               ({"OK": "a\x00b"}, "NUL")])
def test_apply_env_defaults_checks_before_setting(defaults, why):
    target: dict[str, str] = {}
    with pytest.raises(TypeError, match=why):
        apply_env_defaults({"FIRST": "1", **defaults}, target)
    assert target == {}


# -- a launcher's own default is not the user's: torchrun's TORCH_NCCL_ASYNC_ERROR_HANDLING=1 --------------------

_ASYNC = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
_UNDER_TORCHRUN = r'''
import json, os, ezpz
from ezpz.decisions import LifecycleAction

class NcclWatchdog:
    @ezpz.hookimpl
    def ezpz_before_init(self, plan):
        return LifecycleAction(reason="acme: NCCL watchdog", env_defaults={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"})

ezpz.hooks.get_plugin_host().register("acme-nccl", NcclWatchdog())
seen = os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING")
rt = ezpz.hooks.setup(device="cpu", precision="fp32")
d = next(x for x in rt.explain().decisions if x.topic == "lifecycle" and x.chosen == "acme-nccl")
applied = os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING")
ezpz.hooks.teardown()
print(json.dumps({"seen": seen, "applied": applied, "reason": d.reason, "details": dict(d.details),
                  "after_teardown": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING")}))
'''


@pytest.mark.launcher
@pytest.mark.parametrize("user", [None, "0"], ids=["unset", "user-0"])
def test_under_real_torchrun_its_own_async_error_handling_is_replaced_and_named(user):
    """torchrun exports TORCH_NCCL_ASYNC_ERROR_HANDLING=1 to its worker when unset (seen on the H200): that is
    torchrun's, not the user's, so the plugin's value applies and the trace names torchrun; a value the user
    exported (0) is kept as the user's."""
    import json
    import subprocess
    import sys

    from conftest import clean_env
    from test_real_launchers import free_port

    env = clean_env(OMP_NUM_THREADS="1")
    env.pop(_ASYNC, None)
    if user is not None:
        env[_ASYNC] = user
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", "--master-port",
                           str(free_port()), "--no-python", sys.executable, "-c", _UNDER_TORCHRUN],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("{")))
    if user is None:
        assert row["seen"] == "1"  # torchrun's agent put it there: the premise of the fix
        assert row["applied"] == "3"
        assert f"{_ASYNC}=1 was set by torchrun, not by the user" in row["reason"]
        assert "set by the user" not in row["reason"]
        assert row["details"][_ASYNC] == "set to '3', replacing '1' set by torchrun (not the user)"
        assert row["after_teardown"] == "1"  # teardown() puts torchrun's value back
    else:
        assert (row["seen"], row["applied"], row["after_teardown"]) == ("0", "0", "0")
        assert f"{_ASYNC}=0 set by the user was kept (the plugin proposed 3)" in row["reason"]
