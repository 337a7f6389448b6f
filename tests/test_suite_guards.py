"""The suite's own guards (tests/conftest.py): the CPU pin, and launchers that are present but cannot run.

The suite must pass on a contributor's GPU host as on CI's CPU-only one (issue 31: 124 tests failed on an
H200). These tests check the mechanisms that make that so; ``scripts/standin-suite.sh`` runs the whole
suite on a stand-in for a one-GPU host.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

import conftest
import ezpz
from conftest import clean_env, need_tool, pinned


def test_a_test_not_about_device_choice_runs_on_the_cpu_in_process_and_in_every_child_environment():
    assert os.environ["EZPZ_DEVICE"] == "cpu"
    assert clean_env()["EZPZ_DEVICE"] == "cpu"
    assert clean_env(RANK="1")["EZPZ_DEVICE"] == "cpu"
    plan, _ = ezpz.hooks.plan(environ={"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
    assert plan.device.candidate.device_type == "cpu"  # even where an accelerator's plugin outranks the cpu


def test_a_device_the_test_names_itself_is_kept():
    assert clean_env(TORCH_DEVICE="meta")["TORCH_DEVICE"] == "meta" and "EZPZ_DEVICE" not in clean_env(
        TORCH_DEVICE="meta")
    assert pinned({"EZPZ_DEVICE": "emu"}) == {"EZPZ_DEVICE": "emu"}


@pytest.mark.device_choice
def test_a_device_choice_test_gets_no_pin():
    assert "EZPZ_DEVICE" not in os.environ and "EZPZ_DEVICE" not in clean_env()
    assert pinned({}) == {}


@pytest.mark.device_choice
def test_builtin_plugins_only_is_a_host_whose_one_device_is_its_cpu(builtin_plugins_only):
    plan, _ = ezpz.hooks.plan(environ={})
    assert plan.device.candidate.device_type == "cpu"
    assert set(ezpz.hooks.get_plugin_host().loaded()) <= {"cpu", "mps", "launchers"}


def test_a_python_path_given_to_clean_env_goes_before_the_inherited_one(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/site")
    assert clean_env(PYTHONPATH="/plugins")["PYTHONPATH"] == os.pathsep.join(["/plugins", "/site"])


@pytest.fixture
def mpiexec_without_an_rsh_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An Open MPI ``mpiexec`` on a PATH without ssh or rsh: on PATH, but it exits 243 before starting anything."""
    orterun = shutil.which("orterun") or shutil.which("mpiexec.openmpi")
    if orterun is None:
        if conftest.IN_CI:
            pytest.fail("Open MPI is required in CI (.ci/run installs openmpi-bin) but is not installed")
        pytest.skip("Open MPI not installed (apt-get install openmpi-bin)")
    wrapper = tmp_path / "mpiexec"
    wrapper.write_text(f'#!/bin/sh\nexec {orterun} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))  # no ssh, no rsh
    return wrapper


def test_an_mpiexec_that_cannot_start_one_process_skips_naming_why(mpiexec_without_an_rsh_agent, monkeypatch):
    monkeypatch.setattr(conftest, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        need_tool("mpiexec")
    said = str(skipped.value)
    assert "on PATH" in said and "cannot run here" in said and "exited 243" in said and "plm_rsh_agent" in said


def test_in_ci_an_mpiexec_that_cannot_run_fails(mpiexec_without_an_rsh_agent, monkeypatch):
    monkeypatch.setattr(conftest, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="required to run in CI but cannot: .*exited 243"):
        need_tool("mpiexec")
