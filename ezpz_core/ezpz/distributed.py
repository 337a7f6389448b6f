"""``ezpz.distributed``: the original ezpz's module of that name, which is :mod:`ezpz.original.distributed` here.

An ordinary module that puts :mod:`ezpz.original.distributed` in its place, so ``import ezpz.distributed`` and
``import ezpz.original.distributed`` give one module object (its names, module attributes and patches alike).
"""

import sys

from ezpz.original import distributed as _original

sys.modules[__name__] = _original
