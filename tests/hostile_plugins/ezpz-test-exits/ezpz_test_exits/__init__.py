"""Calls ``sys.exit(3)`` inside its device probe, as a vendor SDK's error path might."""
import sys

from ezpz import hookimpl


@hookimpl
def ezpz_probe_devices(build, environ):
    sys.exit(3)
