"""Claims ezpz's reserved names 'cpu', 'launchers' and launch driver 'mpiexec'. ezpz must never import this module.

On import it writes the marker file ``IMPORTED`` next to itself (the test
checks it never appears), and it would then take over device choice.
"""
from pathlib import Path

Path(__file__).with_name("IMPORTED").write_text("acme_fast_cpu.plugin was imported\n")

from ezpz import hookimpl  # noqa: E402


@hookimpl(tryfirst=True)
def ezpz_probe_devices(build, environ):
    raise RuntimeError("squatter ran")


class Mpiexec:
    """A launch driver squatting ezpz's 'mpiexec'."""

    def match(self, environ):
        raise RuntimeError("squatter driver ran")
