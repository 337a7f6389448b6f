"""Helpers for the ``ezpz`` command tests, and unit tests of the pieces they lean on (redaction, layout)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import clean_env
from ezpz.cli._util import REDACTED, is_secret, relevant_env, scrub
from ezpz.errors import ConfigError
from ezpz.launch_drivers.base import Allocation
from ezpz.launch_drivers.layout import resolve_layout


def ezpz(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run ``python -m ezpz ARGS`` the way a user would, with a clean launcher-free environment by default."""
    return subprocess.run([sys.executable, "-m", "ezpz", *args], env=clean_env() if env is None else env,
                          capture_output=True, text=True, timeout=timeout)


def with_pythonpath(env: dict[str, str], *dirs: Path) -> dict[str, str]:
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, dirs), *filter(None, [env.get("PYTHONPATH")])])
    return env


def fake_dist(root: Path, dist: str, module: str, source: str, entry_points: str) -> Path:
    """A module plus ``*.dist-info`` in ``root`` (importlib.metadata finds it through PYTHONPATH); no pip install."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    (info / "top_level.txt").write_text(module + "\n")
    return root


def broken_plugin(root: Path, message: str = "vendor SDK missing") -> Path:
    """A plugin ``broken`` (distribution ezpz-broken 1.2.3) whose module raises at import."""
    return fake_dist(root, "ezpz-broken", "ezpz_broken", f"raise RuntimeError({message!r})\n",
                     "[ezpz]\nbroken = ezpz_broken\n")


SITE_DRIVER = """
    from ezpz.launch_drivers.base import Allocation, Command, Match

    class Aprun:
        def match(self, environ):
            job = environ.get("COBALT_JOBID")
            return Match(True, f"Cobalt job {job}") if job else Match(False, "COBALT_JOBID not set")

        def allocation(self, environ):
            return Allocation(hosts=("nid01", "nid02"), source="COBALT_PARTNAME")

        def build(self, argv, layout, environ):
            return Command(argv=("aprun", "-n", str(layout.n), "-N", str(layout.ppn), *argv))
"""


def site_driver(root: Path) -> Path:
    """A site's own launcher ``aprun`` (distribution ezpz-site-aprun), registered in group ezpz.launchers."""
    return fake_dist(root, "ezpz-site-aprun", "ezpz_site_aprun", SITE_DRIVER,
                     "[ezpz.launchers]\naprun = ezpz_site_aprun:Aprun\n")


def fake_mpiexec(bindir: Path, banner: str) -> Path:
    """An ``mpiexec`` that prints ``banner`` for --version (to stand in for Cray PALS or MPICH)."""
    bindir.mkdir(parents=True, exist_ok=True)
    script = bindir / "mpiexec"
    script.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "{banner}"; exit 0; fi\necho "$@"\n')
    script.chmod(0o755)
    return bindir


def path_without(*tools: str, prepend: Path | None = None) -> str:
    """PATH minus every directory holding one of ``tools`` (optionally with ``prepend`` first)."""
    keep = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not any(Path(p, t).exists() for t in tools)]
    return os.pathsep.join([str(prepend)] * (prepend is not None) + keep)


# -- unit tests ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["FOO_TOKEN", "HF_TOKEN", "EZPZ_SECRET_X", "DB_PASSWORD", "OPENAI_API_KEY", "SSH_KEY",
                                  "WANDB_API_KEY", "aws_secret_access_key"])
def test_secret_names(name):
    assert is_secret(name)


@pytest.mark.parametrize("name", ["EZPZ_DEVICE", "KEYBOARD", "CUDA_VISIBLE_DEVICES", "MASTER_PORT", "TORCH_BACKEND"])
def test_plain_names(name):
    assert not is_secret(name)


def test_relevant_env_keeps_launcher_and_vendor_vars_and_redacts_secrets():
    env = {"EZPZ_DEVICE": "cpu", "TORCH_BACKEND": "gloo", "RANK": "3", "OMPI_COMM_WORLD_RANK": "3",
           "HIP_VISIBLE_DEVICES": "0,1", "ZE_AFFINITY_MASK": "0.0", "SLURM_JOB_ID": "7", "PBS_NODEFILE": "/x",
           "EZPZ_API_TOKEN": "hunter22", "HOME": "/root", "FOO_TOKEN": "hunter22"}
    shown = relevant_env(env)
    assert shown["EZPZ_API_TOKEN"] == REDACTED
    assert "HOME" not in shown and "FOO_TOKEN" not in shown
    assert {"EZPZ_DEVICE", "TORCH_BACKEND", "RANK", "OMPI_COMM_WORLD_RANK", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
            "SLURM_JOB_ID", "PBS_NODEFILE"} <= set(shown)


def test_scrub_removes_secret_values_anywhere():
    text = 'error: could not log in with "hunter22" (token hunter22)'
    assert "hunter22" not in scrub(text, {"FOO_TOKEN": "hunter22", "EZPZ_DEVICE": "cpu"})
    assert scrub("device cpu", {"EZPZ_DEVICE": "cpu"}) == "device cpu"


def _no_default() -> tuple[int, str]:
    raise AssertionError("default processes per node should not be needed")


@pytest.mark.parametrize(("hosts", "n", "ppn", "want"), [
    ((), 4, None, (4, 4, 1)),
    (("a", "b"), None, 4, (8, 4, 2)),
    (("a", "b"), 8, None, (8, 4, 2)),
    (("a", "b", "c"), 4, 4, (4, 4, 1)),
    (("a", "b"), 2, 4, (2, 2, 1)),
    (("a", "b", "c", "d", "e"), 6, None, (6, 2, 3)),
])
def test_layout(hosts, n, ppn, want):
    layout = resolve_layout(Allocation(hosts=hosts, source="test"), n, ppn, _no_default)
    assert (layout.n, layout.ppn, layout.nodes) == want


def test_layout_default_is_per_node_times_nodes():
    layout = resolve_layout(Allocation(hosts=("a", "b"), source="test"), None, None, lambda: (4, "4 gpus"))
    assert (layout.n, layout.ppn, layout.nodes) == (8, 4, 2) and "4 gpus" in layout.why


@pytest.mark.parametrize(("hosts", "n", "ppn"), [((), 4, 2), (("a", "b"), 16, 4), ((), 0, None), ((), None, 0)])
def test_layout_refuses_what_does_not_fit(hosts, n, ppn):
    with pytest.raises(ConfigError) as info:
        resolve_layout(Allocation(hosts=hosts, source="test"), n, ppn, lambda: (1, "x"))
    assert info.value.fix


def test_console_script_is_installed():
    script = shutil.which("ezpz")
    if script is None:
        pytest.skip("the ezpz console script is not on PATH (core not pip-installed)")
    out = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("ezpz ")
    assert out.stdout == ezpz("--version").stdout
