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


# -- a launcher probe that fails once (issue 44): tried again, and the reason says what each try saw ------------

def _flaky_mpiexec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failures: int) -> Path:
    """A Hydra-like ``mpiexec`` whose first ``failures`` runs die of SIGPIPE with no output, as one did under load.

    A real executable run as a real subprocess; it counts its runs in a file and notes where its stdin points.
    """
    fake = tmp_path / "mpiexec"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "HYDRA build details:"; exit 0; fi\n'
        f'readlink /proc/$$/fd/0 >> "{tmp_path}/stdin"\n'
        f'n=$(cat "{tmp_path}/runs" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "{tmp_path}/runs"\n'
        f'if [ "$n" -le {failures} ]; then kill -PIPE $$; fi\n'
        'shift 2; exec "$@"\n')  # -n 1 <program>
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path), "/usr/bin", "/bin"]))
    return fake


def test_a_launcher_probe_that_fails_once_then_works_lets_the_launchers_tests_run(tmp_path, monkeypatch):
    fake = _flaky_mpiexec(tmp_path, monkeypatch, failures=1)
    monkeypatch.setattr(conftest, "IN_CI", True)  # neither skipped nor failed, in CI too
    with pytest.warns(UserWarning, match=r"failed, then worked on try 2: try 1: killed by signal 13 \(SIGPIPE\)"):
        assert need_tool("mpiexec") == str(fake)
    assert (tmp_path / "runs").read_text().strip() == "2"
    assert set((tmp_path / "stdin").read_text().split()) == {"/dev/null"}  # stdin closed on every try


def test_a_launcher_probe_that_keeps_failing_skips_saying_what_each_try_saw(tmp_path, monkeypatch):
    _flaky_mpiexec(tmp_path, monkeypatch, failures=2)
    monkeypatch.setattr(conftest, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        need_tool("mpiexec")
    said = str(skipped.value)
    assert "failed 2 times" in said and said.count("killed by signal 13 (SIGPIPE): no output") == 2, said
    assert (tmp_path / "runs").read_text().strip() == "2"


def test_in_ci_a_launcher_probe_that_keeps_failing_fails_saying_what_it_saw(tmp_path, monkeypatch):
    _flaky_mpiexec(tmp_path, monkeypatch, failures=2)
    monkeypatch.setattr(conftest, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match=r"required to run in CI but cannot: .*try 2: killed by signal 13"):
        need_tool("mpiexec")


def test_a_probe_that_exits_through_a_shell_names_the_signal_too():
    assert conftest._exit_said(141) == "exited 141 (128 + 13: SIGPIPE, as a shell reports it)"
    assert conftest._exit_said(-9) == "killed by signal 9 (SIGKILL)" and conftest._exit_said(3) == "exited 3"
