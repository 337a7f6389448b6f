"""What ``ezpz.hooks.setup()`` does, step by step: environment snapshot, planning, threads, process group."""
