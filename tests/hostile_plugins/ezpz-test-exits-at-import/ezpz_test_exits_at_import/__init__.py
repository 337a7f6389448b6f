"""Calls ``sys.exit(4)`` when imported, as a vendor SDK's init might on a missing library."""
import sys

sys.exit(4)
