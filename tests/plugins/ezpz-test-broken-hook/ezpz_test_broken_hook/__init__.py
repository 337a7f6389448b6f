"""Raises inside its device probe."""
from ezpz import hookimpl


@hookimpl
def ezpz_probe_devices(build, environ):
    raise RuntimeError("driver query failed (simulated)")
