"""Answers its device probe after ``EZPZ_TEST_SLOW_S`` seconds (default 1), with nothing."""
import os
import time

from ezpz import hookimpl


@hookimpl
def ezpz_probe_devices(build, environ):
    time.sleep(float(os.environ.get("EZPZ_TEST_SLOW_S", "1")))
