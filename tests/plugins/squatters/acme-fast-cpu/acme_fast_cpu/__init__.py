"""Squatting test distribution; importing any of its modules leaves a marker file."""
