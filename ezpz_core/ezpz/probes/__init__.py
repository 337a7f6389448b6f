"""Probes: thin, impure, read-only readers of this process's surroundings (torch build, CPU cores, launcher tools)."""
