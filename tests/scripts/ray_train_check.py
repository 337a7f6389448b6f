"""Run by tests/test_ray_train.py: a local Ray cluster, a TorchTrainer with 2 CPU workers, setup() in each.

argv[1] is a directory; each worker writes ``rank<N>.json`` there (Ray reports only rank 0's metrics).
"""

import json
import os
import sys
from pathlib import Path

import ray
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def train_loop(config):
    import torch
    import torch.distributed as dist

    import ezpz

    rt = ezpz.hooks.setup()
    value = torch.tensor([float(rt.rank + 1)])
    dist.all_reduce(value)
    adopted = next((d.chosen for d in rt.explain().decisions if d.topic == "process_group"), None)
    row = {"rank": rt.rank, "world_size": rt.world_size, "local_rank": rt.local_rank, "group_rank": dist.get_rank(),
           "launcher": rt.plan.launch.launcher, "backend": rt.backend, "device": str(rt.device), "sum": value.item(),
           "adopted": adopted, "explain": str(rt.explain())}
    ezpz.hooks.teardown()
    row["pg_after_teardown"] = dist.is_initialized()  # Ray's group: Ray destroys it
    Path(config["out"], f"rank{rt.rank}.json").write_text(json.dumps(row))


if __name__ == "__main__":
    out = sys.argv[1]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=True,
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
    trainer = TorchTrainer(train_loop, train_loop_config={"out": out},
                           scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
                           run_config=RunConfig(storage_path=os.path.join(out, "ray_results"), name="ezpz"))
    trainer.fit()
    ray.shutdown()
