"""The TPU plugin for real, on XLA's CPU runtime: needs torch_xla (scripts/xla-suite.sh makes that venv).

Each test runs a real process (the main job, the portable script, every Runtime call, checkpoint and
resume, ezpz doctor) with ``PJRT_DEVICE=CPU``. In a venv without torch_xla they skip, naming why; the
recorded-facts tests (test_tpu_recorded.py) run there instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch_xla", reason="torch_xla is not installed: the live xla runs need the venv "
                                         "scripts/xla-suite.sh makes (torch 2.9.0 + torch-xla 2.9.0)")

pytestmark = pytest.mark.xla
ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = Path(__file__).parent / "scripts"
TIMEOUT = 600


EZPZ = str(Path(sys.executable).parent / "ezpz")


def run(args: list[str], *, device: str | None = "xla", cwd: Path | None = None, **env: str):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("EZPZ_", "PJRT_"))}
    environ.update({"OMP_NUM_THREADS": "1", "PJRT_DEVICE": "CPU"})
    environ.update(env)
    if device is not None:
        environ["EZPZ_DEVICE"] = device
    cmd = args if args[0] == EZPZ else [sys.executable, *args]
    proc = subprocess.run(cmd, env=environ, cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


RECOMPILES = "graph_recompiles_every_step"


def test_main_job_on_xla():
    proc = run(["-m", "ezpz.examples.train", "--steps", "20"])
    first = proc.stdout.splitlines()[0]
    assert "device xla (google)" in first, first
    assert "done: loss" in proc.stdout
    assert RECOMPILES not in proc.stderr, proc.stderr[-2000:]  # one graph per step, reused


def test_cpu_is_the_default_and_the_trace_says_why_not_xla():
    proc = run([EZPZ, "doctor"], device=None, PJRT_DEVICE="")
    text = proc.stdout
    assert re.search(r"^\s*device: cpu$", text, re.MULTILINE), text
    assert re.search(r"not xla \[tpu\]: priority -10 \(google\): XLA on its CPU runtime .*never the default; "
                     r"EZPZ_DEVICE=xla chooses it", text), text


def test_doctor_names_the_xla_device_and_its_plugin():
    text = run([EZPZ, "doctor"]).stdout
    assert re.search(r"^\s*device: xla$", text, re.MULTILINE) and re.search(r"^\s*plugin: tpu$", text, re.MULTILINE)
    assert "step: Runtime.step() calls torch_xla.sync()" in text


def test_every_runtime_call_on_xla():
    proc = run([str(SCRIPTS / "runtime_check.py")])
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (got["device"], got["param_device"]) == ("xla", "xla:0")
    assert got["autocast_dtype"] == "torch.bfloat16" and got["grad_scaler_enabled"] is False
    assert got["steps"] == 3 and got["losses_fall"]
    assert got["profiler_ranges"] == ["backward", "forward"]  # rt.range under rt.profiler()
    assert "host_peak_rss_bytes" in got["memory_stats"]
    assert got["compile_backend"] == "openxla" and got["compiled_output_device"] == "xla:0"
    assert got["explain_device"] == "xla" and "plugin: tpu" in got["explain_text"]
    assert any(f.endswith(".xplane.pb") for f in got["xla_trace_files"]), got["xla_trace_files"]  # torch_xla's trace


def test_checkpoint_save_and_resume_on_xla(tmp_path):
    ck = tmp_path / "ck"
    run(["-m", "ezpz.examples.train", "--steps", "10", "--checkpoint-dir", str(ck), "--checkpoint-every", "5"])
    assert sorted(p.name for p in ck.iterdir()) == ["step-00000005.pt", "step-00000010.pt"]
    proc = run(["-m", "ezpz.examples.train", "--steps", "15", "--checkpoint-dir", str(ck), "--checkpoint-every", "5"])
    assert "resumed from the step-10 checkpoint" in proc.stdout and "device xla (google)" in proc.stdout


def test_portable_script_on_xla(tmp_path):
    page = (ROOT / "docs" / "portable-script.md").read_text(encoding="utf-8")
    code = re.search(r'```python title="portable_train.py"\n(.*?)```', page, re.DOTALL)
    assert code, "docs/portable-script.md has no portable_train.py block"
    script = tmp_path / "portable_train.py"
    script.write_text(code.group(1), encoding="utf-8")
    proc = run([str(script), "--steps", "10", "--save", "final.pt"], cwd=tmp_path)
    assert re.search(r"^device: xla$", proc.stdout, re.MULTILINE), proc.stdout[:2000]
    assert RECOMPILES not in proc.stderr, proc.stderr[-2000:]
    import torch

    saved = torch.load(tmp_path / "final.pt", weights_only=True)  # rt.save: host tensors, in one transfer
    assert saved["optimizer"]["state"] and all(t.device.type == "cpu" for t in saved["model"].values())


def test_ported_cuda_style_trainer_on_xla(tmp_path):
    """The CUDA-style trainer, ported (no rt.step()), 40 iterations with its plain torch.save at iteration 20.

    ezpz's optimizer step hook cuts XLA's graph after every optimizer.step(): one graph per step, compiled
    once and reused. count_compiles.py reports torch_xla's compilations between consecutive optimizer steps.
    """
    proc = run([str(SCRIPTS / "count_compiles.py"), str(ROOT / "tests" / "scripts" / "cuda_style_trainer_ported.py"),
                "--max-iters", "40", "--eval-interval", "20", "--log-interval", "10", "--out-dir", str(tmp_path)])
    assert "device xla backend gloo dtype bfloat16" in proc.stdout and "iter 40: loss" in proc.stdout
    assert "step 20: val loss" in proc.stdout and "saving checkpoint" in proc.stdout
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    after_warmup = counts["per_step"][2:]  # steps 1 and 2 compile (step 2: AdamW's state exists from then on)
    print(f"compilations after warm-up: {sum(after_warmup)} in {len(after_warmup)} steps; per step {after_warmup}; "
          f"total {counts['total']}, {counts['compile_s']} s compiling")
    # The eval graph (iterations 20 and 40) and the last step (the cosine lr reaches 0.0 there, a scalar torch_xla
    # bakes in as a constant) may compile; every other step reuses its graph. Without the hook: one per step.
    assert sum(after_warmup) <= 3, counts
    assert RECOMPILES not in proc.stderr, proc.stderr[-2000:]
    import torch

    ckpt = torch.load(tmp_path / "ckpt.pt", map_location="cpu", weights_only=False)  # the plain torch.save
    assert ckpt["iter_num"] == 40 and ckpt["optimizer"]["state"]


def test_a_graph_that_recompiles_every_step_is_named_on_xla():
    proc = run([str(SCRIPTS / "recompiling_loop.py")])
    assert "done: loss" in proc.stdout
    said = [line for line in proc.stderr.splitlines() if RECOMPILES in line]
    assert len(said) == 1, proc.stderr[-3000:]
    print(said[0])
    assert "steps=5 compiles=" in said[0] and "compile_s_per_step=" in said[0]
    # the exponent, step to step (measured: the backward's gamma - 1, "f32[] constant(0.7) -> constant(0.65)")
    assert re.search(r"f32\[\] constant\(\d\.\d+\) -> constant\(\d\.\d+\)", said[0]), said[0]
    assert "in a tensor on the device" in said[0]


def test_conformance_kit_live_mode_passes_on_xla():
    """check_plugin(live=True) drives every runtime call through a real setup() on XLA's CPU runtime."""
    from ezpz.testing.live import LIVE_CHECKS

    code = ("import json; from ezpz.testing import check_plugin; "
            "r = check_plugin('tpu', environ={'EZPZ_DEVICE': 'xla', 'PJRT_DEVICE': 'CPU'}, live=True); "
            "print(json.dumps([[x.name, x.passed, x.skipped, x.detail] for x in r.results]))")
    proc = run(["-c", code])
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    failed = [r for r in results if not r[1]]
    assert not failed, failed
    live = {name: (skipped, detail) for name, _, skipped, detail in results if name.startswith("live")}
    ranks = live.pop("live ranks")  # the kit's 2-rank checks: skipped on a device without a torch device module
    assert ranks[0] and "torch has no device module for 'xla'" in ranks[1], ranks
    assert list(live) == list(LIVE_CHECKS), live
    assert not any(skipped for skipped, _ in live.values()), live
    assert live["live setup"][1].startswith("device xla, backend "), live["live setup"]
    assert live["live autocast"][1] == "a Linear under rt.autocast() gives torch.bfloat16", live["live autocast"]
    assert live["live compile"][1].startswith("openxla"), live["live compile"]


def test_rt_shard_refuses_on_xla_naming_spmd():
    """FSDP2 does not run on xla tensors: ``rt.shard`` says so by name, with torch_xla's SPMD as the way."""
    code = ("import torch, ezpz\nfrom ezpz.errors import UnavailableError\nrt = ezpz.hooks.setup()\n"
            "try:\n    rt.shard(torch.nn.Linear(2, 2))\nexcept UnavailableError as err:\n    print('REFUSED:', err)\n"
            "ezpz.hooks.teardown()\n")
    proc = run(["-c", code])
    said = proc.stdout
    assert "REFUSED:" in said and "rt.shard(model)" in said and "FSDP2 on xla" in said, said
    assert "SPMD" in said, said
