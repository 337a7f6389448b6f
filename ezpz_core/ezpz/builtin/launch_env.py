"""Built-in launch-environment detection: torchrun, Open MPI, Flux, jsrun, PALS, Hydra, PMIx, Slurm, Kubeflow/PAI/SkyPilot, single."""

from __future__ import annotations

from collections.abc import Mapping

from typing import TYPE_CHECKING

from ezpz.markers import hookimpl

if TYPE_CHECKING:
    from ezpz.facts import LaunchEnv


@hookimpl(trylast=True)
def ezpz_detect_launch_env(environ: Mapping[str, str]) -> LaunchEnv:
    from ezpz.launch_env import detect_launch_env

    return detect_launch_env(environ)
