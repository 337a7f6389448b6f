"""Launch environments (placeholder until the launch module lands)."""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.facts import LaunchEnv


def detect_launch_env(environ: Mapping[str, str]) -> LaunchEnv:
    return LaunchEnv(launcher="single", reason="placeholder")
