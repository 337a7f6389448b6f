"""Raises at import, as a plugin with a missing dependency would."""
raise ImportError("vendor SDK libfake.so not found (simulated)")
