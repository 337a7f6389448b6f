"""A job for the ``ezpz launch`` supervision tests: ``supervised_job.py MODE``; no torch, starts fast.

hang-once: in attempt 0 rank 1 prints nothing and sleeps forever (rank 0 prints and exits 0); later attempts
exit 0. fail-once: in attempt 0 rank 1 exits 3; later attempts exit 0. sleep: every rank prints READY and its
pid, then sleeps (a job for ``ezpz kill``).
"""

import os
import sys
import time

mode = sys.argv[1]
rank = int(os.environ.get("RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK")
           or os.environ.get("SLURM_PROCID") or 0)
attempt = int(os.environ.get("EZPZ_ATTEMPT", "0"))
if mode == "hang-once" and attempt == 0 and rank == 1:
    time.sleep(3600)
print(f"rank {rank} attempt {attempt} pid {os.getpid()} READY", flush=True)
if mode == "fail-once" and attempt == 0 and rank == 1:
    sys.exit(3)
if mode == "sleep":
    time.sleep(3600)
