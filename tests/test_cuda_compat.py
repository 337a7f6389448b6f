"""``python -m ezpz.cuda_compat`` runs the CUDA-only trainer (tests/scripts/cuda_style_trainer.py) unedited.

On this host (no GPU) the device is the CPU or ``emu`` (EZPZ_DEVICE=emu, the example plugin's real PrivateUse1
device): the losses must equal those of the hand-ported script run plainly on the CPU, the model's parameters
must live on the chosen device (read from the script's globals after it ran), and the report must name each
redirected call site. ``EZPZ_PRECISION=fp32`` pins the precision for both runs, so a host whose CPU has native
bf16 compares like with like (the mode keeps a dtype the script names; the run's precision wins over it).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, last_json

SCRIPTS = ROOT / "tests" / "scripts"
TRAINER = SCRIPTS / "cuda_style_trainer.py"
PORTED = SCRIPTS / "cuda_style_trainer_ported.py"
ARGS = ["--max-iters", "10", "--log-interval", "2"]
LOSS = re.compile(r"iter (\d+): loss ([\d.]+)")


def losses(stdout: str) -> dict[int, float]:
    found = {int(i): float(v) for i, v in LOSS.findall(stdout)}
    assert found, f"no loss lines in:\n{stdout}"
    return found


def assert_same_losses(got: dict[int, float], want: dict[int, float]) -> None:
    assert got.keys() == want.keys()
    for i in want:
        assert abs(got[i] - want[i]) / abs(want[i]) < 1e-4, (i, got[i], want[i])


def run(cmd: list[str], tmp: Path, timeout: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=tmp, env=clean_env(EZPZ_PRECISION="fp32", EZPZ_CUDA_COMPAT_DIR=str(tmp / "report"),
                                                      **env),
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


@pytest.fixture(scope="module")
def plain_cpu_losses(tmp_path_factory: pytest.TempPathFactory) -> dict[int, float]:
    """The hand-ported trainer, run plainly on the CPU: the reference."""
    tmp = tmp_path_factory.mktemp("plain")
    return losses(run([sys.executable, str(PORTED), *ARGS], tmp).stdout)


def report_rows(tmp: Path, rank: int = 0) -> tuple[dict, list[dict]]:
    data = json.loads((tmp / "report" / f"rank-{rank}.json").read_text())
    return data, data["sites"]


@pytest.mark.parametrize("device", ["cpu", "emu"])
def test_unedited_cuda_trainer_runs_on_the_chosen_device_with_the_plain_losses(device, tmp_path, plain_cpu_losses):
    proc = run([sys.executable, str(SCRIPTS / "cuda_compat_devices.py"), str(TRAINER), *ARGS], tmp_path,
               EZPZ_DEVICE=device)
    assert_same_losses(losses(proc.stdout), plain_cpu_losses)
    assert last_json(proc.stdout)["param_devices"] == [device if device == "cpu" else "emu:0"]

    data, rows = report_rows(tmp_path)
    assert data["redirecting"] and data["device"] == device
    assert {r["file"] for r in rows} == {str(TRAINER)}
    by_source = {(r["source"], r["call"].split("(")[0]): r for r in rows}
    lines = TRAINER.read_text().splitlines()

    def row(source_part: str, call: str) -> dict:
        found = [r for (s, c), r in by_source.items() if source_part in s and c == call]
        assert found, f"no report row for {call} at a line with {source_part!r}: {sorted(by_source)}"
        assert lines[found[0]["line"] - 1].strip() == found[0]["source"]
        return found[0]

    assert row("dtype = 'bfloat16'", "torch.cuda.is_available")["behaves"] == "different"
    assert row("dtype = 'bfloat16'", "torch.cuda.is_bf16_supported")["behaves"] == "same"
    assert row("model = GPT(", "Module.to")["became"] == f"Module.to({data['device']!r})"
    to = row("return x.to(device), y.to(device)", "Tensor.to")
    assert to["count"] == 2 * 10  # x and y, every iteration
    assert "enabled=False" in row("ctx = nullcontext()", "torch.autocast")["became"]  # fp32 for this run
    assert row("scaler = torch.amp.GradScaler", "torch.amp.GradScaler")["became"].startswith(
        f"torch.amp.GradScaler({device!r}")


def test_the_cli_prints_one_summary_line_and_keeps_the_scripts_exit_status(tmp_path):
    script = tmp_path / "leave.py"
    script.write_text("import sys, torch\nx = torch.zeros(2, device='cuda')\nprint(x.device)\nsys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-m", "ezpz.cuda_compat", str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=clean_env(EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report")))
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.strip() == "cpu"
    summary = [line for line in proc.stderr.splitlines() if line.startswith("ezpz.cuda_compat:")]
    assert summary == [f"ezpz.cuda_compat: 1 CUDA calls at 1 call sites redirected to cpu (1 same, 0 different, "
                       f"0 not at all); report {tmp_path / 'report' / 'rank-0.json'}"]


def test_explain_says_the_mode_is_on(tmp_path):
    script = tmp_path / "explain.py"
    script.write_text("import ezpz\nprint(str(ezpz.hooks.get_runtime().explain()))\n")
    proc = run([sys.executable, "-m", "ezpz.cuda_compat", str(script)], tmp_path)
    assert "lifecycle: cuda-compat" in proc.stdout
    assert f"CUDA-compat mode on (python -m ezpz.cuda_compat explain.py): CUDA requests from the files under {tmp_path}" \
        in proc.stdout
