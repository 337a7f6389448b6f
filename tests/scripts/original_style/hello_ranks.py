"""A short script in the original ezpz's style: a logger, the rank getters, get_dist_info and timeitlogit.

    python hello_ranks.py            torchrun --nproc-per-node 2 hello_ranks.py
    mpiexec -n 2 python hello_ranks.py

Run unmodified by tests/test_original_scripts.py; it prints one JSON line per rank.
"""

import json

import ezpz
import ezpz.distributed

logger = ezpz.get_logger(__name__)


@ezpz.timeitlogit(rank=0)
def double(x):
    return 2 * x


rank_before_setup = ezpz.distributed.get_rank()
rank = ezpz.setup_torch()
info = ezpz.get_dist_info()
logger.info("hello from rank %s of %s on %s", ezpz.distributed.get_rank(), info["world_size"], info["DEVICE"])
logger.warning("rank %d says hi", rank)
print(json.dumps({
    "rank": rank,
    "rank_before_setup": rank_before_setup,
    "local_rank": ezpz.get_local_rank(),
    "world_size": ezpz.get_world_size(),
    "device": ezpz.get_torch_device(),
    "backend": ezpz.get_torch_backend(),
    "info_rank": info["RANK"],
    "scheduler": info["SCHEDULER"],
    "double": double(21),
}), flush=True)
ezpz.barrier()  # no rank tears down while another is still connecting
ezpz.cleanup()
