"""``ezpz port``: rewrite a CUDA-only script or project into a portable ezpz one, once, as source.

Pure source transformation on libcst (it keeps comments and layout), an
optional dependency: ``pip install "ezpz[port]"``. Nothing here imports torch or
the plugin host. One module per concern: :mod:`~ezpz.porting.catalogue` (what
each CUDA API becomes and why), :mod:`~ezpz.porting.rewriter` (the libcst
transformer), :mod:`~ezpz.porting.placement` (``import ezpz`` and the
``setup()`` line), :mod:`~ezpz.porting.source` (one module),
:mod:`~ezpz.porting.project` (a file or a directory), :mod:`~ezpz.porting.report`
(what changed, what could not be ported). ``docs/cli.md`` documents the command.
"""

from __future__ import annotations

import importlib.util

__all__ = ["LIBCST_FIX", "libcst_missing"]

LIBCST_FIX = 'pip install "ezpz[port]"  (or: pip install "libcst>=1.1,<2")'


def libcst_missing() -> bool:
    """True when libcst, which ``ezpz port`` needs, is not installed."""
    return importlib.util.find_spec("libcst") is None
