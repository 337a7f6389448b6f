"""Helpers for the emu plugin's tests: child processes with a clean environment, the portable script, launchers."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

#: The repository checkout, when these tests run from one (docs/portable-script.md holds the portable script).
ROOT = Path(__file__).resolve().parents[3]
_LEAKY = ("EZPZ_", "OMPI_", "PMI_", "PMIX_", "PALS_", "SLURM_", "TORCHELASTIC_", "PBS_")
_LEAKY_NAMES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                "TORCH_DEVICE", "TORCH_BACKEND"}

#: Runs a script unchanged and records its optimizer's parameters on rank 0 at teardown(), to compare devices.
RECORDER = '''
import runpy, sys
import torch
import ezpz

script, out = sys.argv[1], sys.argv[2]
sys.argv = [script, *sys.argv[3:]]
params = []


class Recording(torch.optim.AdamW):
    def __init__(self, p, *args, **kwargs):
        p = list(p)
        params.extend(p)
        super().__init__(p, *args, **kwargs)


torch.optim.AdamW = Recording
teardown = ezpz.hooks.teardown


def recording_teardown():
    rt = ezpz.hooks.get_runtime()
    if rt is not None and rt.is_main:
        torch.save([p.detach().cpu() for p in params], out)
    teardown()


ezpz.hooks.teardown = recording_teardown
runpy.run_path(script, run_name="__main__")
'''


def child_env(**extra: str) -> dict[str, str]:
    """This environment without launcher or ezpz variables, one thread, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith(_LEAKY) or k in _LEAKY_NAMES)}
    env.update(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120")
    env.update(extra)
    return env


def run(argv: list[str], env: dict[str, str], cwd: Path | None = None,
        timeout: float = 280) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def need_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not on PATH")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def portable_script(tmp_path: Path) -> Path:
    """docs/portable-script.md's script, written to ``tmp_path`` exactly as the page shows it."""
    page = ROOT / "docs" / "portable-script.md"
    if not page.is_file():
        pytest.skip(f"{page} not found: these tests run from a checkout of the repository")
    text = page.read_text(encoding="utf-8")
    found = re.search(r"```python[^\n]*\n(.*?)\n```", text[text.index("## The whole script"):], flags=re.DOTALL)
    assert found, "no python block under '## The whole script'"
    script = tmp_path / "portable_train.py"
    script.write_text(found.group(1) + "\n", encoding="utf-8")
    return script


def recorder(tmp_path: Path) -> Path:
    path = tmp_path / "record_weights.py"
    path.write_text(RECORDER, encoding="utf-8")
    return path


def mpiexec_argv(n: int, *env_names: str) -> list[str]:
    """Open MPI's mpiexec for ``n`` ranks on this host (as root too), passing ``env_names`` on."""
    mpiexec = need_tool("mpiexec")
    version = run([mpiexec, "--version"], env=child_env(), timeout=30).stdout
    if "Open MPI" not in version and "OpenRTE" not in version:
        pytest.skip(f"mpiexec is not Open MPI's ({version.strip().splitlines()[:1]})")
    argv = [mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", str(n)]
    for name in ("OMP_NUM_THREADS", "EZPZ_TIMEOUT", *env_names):
        argv += ["-x", name]
    return argv


PY = sys.executable
