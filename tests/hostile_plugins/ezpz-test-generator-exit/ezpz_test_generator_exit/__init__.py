"""Raises ``GeneratorExit`` (a BaseException, not an Exception) inside its backend hook."""
from ezpz import hookimpl


@hookimpl(tryfirst=True)
def ezpz_select_backend(device, build, launch, requested):
    raise GeneratorExit("leaked from a closed generator (simulated)")
