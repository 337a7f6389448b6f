"""emu with XCCL's reductions: emuccl refusing AVG and PREMUL_SUM (``EMUCCL_REFUSE_REDUCE_OPS``), as oneCCL/XCCL does.

One 2-rank torchrun job of ``reductions_on_emu.py`` (real processes, real emuccl collectives, fp32): a plain
``fully_shard`` model fails in backward on the refused AVG; ``rt.shard`` forces SUM and divides once, so its
first gradients equal DDP's and its 20 losses match DDP's (relative < 1e-5); torchtitan's divide factor 1.0
gives world-size times DDP's gradients for this per-rank mean loss (the rejected alternative).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emu_testlib import PY, child_env, free_port, need_tool, run

SCRIPT = Path(__file__).with_name("reductions_on_emu.py")


@pytest.mark.launcher
def test_emu_refusing_avg_and_premul_sum_fails_plain_fsdp2_and_trains_like_ddp_under_rt_shard(tmp_path):
    need_tool("torchrun")
    out = tmp_path / "seen.json"
    argv = [PY, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
            str(SCRIPT), str(out)]
    env = child_env(EZPZ_DEVICE="emu", EZPZ_PRECISION="fp32", EMUCCL_REFUSE_REDUCE_OPS="AVG,PREMUL_SUM")
    proc = run(argv, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    seen = json.loads(out.read_text())
    assert seen["device"] == "emu" and seen["backend"] == "emuccl" and seen["world"] == 2
    # the plugin says what the backend lacks, and explain() says how rt.shard reduces and what it rejected
    assert seen["unsupported"] == ["AVG", "PREMUL_SUM"]
    assert "SUM reductions, divided once after" in seen["sharding_chosen"]
    assert "lacks AVG and PREMUL_SUM" in seen["sharding_reason"] and "EMUCCL_REFUSE_REDUCE_OPS" in seen["sharding_reason"]
    assert "divide factor 1.0" in seen["sharding_alternatives"]
    # the backend refuses (raises), it does not compute something else
    assert seen["avg_all_reduce"].startswith("raised: emuccl: Cannot use ReduceOp.AVG"), seen["avg_all_reduce"]
    # plain FSDP2 divides inside the reduce-scatter with AVG: refused in its first backward
    assert seen["plain_fully_shard"].startswith("raised:") and "ReduceOp.AVG" in seen["plain_fully_shard"], \
        seen["plain_fully_shard"]
    # rt.shard: DDP's gradients (divided once); torchtitan's factor 1.0: world-size times DDP's
    assert seen["grads_rt_shard_vs_ddp"] < 1e-5, seen
    assert seen["grads_factor_1_vs_ddp_times_world"] < 1e-5 and seen["grads_factor_1_vs_ddp"] > 0.5, seen
    ddp, sharded = seen["ddp"], seen["rt_shard"]
    assert len(ddp) == len(sharded) == 20
    rel = max(abs(a - b) / abs(a) for a, b in zip(ddp, sharded))
    assert rel < 1e-5, f"rt.shard and DDP losses differ by {rel:.2e} (relative): {list(zip(ddp, sharded))}"
    assert sharded[-1] < sharded[0] / 2, sharded
