"""A job of STEPS steps of 0.05 s in which rank SLOW sleeps 0.2 s more every step: ``slow_rank.py SLOW STEPS``.

``SLOW`` may also be ``addr:IP``: the ranks on the node that owns address IP are slow (network-namespace nodes
share a host name; their addresses tell them apart), so a spare that replaces that node is not.

For the straggler tests: each step is a timed section (``rt.range("compute")``), then an all-reduce (so every
rank waits for the slow one, as in data-parallel training), then ``rt.step()``; the report names rank SLOW.
"""

import logging
import sys
import time

import torch
import torch.distributed as dist

import ezpz

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")  # the script, not the library
steps = int(sys.argv[2])
rt = ezpz.hooks.setup()
if sys.argv[1].startswith("addr:"):
    import socket

    with socket.socket() as s:
        try:
            s.bind((sys.argv[1][5:], 0))  # only an address of this node can be bound
            slow = rt.rank
        except OSError:
            slow = -1
else:
    slow = int(sys.argv[1])
for _ in range(steps):
    with rt.range("compute"):
        time.sleep(0.05 + (0.2 if rt.rank == slow else 0.0))
    t = torch.ones(1)
    dist.all_reduce(t)
    rt.step()
print(f"DONE rank {rt.rank} steps {rt.step_clock.count} sum {t.item():g}", flush=True)
ezpz.hooks.teardown()
