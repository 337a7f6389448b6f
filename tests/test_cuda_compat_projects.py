"""Not tuned to one script: small CUDA-only projects of this repository's own (tests/cuda_projects), unedited.

``charlm``: CUDA calls inside the project's own library package, ``torch.cuda.amp``, events, and a whole module
saved and reloaded. ``ddp_snapshot``: snapshots and resumes; here from a snapshot whose storages are tagged
``cuda:1`` (written by saving CPU tensors under a tagger that names ``cuda:1``, so a plain ``torch.load`` on
this CPU-only torch refuses it). Recorded facts and CPU/emu only: nothing here ran on a GPU.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

PROJECTS = ROOT / "tests" / "cuda_projects"
CHARLM = PROJECTS / "charlm" / "train.py"
SNAPSHOT = PROJECTS / "ddp_snapshot" / "train.py"


def compat(script: Path, args: list[str], tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "ezpz.cuda_compat", str(script), *args], cwd=tmp,
                          env=clean_env(EZPZ_PRECISION="fp32", EZPZ_CUDA_COMPAT_DIR=str(tmp / "report"), **env),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


def numbers(pattern: str, text: str) -> dict[int, float]:
    found = {int(k): float(v) for k, v in re.findall(pattern, text)}
    assert found, text
    return found


def close(a: dict[int, float], b: dict[int, float]) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-4 * abs(b[k]) for k in b)


def test_cuda_calls_in_the_projects_own_library_and_a_whole_module_reloaded(tmp_path):
    runs = {}
    for device in ("cpu", "emu"):
        (tmp_path / device).mkdir()
        runs[device] = compat(CHARLM, ["--steps", "20"], tmp_path / device, EZPZ_DEVICE=device)
        assert f"reloaded whole module on {device}: outputs equal True" in runs[device].stdout
    cpu, emu = (numbers(r"step (\d+): loss ([\d.]+)", runs[d].stdout) for d in ("cpu", "emu"))
    assert close(emu, cpu), (emu, cpu)
    assert cpu[20] < 0.8 * cpu[5], cpu  # the repeating text is learnt
    rows = json.loads((tmp_path / "emu" / "report" / "rank-0.json").read_text())["sites"]
    where = {(Path(r["file"]).name, r["call"].split("(")[0]) for r in rows}
    for expected in [("engine.py", "torch.cuda.is_available"), ("engine.py", "torch.cuda.set_device"),
                     ("engine.py", "torch.cuda.get_device_capability"), ("engine.py", "torch.cuda.Event"),
                     ("engine.py", "torch.cuda.amp.autocast"), ("engine.py", "torch.cuda.max_memory_allocated"),
                     ("model.py", "torch.ones"), ("model.py", "torch.arange"), ("train.py", "Module.cuda"),
                     ("train.py", "torch.cuda.amp.GradScaler")]:
        assert expected in where, (expected, sorted(where))
    capability = next(r for r in rows if r["call"] == "torch.cuda.get_device_capability()")
    assert capability["behaves"] == "different" and capability["became"].startswith("(0, 0): emu")


def _cuda_tagged_copy(src: Path, dst: Path) -> None:
    """Re-save ``src`` with every storage tagged ``cuda:1``, as a snapshot written on a second GPU would be."""
    code = ("import sys, torch, torch.serialization as s\n"
            "s.register_package(0, lambda storage: 'cuda:1', lambda storage, location: None)\n"
            "torch.save(torch.load(sys.argv[1]), sys.argv[2])\n")
    subprocess.run([sys.executable, "-c", code, str(src), str(dst)], check=True, timeout=120, env=clean_env())
    refused = subprocess.run([sys.executable, "-c", f"import torch; torch.load({str(dst)!r})"], capture_output=True,
                             text=True, timeout=120, env=clean_env())
    assert refused.returncode != 0 and "CUDA" in refused.stderr, refused.stderr[-2000:]


def test_resume_from_a_snapshot_saved_on_cuda_1(tmp_path):
    loss = r"epoch (\d+): loss ([\d.]+)"
    whole = numbers(loss, compat(SNAPSHOT, ["--epochs", "6"], tmp_path).stdout)
    first = numbers(loss, compat(SNAPSHOT, ["--epochs", "3", "--snapshot", "half.pt"], tmp_path).stdout)
    assert close(first, {k: whole[k] for k in (1, 2, 3)})
    _cuda_tagged_copy(tmp_path / "half.pt", tmp_path / "on-cuda-1.pt")
    rest = numbers(loss, compat(SNAPSHOT, ["--epochs", "6", "--resume", "on-cuda-1.pt"], tmp_path).stdout)
    assert close(rest, {k: whole[k] for k in (4, 5, 6)}), (rest, whole)
    rows = json.loads((tmp_path / "report" / "rank-0.json").read_text())["sites"]
    load = [r for r in rows if r["call"] == "torch.load(map_location=None)"]
    assert load and load[0]["became"] == "storages saved on cuda:1 loaded onto cpu", load
