"""``ezpz port`` on whole CUDA-only scripts: its output reads like the hand port and runs like it.

The trainer (tests/scripts/cuda_style_trainer.py) against its careful hand port; the small projects of
tests/scripts/cuda_projects (CUDA calls in the project's own library modules, a whole module saved and loaded
back, a resume from a snapshot written on cuda:1). Runs on the CPU, and on the emulated ``emu`` device
(plugins/ezpz-example-emu) where it is installed; no real GPU here.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, skip_or_fail_in_ci

pytestmark = pytest.mark.one_torch  # source rewriting (ezpz port): runs on the pinned torch only (docs/ci.md)

if importlib.util.find_spec("libcst") is None:
    skip_or_fail_in_ci('libcst is not installed (pip install -e ".[port]")',
                       'CI must install ezpz[port] (libcst) for the ezpz port tests: scripts/test.sh')

SCRIPTS = ROOT / "tests" / "scripts"
TRAINER = SCRIPTS / "cuda_style_trainer.py"
HAND_PORT = SCRIPTS / "cuda_style_trainer_ported.py"
PROJECTS = SCRIPTS / "cuda_projects"
LOSS = re.compile(r"^(iter|step) (\d+):.*?loss ([0-9.]+)", re.MULTILINE)


def ezpz_port(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ezpz", "port", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def run(script: Path, *args: str, device: str = "cpu", cwd: Path | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EZPZ_")}
    env.update(OMP_NUM_THREADS="1", EZPZ_DEVICE=device)
    proc = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def losses(stdout: str) -> dict[tuple[str, int], float]:
    found = {(kind, int(step)): float(value) for kind, step, value in LOSS.findall(stdout)}
    assert found, stdout[-2000:]
    return found


def assert_same_losses(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert abs(got[key] - value) <= 1e-4 * abs(value), (key, got[key], value)


def need_emu() -> None:
    if importlib.util.find_spec("ezpz_example_emu") is None:
        skip_or_fail_in_ci("ezpz-example-emu is not installed here (scripts/test.sh installs it)",
                           "ezpz-example-emu must be installed in CI (scripts/test.sh)")


@pytest.fixture(scope="module")
def ported_trainer(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trainer") / "cuda_style_trainer.py"
    proc = ezpz_port(TRAINER, "-o", out)
    assert proc.returncode == 0, proc.stderr
    return out


def _code(path: Path) -> list[str]:
    import ast

    text = path.read_text(encoding="utf-8")
    return text.splitlines()[ast.parse(text).body[0].end_lineno:]  # after the module docstring


def test_the_trainer_ported_reads_like_its_hand_port(ported_trainer):
    """Line for line the hand port, but for torch.save, which becomes rt.save (a lazy device's host copy)."""
    diff = [d for d in difflib.ndiff(_code(HAND_PORT), _code(ported_trainer)) if d[:2] in ("- ", "+ ")]
    assert diff == [
        "-         torch.save(checkpoint, os.path.join(config.out_dir, 'ckpt.pt'))",
        "+         rt.save(checkpoint, os.path.join(config.out_dir, 'ckpt.pt'))",
    ]
    report = json.loads(ported_trainer.with_name("cuda_style_trainer.port-report.json").read_text())
    rules = sorted(c["rule"] for c in report["files"][0]["changes"])
    assert rules == ["added", "added", "backend", "device", "dtype-choice", "save"]
    assert report["counts"]["unported"] == report["counts"]["unknown"] == 0
    assert ezpz_port(ported_trainer).stdout == ""  # porting the port: no diff


TRAINER_ARGS = ("--max-iters", "10", "--eval-interval", "6", "--log-interval", "1")


def test_the_ported_trainer_runs_on_cpu_with_the_hand_ports_losses(ported_trainer, tmp_path):
    ours = run(ported_trainer, *TRAINER_ARGS, "--out-dir", str(tmp_path / "a"))
    hand = run(HAND_PORT, *TRAINER_ARGS, "--out-dir", str(tmp_path / "b"))
    assert "device cpu backend gloo" in ours.stdout
    assert_same_losses(losses(ours.stdout), losses(hand.stdout))
    assert (tmp_path / "a" / "ckpt.pt").is_file()


def test_the_ported_trainer_runs_on_emu_with_the_hand_ports_losses(ported_trainer, tmp_path):
    need_emu()
    ours = run(ported_trainer, *TRAINER_ARGS, "--out-dir", str(tmp_path / "a"), device="emu", timeout=600)
    hand = run(HAND_PORT, *TRAINER_ARGS, "--out-dir", str(tmp_path / "b"), device="emu", timeout=600)
    assert "device emu backend emuccl" in ours.stdout
    assert_same_losses(losses(ours.stdout), losses(hand.stdout))


def _port_project(tmp_path: Path) -> Path:
    out = tmp_path / "ported"
    proc = ezpz_port(PROJECTS / "lib_project", "-o", out)
    assert proc.returncode == 0, proc.stderr
    return out


def test_a_project_with_cuda_in_its_library_modules_is_ported_as_a_directory(tmp_path):
    out = _port_project(tmp_path)
    report = json.loads((out / "ezpz-port-report.json").read_text())
    assert {f["path"]: f["status"] for f in report["files"]} == {
        "train.py": "ported", "lib/__init__.py": "unchanged", "lib/data.py": "ported",
        "lib/dist_utils.py": "ported", "lib/model.py": "ported"}
    assert report["counts"]["unported"] == report["counts"]["unknown"] == 0
    for module in ("lib/data.py", "lib/model.py", "lib/dist_utils.py"):
        text = (out / module).read_text()
        assert "rt = ezpz.hooks.get_runtime() or ezpz.hooks.setup()" in text and ".cuda" not in text
    assert "torch.cuda.set_device" not in (out / "lib/dist_utils.py").read_text()
    assert (out / "ezpz-port-report.txt").read_text().startswith("ezpz port ")
    again = ezpz_port(out)
    assert again.returncode == 0 and again.stdout == ""  # idempotent
    cpu = losses(run(out / "train.py", cwd=out).stdout)
    assert cpu[("step", 30)] < 0.25 * cpu[("step", 5)]  # it learns
    if importlib.util.find_spec("ezpz_example_emu") is not None:
        assert_same_losses(losses(run(out / "train.py", cwd=out, device="emu", timeout=600).stdout), cpu)


def test_a_whole_saved_module_is_loaded_back_onto_the_chosen_device(tmp_path):
    out = tmp_path / "whole_module.py"
    assert ezpz_port(PROJECTS / "whole_module.py", "-o", out).returncode == 0
    text = out.read_text()
    assert "torch.load(args.path, weights_only=False, map_location=rt.device)" in text
    proc = run(out, "--path", str(tmp_path / "net.pt"))
    assert "reloaded on cpu: same outputs True" in proc.stdout
    steps = losses(proc.stdout)
    assert steps[("step", 20)] < 0.5 * steps[("step", 5)]


_CUDA_SNAPSHOT = """
import sys, torch
# Tag every storage 'cuda:1', as torch.save does on a job's second GPU (its location tagger, ahead of the CPU's).
torch.serialization.register_package(0, lambda obj: 'cuda:1', lambda obj, location: None)
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'step': 10}, sys.argv[1])
try:  # loaded as the CUDA script loads it, here where CUDA is absent
    torch.load(sys.argv[1])
except RuntimeError as error:
    print('refused:', error)
"""


def test_a_snapshot_saved_on_cuda_1_resumes_on_the_chosen_device(tmp_path):
    snapshot = tmp_path / "snap.pt"
    made = subprocess.run([sys.executable, "-c", _CUDA_SNAPSHOT, str(snapshot)], capture_output=True, text=True,
                          check=True, timeout=120)
    assert "refused:" in made.stdout and "CUDA" in made.stdout  # the file is tied to a GPU, as a real one would be
    out = tmp_path / "snapshot_resume.py"
    assert ezpz_port(PROJECTS / "snapshot_resume.py", "-o", out).returncode == 0
    assert "snapshot = torch.load(args.snapshot, map_location=rt.device)" in out.read_text()
    proc = run(out, "--snapshot", str(snapshot))
    assert "resumed at step 10" in proc.stdout and ("step", 20) in losses(proc.stdout)


def test_without_o_it_shows_a_diff_and_writes_nothing(tmp_path):
    script = tmp_path / "s.py"
    source = "import torch\nx = torch.ones(1).cuda()\nprint(torch.cuda.get_device_name())\n"
    script.write_text(source)
    proc = ezpz_port(script)
    assert proc.returncode == 1  # a line needs a hand: get_device_name
    assert "+x = torch.ones(1).to(rt.device)" in proc.stdout and "-x = torch.ones(1).cuda()" in proc.stdout
    assert "could not port: print(torch.cuda.get_device_name())" in proc.stderr
    assert script.read_text() == source and sorted(p.name for p in tmp_path.iterdir()) == ["s.py"]
    as_json = json.loads(ezpz_port(script, "--json").stdout)
    assert as_json["counts"]["unported"] == 1 and as_json["files"][0]["unported"][0]["line"] == 3


def test_in_place_and_the_refusals(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import torch\nx = torch.ones(1).cuda()\n")
    (tmp_path / "taken.py").write_text("")
    refused = ezpz_port(script, "-o", tmp_path / "taken.py")
    assert refused.returncode == 2 and "already exists" in refused.stderr and "--force" in refused.stderr
    assert ezpz_port(tmp_path / "nope.py").returncode == 2
    (tmp_path / "py2.py").write_text("print 'hello'\n")
    unparsable = ezpz_port(tmp_path / "py2.py", "-o", tmp_path / "out.py")
    assert unparsable.returncode == 2 and "cannot be ported" in unparsable.stderr
    assert not (tmp_path / "out.py").exists()
    proc = ezpz_port(script, "--in-place")
    assert proc.returncode == 0 and "x = torch.ones(1).to(rt.device)" in script.read_text()


def test_without_libcst_it_says_which_extra_to_install(monkeypatch, capsys, tmp_path):
    import ezpz.porting
    from ezpz.cli import main

    monkeypatch.setattr(ezpz.porting, "libcst_missing", lambda: True)
    (tmp_path / "s.py").write_text("")
    assert main(["port", str(tmp_path / "s.py")]) == 2
    err = capsys.readouterr().err
    assert "needs libcst" in err and 'pip install "ezpz[port]"' in err
