"""Child processes carry the mode: ``mp.spawn`` DDP children, and a child under each ``multiprocessing`` start method.

``tests/cuda_projects/spawn_ddp/train.py`` spawns ``torch.cuda.device_count()`` children (or the count given),
each calling ``torch.cuda.set_device(rank)``, ``init_process_group('nccl', ...)`` and ``.cuda(rank)``, with a
DataLoader worker asking ``torch.cuda.is_available()``: without the mode it dies in the child on a host without
CUDA. Under it the run completes on ``emu`` and on the CPU, the children's parameters on the chosen device, one
report per child, and rank 0's summary line counts them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import ROOT, clean_env, last_json

SPAWN_DDP = ROOT / "tests" / "cuda_projects" / "spawn_ddp" / "train.py"

METHODS = textwrap.dedent("""\
    import json, multiprocessing as mp, torch

    def child(q):
        q.put([torch.cuda.is_available(), torch.zeros(1).cuda().device.type])

    if __name__ == "__main__":
        seen = {}
        for method in ("spawn", "forkserver", "fork"):
            ctx = mp.get_context(method)
            q = ctx.Queue()
            p = ctx.Process(target=child, args=(q,))
            p.start()
            seen[method] = q.get(timeout=120)
            p.join(timeout=120)
        print(json.dumps(seen))
    """)


def compat(args: list[str], cwd, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "ezpz.cuda_compat", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=clean_env(EZPZ_PRECISION="fp32", **env))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-5000:]
    return proc


def test_mp_spawn_ddp_children_run_on_the_chosen_device(tmp_path):
    runs = {}
    for device, nprocs in (("emu", []), ("cpu", ["2"])):
        report = tmp_path / f"report-{device}"
        proc = compat([str(SPAWN_DDP), str(tmp_path / f"{device}.json"), *nprocs], tmp_path, EZPZ_DEVICE=device,
                      EZPZ_CUDA_COMPAT_DIR=str(report))
        runs[device] = json.loads((tmp_path / f"{device}.json").read_text())
        children = sorted(report.glob("rank-0-pid-*.json"))
        assert len(children) >= runs[device]["world"], proc.stderr[-2000:]
        assert f"{len(children)} child process(es) reported" in proc.stderr
        calls = {r["call"] for child in children for r in json.loads(child.read_text())["sites"]}
        assert {"torch.cuda.set_device(0)", "init_process_group('nccl')", "Module.cuda(0)"} <= calls, calls
    emu, cpu = runs["emu"], runs["cpu"]
    assert (emu["device"], emu["params_on"], emu["worker_saw_cuda"]) == ("cuda", "emu", [1])
    assert (cpu["world"], cpu["device"], cpu["params_on"], cpu["worker_saw_cuda"]) == (2, "cuda", "cpu", [1])
    assert emu["losses"] == cpu["losses"]  # every rank sees the same batches: the DDP average is one rank's step


def test_a_child_under_every_start_method_runs_under_the_mode(tmp_path):
    script = tmp_path / "methods.py"
    script.write_text(METHODS)
    proc = compat([str(script)], tmp_path, EZPZ_DEVICE="emu", EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report"))
    assert last_json(proc.stdout) == {m: [True, "emu"] for m in ("spawn", "forkserver", "fork")}
    children = [json.loads(p.read_text()) for p in sorted((tmp_path / "report").glob("rank-0-pid-*.json"))]
    assert len(children) == 3 and all(c["device"].startswith("emu") for c in children)
    assert sorted(c["process"].split(" ")[0] for c in children) == ["child", "child", "forked"]
