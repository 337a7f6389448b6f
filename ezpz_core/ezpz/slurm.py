"""``ezpz.slurm``: the original ezpz's module of that name, which is :mod:`ezpz.original.slurm` here.

An ordinary module that puts :mod:`ezpz.original.slurm` in its place, so ``import ezpz.slurm`` and
``import ezpz.original.slurm`` give one module object (its names, module attributes and patches alike).
"""

import sys

from ezpz.original import slurm as _original

sys.modules[__name__] = _original
