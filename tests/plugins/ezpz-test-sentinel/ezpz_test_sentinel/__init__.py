"""Fine plugin whose import is observable (sys.modules), for deny-list tests."""
from ezpz import hookimpl


@hookimpl
def ezpz_after_setup(runtime):
    return None
