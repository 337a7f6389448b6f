"""Returns values of the wrong type."""
from ezpz import hookimpl


@hookimpl
def ezpz_amp_policy(device, build, requested):
    return "bf16 please"
