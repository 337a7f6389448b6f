"""The original ezpz's API (``ezpz.setup_torch``, ``ezpz.distributed``, ``ezpz.get_logger`` ...) over the runtime.

Nothing in the core imports this package; ``ezpz.<name>`` and ``import ezpz.distributed``
reach it through the forwards and moved-module table in :mod:`ezpz`.
"""
