"""``python seeded_session.py SEED SCRIPT [ARGS...]``: ``python -m ezpz.cuda_compat SCRIPT``, torch seeded first.

For a script that parses ``--seed`` but never calls ``torch.manual_seed`` (pytorch/examples'
mnist_forward_forward at 37a1866): without a seed two plain CPU runs already differ, so nothing could be
compared. The seed is set after the session started (so nothing ezpz does draws from it) and before the script.
"""
import sys

import torch

from ezpz.cuda_compat.session import Session

session = Session(sys.argv[2], sys.argv[3:])
try:
    session.start()
    torch.manual_seed(int(sys.argv[1]))
    session.run()
finally:
    session.finish()
