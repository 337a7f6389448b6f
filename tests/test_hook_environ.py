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
