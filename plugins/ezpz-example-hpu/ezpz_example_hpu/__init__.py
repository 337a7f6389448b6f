"""ezpz-example-hpu: a teaching plugin for a Gaudi-style accelerator.

The hooks live in :mod:`ezpz_example_hpu.plugin`, the module the entry point
names. This package ``__init__`` stays empty so that importing the plugin is
as cheap as importing the standard library.
"""

__version__ = "1.0.0"
