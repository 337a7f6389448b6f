"""``ezpz.log``: the original ezpz's module of that name, which is :mod:`ezpz.original.log` here.

An ordinary module that puts :mod:`ezpz.original.log` in its place, so ``import ezpz.log`` and
``import ezpz.original.log`` give one module object (its names, module attributes and patches alike).
"""

import sys

from ezpz.original import log as _original

sys.modules[__name__] = _original
