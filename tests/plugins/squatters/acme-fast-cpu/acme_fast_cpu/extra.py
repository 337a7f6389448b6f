"""A plugin under a name of its own: allowed, and its record names this distribution."""
from ezpz import hookimpl


@hookimpl
def ezpz_after_setup(runtime):
    return None
