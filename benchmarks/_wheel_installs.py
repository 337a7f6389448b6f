"""The installs users have, made from this checkout's wheels, for the cold-start benchmarks.

Two venvs, each with torch (pinned by constraints.txt) and accelerate 1.15.0 (what scripts/test.sh installs)
installed normally, and ezpz from ``scripts/build-dists.sh``'s wheels (no editable finder):

* ``core+xpu``: the core with one vendor plugin, as ``pip install ezpz ezpz-xpu`` gives;
* ``core+all``: the core with every plugin of this repository.

The venvs are made once under ``$EZPZ_BENCH_VENVS`` (default ``~/.cache/ezpz-bench``) and reused; the wheels
are rebuilt and reinstalled on every run, so the figures are always this checkout's. Bytecode caches are on in
the children (``_util.CHILD_ENV``), as users have them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ACCELERATE = "accelerate==1.15.0"
PLUGINS = ("ezpz_cuda", "ezpz_rocm", "ezpz_xpu", "ezpz_tpu", "ezpz_example_hpu", "ezpz_example_emu")
INSTALLS = {"core+xpu": ("ezpz", "ezpz_xpu"), "core+all": ("ezpz", *PLUGINS)}
#: The third-party plugins of this repository (entry-point names), for the EZPZ_DISABLE_PLUGINS comparison.
THIRD_PARTY = "example-emu,example-hpu,tpu"


def _run(*cmd: str | Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PIP_REQUIRE_VIRTUALENV")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_ROOT_USER_ACTION="ignore")
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def torch_pin() -> str:
    pins = (ROOT / "constraints.txt").read_text()
    found = re.search(r"^torch==\S+", pins, re.M)
    if found is None:
        sys.exit("constraints.txt pins no torch")
    return found.group(0)


def build_wheels(out: Path) -> dict[str, Path]:
    """``scripts/build-dists.sh`` into ``out``; {import name of the distribution: its wheel}."""
    _run("env", f"PYTHON={os.environ.get('PYTHON') or sys.executable}", "bash", ROOT / "scripts" / "build-dists.sh", out)
    wheels = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    missing = [d for d in ("ezpz", *PLUGINS) if d not in wheels]
    if missing:
        sys.exit(f"build-dists.sh made no wheel for {missing}")
    return wheels


def make_installs(names: tuple[str, ...] = tuple(INSTALLS)) -> dict[str, Path]:
    """{install name: its venv's python}, each venv holding exactly that install's ezpz wheels."""
    base = Path(os.environ.get("EZPZ_BENCH_VENVS") or Path.home() / ".cache" / "ezpz-bench")
    wheels = build_wheels(base / "dist")
    pythons = {}
    for name in names:
        venv = base / name.replace("+", "-")
        py = venv / "bin" / "python"
        marker = venv / "ezpz-bench-pins.txt"
        pins = f"{torch_pin()}\n{ACCELERATE}\n"
        if not py.exists() or not marker.exists() or marker.read_text() != pins:
            _run(sys.executable, "-m", "venv", "--clear", venv)
            _run(py, "-m", "pip", "install", "-q", "-c", ROOT / "constraints.txt", torch_pin(), ACCELERATE)
            # the core's dependencies (pluggy, attrs, ...) from the index, the core itself from its wheel
            _run(py, "-m", "pip", "install", "-q", "-c", ROOT / "constraints.txt", wheels["ezpz"])
            marker.write_text(pins)
        extra = [d.replace("_", "-") for d in PLUGINS if d not in INSTALLS[name]]
        if extra:  # a reused venv: only this install's plugins
            _run(py, "-m", "pip", "uninstall", "-q", "-y", *extra)
        _run(py, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", *(wheels[d] for d in INSTALLS[name]))
        pythons[name] = py
    return pythons


def rerun_in_each(script: str, names: tuple[str, ...] = tuple(INSTALLS)) -> None:
    """Run ``script`` (a benchmark under benchmarks/) with each install's Python, one after the other."""
    for name, py in make_installs(names).items():
        print(f"\n=== {name}: {' '.join(INSTALLS[name])} (wheels), {torch_pin()}, {ACCELERATE} ===", flush=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["EZPZ_BENCH_INSTALL"] = name
        subprocess.run([str(py), str(ROOT / "benchmarks" / script), "--in-venv"], check=True, env=env, cwd=ROOT)
