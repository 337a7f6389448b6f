"""Built-in launch-environment detection: torchrun, Open MPI, Flux, jsrun, PALS, Hydra, PMIx, Slurm, Kubeflow/PAI/SkyPilot, single."""

from __future__ import annotations

from collections.abc import Mapping

from typing import TYPE_CHECKING

from ezpz.primitives.markers import hookimpl

if TYPE_CHECKING:
    from ezpz.facts import LaunchEnv


@hookimpl(trylast=True)
def ezpz_detect_launch_env(environ: Mapping[str, str]) -> LaunchEnv:
    from ezpz.launch_env import detect_launch_env

    return detect_launch_env(environ)


#: Launcher failure texts that name a host. Source: the original ezpz's Aurora failover (src/ezpz/bin/failover.sh,
#: ezpz/failover/patterns/aurora.py): "<hostname>: shepherd died from signal 9" is HPE PALS killing a node's ranks.
#: "rank N died from signal 11/15" is deliberately not matched: those are cascading deaths on innocent nodes.
LAUNCHER_SIGNATURES = (
    (r"^\S+: shepherd died from signal 9\b", "signal",
     "HPE PALS (mpiexec on Aurora/Polaris) killed this host's ranks: a retry should avoid the named host", True,
     "original ezpz failover.sh (PALS shepherd kill)"),
)


@hookimpl(trylast=True)
def ezpz_failure_signatures() -> list[object]:
    """Launcher texts naming a failed host (a PALS shepherd kill)."""
    from ezpz.failures.signatures import FailureSignature

    return [FailureSignature(pattern=p, kind=k, reason=r, blames_host=b, source=s)
            for p, k, r, b, s in LAUNCHER_SIGNATURES]
