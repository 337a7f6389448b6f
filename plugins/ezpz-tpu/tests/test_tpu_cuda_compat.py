"""``python -m ezpz.cuda_compat`` on XLA's CPU runtime: CUDA-only scripts, unedited, on a lazy device.

Needs torch_xla (the venv scripts/xla-suite.sh makes); skips naming why elsewhere. The trainer is the
repository's CUDA-only one (tests/scripts/cuda_style_trainer.py); karpathy/nanoGPT's ``train.py`` runs only
when ``EZPZ_NANOGPT_DIR`` names a checkout (its code is not in this repository). On XLA the first loss equals
the plain CPU run's and the loss falls; the parameters live on ``xla``; the step boundary comes from the
optimizer-step hook (the scripts never call ``rt.step()``). Ran on XLA's CPU runtime only, not on a TPU.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch_xla", reason="torch_xla is not installed: the live xla runs need the venv "
                                         "scripts/xla-suite.sh makes (torch 2.9.0 + torch-xla 2.9.0)")

pytestmark = pytest.mark.xla
ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "tests" / "scripts"
LOSS = re.compile(r"^iter (\d+): loss ([\d.]+)", re.MULTILINE)


def run(cmd: list[str], cwd: Path, device: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("EZPZ_", "PJRT_"))}
    environ.update(OMP_NUM_THREADS="1", PJRT_DEVICE="CPU", EZPZ_DEVICE=device,
                   EZPZ_CUDA_COMPAT_DIR=str(cwd / f"report-{device}"))
    proc = subprocess.run([sys.executable, *cmd], cwd=cwd, env=environ, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def losses(stdout: str) -> dict[int, float]:
    found = {int(i): float(v) for i, v in LOSS.findall(stdout)}
    assert found, stdout[-3000:]
    return found


def sites(cwd: Path) -> list[dict]:
    return json.loads((cwd / "report-xla" / "rank-0.json").read_text())["sites"]


def test_unedited_cuda_trainer_on_xla_starts_at_the_cpu_loss_and_learns(tmp_path):
    args = ["--max-iters", "10", "--log-interval", "2"]
    cpu = losses(run([str(SCRIPTS / "cuda_style_trainer_ported.py"), *args], tmp_path, "cpu"))
    out = run([str(SCRIPTS / "cuda_compat_devices.py"), str(SCRIPTS / "cuda_style_trainer.py"), *args],
              tmp_path, "xla")
    got = losses(out)
    assert got.keys() == cpu.keys()
    first = min(cpu)
    assert abs(got[first] - cpu[first]) / cpu[first] < 1e-4, (got, cpu)
    assert got[max(got)] < got[first], got
    assert json.loads(out.strip().splitlines()[-1])["param_devices"] == ["xla:0"]
    calls = {r["call"] for r in sites(tmp_path)}
    assert "Module.to('cuda')" in calls or any(c.startswith("Module.to") for c in calls), calls


@pytest.mark.skipif(not os.environ.get("EZPZ_NANOGPT_DIR"),
                    reason="set EZPZ_NANOGPT_DIR to a checkout of github.com/karpathy/nanoGPT to run its train.py")
def test_nanogpt_unedited_on_xla_first_loss_as_cpu_and_falls(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "nanogpt"))
    from nanogpt_run import ARGS, prepare, same_files

    checkout = Path(os.environ["EZPZ_NANOGPT_DIR"])
    plain = prepare(checkout, tmp_path / "plain")
    cpu = losses(run(["train.py", "--device=cpu", *ARGS, "--max_iters=20"], plain, "cpu"))
    work = prepare(checkout, tmp_path / "xla")
    start = time.monotonic()
    got = losses(run(["-m", "ezpz.cuda_compat", "train.py", *ARGS, "--max_iters=20"], work, "xla"))
    took = time.monotonic() - start
    assert abs(got[0] - cpu[0]) / cpu[0] < 1e-4, (got, cpu)
    assert got[20] < 0.6 * got[0], got
    assert (work / "out" / "ckpt.pt").is_file() and same_files(checkout, work)
    calls = {r["call"] for r in sites(work)}
    assert "torch.optim.AdamW(fused=True)" in calls, calls  # nanoGPT asks for fused AdamW on 'cuda'
    assert "Module.to: shared parameters" in calls, calls  # wte/lm_head re-tied after the move to xla
    print(f"nanoGPT, 20 iterations with eval and checkpoints at 10 and 20, on xla: {took:.0f} s")
