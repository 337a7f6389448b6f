"""The getting-started install block, pasted as it is into a fresh venv, installs the torch constraints.txt pins.

A copy of the repository's tracked files stands in for a fresh clone; the block's lines run verbatim in it (bash,
the fresh venv first on PATH), wheels built by its own first line (scripts/build-dists.sh -> dist/).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, need_package_index

DOC = ROOT / "docs" / "getting-started.md"


def install_block() -> str:
    text = DOC.read_text()
    section = text[text.index("## Install"):]
    return re.search(r"```bash\n(.*?)```", section, re.S)[1]


def pinned_torch() -> str:
    (pin,) = [ln.split("==", 1)[1].strip() for ln in (ROOT / "constraints.txt").read_text().splitlines()
              if ln.strip().startswith("torch==")]
    return pin


def _fresh_clone(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def test_the_getting_started_block_installs_the_pinned_torch(tmp_path):
    need_package_index()  # the block installs torch and the rest from the index (none on an offline GPU host)
    import torch

    if torch.__version__.split("+")[0] != pinned_torch():
        # The block makes a venv of its own and installs constraints.txt's torch there: whatever torch runs the
        # suite, it checks the same thing. CI runs it once, in the pass on the pinned torch (docs/ci.md).
        pytest.skip(f"checks a venv of its own with constraints.txt's torch {pinned_torch()}, the same whatever torch "
                    f"runs the suite (here {torch.__version__}): it runs where the suite runs on the pinned torch")
    block = install_block()
    assert "--find-links dist" in block and "scripts/build-dists.sh" in block
    repo = _fresh_clone(tmp_path / "ezpz")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # PIP_COMPILE=0 (pip's --no-compile; PIP_NO_COMPILE=1 would mean the opposite): the block is pasted as it is,
    # and byte-compiling every module of torch at install (27 s of CPU here) checks nothing about it.
    env = clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(venv),
                    PIP_COMPILE="0")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    check = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch, ezpz; print(torch.__version__); "
                            "print(ezpz.__file__)"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert check.returncode == 0, check.stderr
    version, where = check.stdout.split()
    assert version.split("+")[0] == pinned_torch(), f"torch {version} installed, constraints.txt pins {pinned_torch()}"
    assert where.startswith(str(venv)), where  # the core from the wheel, not this checkout
    plugins = subprocess.run([str(venv / "bin" / "ezpz"), "plugins"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=300)
    for name in ("cuda", "rocm", "xpu"):
        assert re.search(rf"^\s*{name}\s+loaded", plugins.stdout, re.M), plugins.stdout
