"""ezpz-tpu: Google TPUs (and XLA's CPU runtime) through torch_xla.

The hooks live in :mod:`ezpz_tpu.plugin`, the module the entry point names;
this ``__init__`` stays empty so importing the plugin costs nothing.
"""

__version__ = "1.0.0"
