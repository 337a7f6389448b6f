"""karpathy/nanoGPT's ``train.py``, not edited, through ``python -m ezpz.cuda_compat`` (device left at 'cuda').

Runs only when ``EZPZ_NANOGPT_DIR`` names a nanoGPT checkout (its code is not in this repository); skips
naming the variable otherwise. The files are copied byte for byte next to a low-entropy dataset made here
(tests/nanogpt/nanogpt_run.py). On the CPU and on emu the losses must equal those of the same script run plainly
with ``--device=cpu`` (relative difference < 1e-4 at every logged iteration), the loss must fall, the report
must name each redirected call site, and ``--init_from=resume`` must continue as the plain run continues from
the same checkpoint. Under torchrun the job runs with gloo (cpu) or emuccl (emu) in place of nccl. Nothing here ran on a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, last_json

sys.path.insert(0, str(ROOT / "tests" / "nanogpt"))
from nanogpt_run import ARGS, losses, prepare, same_files  # noqa: E402

CHECKOUT = os.environ.get("EZPZ_NANOGPT_DIR")
pytestmark = pytest.mark.skipif(
    not CHECKOUT or not (Path(CHECKOUT) / "train.py").is_file(),
    reason="set EZPZ_NANOGPT_DIR to a checkout of github.com/karpathy/nanoGPT to run nanoGPT's train.py unedited")


def run(cmd: list[str], work: Path, **env: str) -> str:
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=600,
                          env=clean_env(EZPZ_CUDA_COMPAT_DIR=str(work / "report"), **env))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc.stdout


def assert_equal_losses(got: dict[int, float], want: dict[int, float]) -> None:
    assert got and got.keys() == want.keys(), (sorted(got), sorted(want))
    worst = max(abs(got[i] - want[i]) / want[i] for i in want)
    assert worst < 1e-4, (worst, got, want)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, float]]:
    work = prepare(Path(CHECKOUT), tmp_path_factory.mktemp("plain"))
    found = losses(run([sys.executable, "train.py", "--device=cpu", *ARGS, "--max_iters=20"], work))
    assert found[20] < 0.6 * found[0], found  # the repeating stream is learnt
    return work, found


@pytest.mark.parametrize("device", ["cpu", "emu"])
def test_nanogpt_unedited_equals_its_plain_cpu_run(device, tmp_path, plain):
    work = prepare(Path(CHECKOUT), tmp_path)
    out = run([sys.executable, str(ROOT / "tests" / "scripts" / "cuda_compat_devices.py"), "train.py", *ARGS,
               "--max_iters=20"], work, EZPZ_DEVICE=device)
    assert_equal_losses(losses(out), plain[1])
    assert last_json(out)["param_devices"] == ["cpu" if device == "cpu" else "emu:0"]
    assert same_files(Path(CHECKOUT), work)
    data = json.loads((work / "report" / "rank-0.json").read_text())
    assert data["device"] == device
    lines = (work / "train.py").read_text().splitlines()
    calls = {(lines[r["line"] - 1].strip(), r["call"]) for r in data["sites"] if r["file"].endswith("train.py")}
    for source, call in [
            ("device = 'cuda' # examples: 'cpu', 'cuda', 'cuda:0', 'cuda:1' etc., or try 'mps' on macbooks", None),
            ("model.to(device)", "Module.to('cuda')"),
            ("scaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))", "torch.cuda.amp.GradScaler(enabled=False)"),
            ("torch.backends.cuda.matmul.allow_tf32 = True # allow tf32 on matmul",
             "torch.backends.cuda.matmul.allow_tf32 = True")]:
        if call is not None:
            assert (source, call) in calls, (source, call, sorted(calls))
    assert any(c.startswith("torch.autocast('cuda', dtype=torch.float32)") for _, c in calls), calls
    assert any(c == "Tensor.to('cuda')" for _, c in calls) and any(c == "Tensor.pin_memory()" for _, c in calls)
    if device == "emu":  # emu's plugin keeps weights tied on Module.to (torch's swap mode): nothing to re-tie
        assert not [r for r in data["sites"] if r["call"] == "Module.to: shared parameters"], data["sites"]


def test_nanogpt_resumes_as_the_plain_run_resumes(tmp_path, plain):
    work = prepare(Path(CHECKOUT), tmp_path)
    plain_work = tmp_path / "plain-resume"
    shutil.copytree(plain[0], plain_work)
    resumed_plain = losses(run([sys.executable, "train.py", "--device=cpu", *ARGS, "--max_iters=30",
                                "--init_from=resume"], plain_work))
    shutil.copytree(plain[0] / "out", work / "out")
    resumed = losses(run([sys.executable, "-m", "ezpz.cuda_compat", "train.py", *ARGS, "--max_iters=30",
                          "--init_from=resume"], work))
    assert min(resumed) == 20 and max(resumed) == 30
    assert_equal_losses(resumed, resumed_plain)
    rows = json.loads((work / "report" / "rank-0.json").read_text())["sites"]
    assert any(r["call"] == "torch.load(map_location='cuda')" and r["became"] == "map_location='cpu'" for r in rows)


@pytest.mark.launcher
@pytest.mark.parametrize("device, backend", [("cpu", "gloo"), ("emu", "emuccl")])
def test_nanogpt_under_torchrun_runs_with_gloo_or_emuccl(device, backend, tmp_path):
    from test_real_launchers import free_port

    work = prepare(Path(CHECKOUT), tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
         "-m", "ezpz.cuda_compat", "train.py", *ARGS, "--max_iters=10", "--gradient_accumulation_steps=2"],
        cwd=work, capture_output=True, text=True, timeout=600,
        env=clean_env(EZPZ_DEVICE=device, EZPZ_CUDA_COMPAT_DIR=str(work / "report")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    found = losses(proc.stdout)
    assert found[10] < found[0], found
    for rank in (0, 1):
        data = json.loads((work / "report" / f"rank-{rank}.json").read_text())
        assert data["backend"] == backend
        rows = {r["call"]: r for r in data["sites"]}
        assert rows["init_process_group('nccl')"]["became"].startswith(f"the group setup() made ({backend}, 2 ranks)")
        assert rows[f"DistributedDataParallel(device_ids=[{rank}])"]["behaves"] == "same"
        assert rows[f"torch.cuda.set_device('cuda:{rank}')"]["behaves"] == "none"
