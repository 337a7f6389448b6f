"""Never returns from its device probe, as a call into a wedged driver would not."""
import threading

from ezpz import hookimpl


@hookimpl
def ezpz_probe_devices(build, environ):
    threading.Event().wait()  # forever
