"""Implements a misspelt hook (ezpz_probe_device without the s)."""
from ezpz import hookimpl


@hookimpl
def ezpz_probe_device(build, environ):
    return None
