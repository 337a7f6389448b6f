"""``ezpz.pbs``: the original ezpz's module of that name, which is :mod:`ezpz.original.pbs` here.

An ordinary module that puts :mod:`ezpz.original.pbs` in its place, so ``import ezpz.pbs`` and
``import ezpz.original.pbs`` give one module object (its names, module attributes and patches alike).
"""

import sys

from ezpz.original import pbs as _original

sys.modules[__name__] = _original
