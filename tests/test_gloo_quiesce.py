"""teardown() lets gloo's worker threads drop their last collectives before the interpreter finalizes.

The abort seen in CI ("terminate called without an active exception" at exit, with a DDP model kept past
teardown) was reproduced with a core dump: a gloo worker dropping the last all-reduce during finalization,
its ``SafePyObject`` (the context torch's backward stashes) needing the GIL. ``tests/scripts/
gloo_kept_past_teardown.py`` forces that timing (a peer joins the last collective late). The drop during
finalization does not abort every time, so the paired comparison with ``destroy_process_group()`` alone
(which aborts) is a benchmark, ``benchmarks/bench_clean_exit.py --kept-group``, not a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import clean_env
from ezpz.primitives.torch_private import tls_stash
from test_real_launchers import free_port

SCRIPT = Path(__file__).parent / "scripts" / "gloo_kept_past_teardown.py"
#: The quiesce (and the script that forces the late drop) needs torch's thread-local object stash.
needs_stash = pytest.mark.skipif(tls_stash() is None, reason="this torch has no thread-local object stash (2.4.1 lacks "
                                 "_remove_obj_from_tls): teardown() skips the quiesce, saying so (docs/compat.md)")


def _torchrun(script: Path, *args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                           str(free_port()), str(script), *map(str, args)], env=env or clean_env(), capture_output=True,
                          text=True, timeout=180)


@needs_stash
def test_a_group_kept_past_teardown_does_not_abort_at_exit(tmp_path):
    # without the quiesce this failed in about half the runs (the drop during finalization does not always
    # abort), so it runs twice
    for run in range(2):
        proc = _torchrun(SCRIPT, "teardown", tmp_path / f"finalizing-{run}")
        assert "terminate called" not in proc.stderr, proc.stderr[-3000:]
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "finished rank 0" in proc.stdout and "finished rank 1" in proc.stdout


def test_teardown_with_an_exception_in_flight_runs_no_collective_and_its_peer_is_not_held(tmp_path):
    proc = _torchrun(SCRIPT, "raise", tmp_path / "finalizing", env=clean_env(EZPZ_LOG_ALL_RANKS="1"))
    assert "ValueError: rank 0 fails" in proc.stderr
    lines = proc.stderr.splitlines()
    skipped = [ln for ln in lines if "gloo_quiesce" in ln and "rank=0" in ln]
    assert skipped and "skipped: ValueError is propagating" in skipped[0], proc.stderr[-3000:]
    took = {int(w[2]): float(w[4]) for w in (ln.split() for ln in proc.stdout.splitlines()) if w[:1] == ["teardown"]}
    assert took[0] < 1.0  # no collective on the failing rank
    if 1 in took:  # rank 1 (unless torchrun ended it first) stopped when rank 0's connection closed
        assert took[1] < 6.0
        assert any("gloo_quiesce done=False" in ln and "rank=1" in ln for ln in lines), proc.stderr[-3000:]


@needs_stash
def test_quiesce_sees_every_worker_on_every_rank_after_ddp_steps(tmp_path):
    script = tmp_path / "quiesce_report.py"
    script.write_text(textwrap.dedent("""
        import json, torch, torch.distributed as dist
        from ezpz.primitives.gloo_quiesce import quiesce
        dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
        for _ in range(3):
            model(torch.randn(4, 8)).sum().backward()
        r = quiesce(torch, dist.group.WORLD)
        with open(f"{OUT}/rank{dist.get_rank()}.json", "w") as fh:  # not stdout: two ranks' lines can interleave
            json.dump({"rank": dist.get_rank(), "done": r.done, "seen": r.workers_seen, "workers": r.workers,
                       "reason": r.reason}, fh)
        del model
        dist.destroy_process_group()
    """).replace("OUT", repr(str(tmp_path))))
    proc = _torchrun(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert sorted(r["rank"] for r in reports) == [0, 1]
    for r in reports:
        assert (r["done"], r["seen"], r["workers"]) == (True, 2, 2), r
    assert len({r["reason"] for r in reports}) == 1  # the same number of rounds on both ranks


def test_quiesce_is_not_needed_without_gloo():
    from ezpz.primitives.gloo_quiesce import quiesce

    class NoGloo:
        def _get_backend(self, device):
            raise RuntimeError("no backend for cpu")

    import torch

    report = quiesce(torch, NoGloo())
    assert (report.done, report.attempted) == (False, False) and report.reason.startswith("not needed")
