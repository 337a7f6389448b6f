"""ezpz-example-emu: a PrivateUse1 device emulated on the CPU, and the ezpz plugin that drives it.

:mod:`ezpz_example_emu.device` is the torch device, :mod:`ezpz_example_emu.collectives`
its process-group backend, :mod:`ezpz_example_emu.core` the plugin's facts and
policies, and :mod:`ezpz_example_emu.plugin` (the module the entry point names)
the hooks. This package ``__init__`` stays empty so that ``import ezpz``, which
imports the plugin module, imports nothing here beyond the standard library.
"""

__version__ = "1.0.0"
