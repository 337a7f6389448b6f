"""The original ezpz's API (``ezpz.setup_torch``, ``ezpz.distributed``, ``ezpz.get_logger`` ...) over the runtime.

Nothing in the core imports this package; ``ezpz.<name>`` reaches it through the forwards in
:mod:`ezpz`, and ``import ezpz.distributed`` (``ezpz.log``, ``ezpz.pbs``, ``ezpz.slurm``) through the
ordinary modules of those names, each of which puts the module from here in its place.
"""
