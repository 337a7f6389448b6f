"""Bridges to other frameworks: each takes a runtime or plan, imports its framework lazily, never calls plugins."""
