"""pytorch/examples' scripts, not edited, through ``python -m ezpz.cuda_compat`` on the CPU and on ``emu``.

The corpus of issue 48: scripts written for CUDA by others, run as a new user would. pytorch/examples is not in
this repository; these tests run only when directories are given, and skip naming the variable otherwise:

- ``EZPZ_PYTORCH_EXAMPLES_DIR``: a checkout at 37a1866 (May 2024, ``torch.cuda`` style). Its MNIST scripts
  need torchvision, and PyPI's torchvision loads only with PyPI's torch of the same release, so they run with
  ``EZPZ_TORCHVISION_PYTHON``: a Python with torch, torchvision, ezpz and ezpz-example-emu installed. The data is
  a small MNIST in torchvision's raw format, made here (tests/pytorch_examples/examples_run.py).
- ``EZPZ_PYTORCH_EXAMPLES_HEAD_DIR``: a checkout of today's head (``torch.accelerator`` style):
  distributed/ddp/example.py (2 ranks) and distributed/tensor_parallelism (4 ranks, a 2-D mesh for FSDP+TP)
  under torchrun, with this interpreter (no torchvision needed).

Each 37a1866 script runs twice under the mode, on the CPU and on emu, and every loss it logs must be equal
between the two: emu computes with the CPU's kernels, and both runs take the script's CUDA path (its shuffling,
workers and seeds), so like is compared with like. Flags keep each run to seconds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

sys.path.insert(0, str(ROOT / "tests" / "pytorch_examples"))
from examples_run import copy_example, losses, same_files, write_mnist  # noqa: E402

OLD = os.environ.get("EZPZ_PYTORCH_EXAMPLES_DIR")
HEAD = os.environ.get("EZPZ_PYTORCH_EXAMPLES_HEAD_DIR")
TV_PYTHON = os.environ.get("EZPZ_TORCHVISION_PYTHON")

#: script folder -> (where it reads MNIST from, relative to the folder or None, its own flags: tiny and CUDA on).
OLD_SCRIPTS: dict[str, tuple[str | None, list[str]]] = {
    "mnist": ("../data", ["--epochs", "1", "--batch-size", "32", "--test-batch-size", "64", "--log-interval", "2"]),
    "vae": ("../data", ["--epochs", "1", "--batch-size", "32", "--log-interval", "2"]),
    "mnist_rnn": ("../data", ["--cuda", "--epochs", "1", "--batch-size", "32", "--test-batch-size", "64",
                              "--log-interval", "2"]),
    "dcgan": (None, ["--dataset", "fake", "--cuda", "--niter", "1", "--batchSize", "8", "--workers", "1",
                     "--manualSeed", "1", "--dry-run", "--outf", "out"]),
    "siamese_network": ("../data", ["--epochs", "1", "--batch-size", "32", "--test-batch-size", "64",
                                    "--log-interval", "2"]),
    "mnist_forward_forward": ("data", ["--epochs", "20", "--train_size", "320", "--test_size", "128"]),
}
#: Scripts that parse ``--seed`` but never seed torch: run through tests/pytorch_examples/seeded_session.py.
UNSEEDED = {"mnist_forward_forward"}
#: One process: with two, Hogwild's lock-free updates race, and two CPU runs already differ.
HOGWILD = ("mnist_hogwild", ["--cuda", "--epochs", "1", "--num-processes", "1", "--batch-size", "32",
                             "--log-interval", "2"])

needs_old = pytest.mark.skipif(
    not OLD or not (Path(OLD) / "mnist" / "main.py").is_file() or not TV_PYTHON,
    reason="set EZPZ_PYTORCH_EXAMPLES_DIR to a pytorch/examples checkout at 37a1866 and EZPZ_TORCHVISION_PYTHON to "
           "a Python with torch, torchvision (same release), ezpz and ezpz-example-emu to run its scripts unedited")
needs_head = pytest.mark.skipif(
    not HEAD or not (Path(HEAD) / "distributed" / "ddp" / "example.py").is_file(),
    reason="set EZPZ_PYTORCH_EXAMPLES_HEAD_DIR to a pytorch/examples checkout (torch.accelerator style) to run "
           "its distributed examples unedited")


def run_old(name: str, data: str | None, args: list[str], device: str, work: Path) -> subprocess.CompletedProcess[str]:
    """Run the 37a1866 script ``name`` under the mode on ``device``, in a copy next to its data."""
    folder = copy_example(Path(OLD), name, work)
    if data is not None:
        write_mnist((folder / data).resolve())
    mode = [str(ROOT / "tests" / "pytorch_examples" / "seeded_session.py"), "1"] if name in UNSEEDED else \
        ["-m", "ezpz.cuda_compat"]
    return subprocess.run([TV_PYTHON, *mode, "main.py", *args], cwd=folder, capture_output=True, text=True,
                          timeout=600, env=clean_env(EZPZ_DEVICE=device, EZPZ_CUDA_COMPAT_DIR=str(work / "report")))


def under_mode(name: str, device: str, work: Path) -> tuple[str, dict]:
    """:func:`run_old` that must succeed with the files unedited; its stdout and its rank-0 report."""
    proc = run_old(name, *OLD_SCRIPTS[name], device, work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert same_files(Path(OLD), name, work)
    return proc.stdout, json.loads((work / "report" / "rank-0.json").read_text())


def assert_equal_losses(cpu: list[float], emu: list[float]) -> None:
    """Equal as printed; one unit in the last printed digit (6 decimals) is allowed for emu's own RNN cells."""
    assert cpu and len(cpu) == len(emu), (cpu, emu)
    worst = max(abs(a - b) / max(abs(a), 1.0) for a, b in zip(cpu, emu))
    assert worst <= 2e-6, list(zip(cpu, emu))


@needs_old
@pytest.mark.parametrize("name", sorted(OLD_SCRIPTS))
def test_example_logs_the_same_losses_on_emu_as_on_the_cpu(name, tmp_path):
    cpu_out, cpu_report = under_mode(name, "cpu", tmp_path / "cpu")
    emu_out, emu_report = under_mode(name, "emu", tmp_path / "emu")
    assert_equal_losses(losses(cpu_out), losses(emu_out))
    assert (cpu_report["device"], emu_report["device"]) == ("cpu", "emu")
    to_emu = [r for r in emu_report["sites"] if r["call"].startswith(("Module.to(", "Tensor.to("))]
    assert to_emu and all(r["became"].startswith(("Module.to('emu", "Tensor.to('emu")) for r in to_emu), to_emu


@needs_old
def test_hogwild_trains_on_the_cpu_and_stops_on_emu_where_torch_cannot_share_its_memory(tmp_path):
    """The model is shared with ``mp.Process`` children: torch shares CPU memory (a file descriptor) and CUDA
    memory (IPC handles), and has no way for a PrivateUse1 device's (torch/multiprocessing/reductions.py)."""
    name, args = HOGWILD
    cpu = run_old(name, "../data", args, "cpu", tmp_path / "cpu")
    assert cpu.returncode == 0, cpu.stdout[-3000:] + cpu.stderr[-5000:]
    assert len(losses(cpu.stdout)) == 6, cpu.stdout  # 5 training lines (logged by the child) and the test loss
    assert re.search(r"[1-9]\d* child process\(es\) reported", cpu.stdout + cpu.stderr), cpu.stderr[-2000:]
    emu = run_old(name, "../data", args, "emu", tmp_path / "emu")
    assert emu.returncode != 0 and "_share_fd_: only available on CPU" in emu.stderr, emu.stderr[-3000:]


def torchrun(folder: Path, script: str, ranks: int, device: str, report: Path) -> str:
    from test_real_launchers import free_port

    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--master-port",
         str(free_port()), "-m", "ezpz.cuda_compat", script], cwd=folder, capture_output=True, text=True, timeout=600,
        env=clean_env(EZPZ_DEVICE=device, EZPZ_CUDA_COMPAT_DIR=str(report)))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    for rank in range(ranks):
        assert json.loads((report / f"rank-{rank}.json").read_text())["device"] == device
    return proc.stdout + proc.stderr


@needs_head
@pytest.mark.launcher
@pytest.mark.parametrize("device", ["cpu", "emu"])
def test_head_ddp_example_trains_on_every_rank(device, tmp_path):
    folder = copy_example(Path(HEAD) / "distributed", "ddp", tmp_path)
    out = torchrun(folder, "example.py", 2, device, tmp_path / "report")
    assert "Unable to locate" not in out, out[-3000:]  # the script exits 0 when it sees fewer than 2 devices
    for rank in (0, 1):
        assert f"training completed in rank {rank}!" in out, out[-3000:]
    assert same_files(Path(HEAD) / "distributed", "ddp", tmp_path)


@needs_head
@pytest.mark.launcher
@pytest.mark.parametrize("device, stop", [
    ("cpu", "aten._scaled_dot_product_flash_attention_for_cpu.default does not have a sharding strategy registered"),
    ("emu", "aten.add.Tensor got mixed torch.Tensor and DTensor")])
def test_head_fsdp_tp_example_stops_at_attention_on_a_dtensor(device, stop, tmp_path):
    """2-D FSDP+TP: the mesh, the parallelized model and the optimizer are made; the first forward stops in
    ``scaled_dot_product_attention`` on DTensors. torch (2.13, 2.14) has DTensor sharding rules for CUDA's
    attention kernels only; emu, like the CPU, has no such kernel and takes the math composite, which mixes a
    plain tensor into the DTensors."""
    folder = copy_example(Path(HEAD) / "distributed", "tensor_parallelism", tmp_path)
    from test_real_launchers import free_port

    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-port", str(free_port()),
         "-m", "ezpz.cuda_compat", "fsdp_tp_example.py"], cwd=folder, capture_output=True, text=True, timeout=600,
        env=clean_env(EZPZ_DEVICE=device, EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report")))
    assert proc.returncode != 0 and "Model after parallelization" in proc.stderr and stop in proc.stderr, \
        proc.stderr[-3000:]


@needs_head
@pytest.mark.launcher
@pytest.mark.parametrize("script, done", [
    ("tensor_parallel_example.py", "Tensor Parallel training completed!"),
    ("sequence_parallel_example.py", "Sequence Parallel training completed!")])
@pytest.mark.parametrize("device", ["cpu", "emu"])
def test_head_tensor_parallel_example_completes_on_four_ranks(script, done, device, tmp_path):
    folder = copy_example(Path(HEAD) / "distributed", "tensor_parallelism", tmp_path)
    out = torchrun(folder, script, 4, device, tmp_path / "report")
    assert "Unable to locate" not in out and done in out, out[-3000:]
    assert same_files(Path(HEAD) / "distributed", "tensor_parallelism", tmp_path)
