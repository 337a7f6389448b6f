"""Launch environments: which launcher started this process, its place in the job, and the rendezvous.

Everything here is a pure function of the environment mapping it is given
(hostfiles named by a variable are the only files read). The detectors and
their order are in :mod:`ezpz.launch_env.detectors`; the rendezvous in
:mod:`ezpz.launch_env.rendezvous`; host lists in :mod:`ezpz.inputs.hostlist`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.facts import LaunchEnv
from ezpz.launch_env.detectors import DETECTORS, detect_layout
from ezpz.launch_env.rendezvous import derive_port, job_identity, resolve_rendezvous

__all__ = [
    "DETECTORS",
    "derive_port",
    "detect_launch_env",
    "expand_nodelist",
    "job_identity",
    "read_hostfile",
    "resolve_rendezvous",
]


def detect_launch_env(environ: Mapping[str, str]) -> LaunchEnv:
    """This process's place in the job, with the rendezvous resolved when there are several ranks.

    Raises :class:`ezpz.errors.LaunchEnvError`, naming the variable, its value,
    what was expected and the fix, when the launcher's variables are
    inconsistent or a multi-node rendezvous cannot be derived.
    """
    return resolve_rendezvous(detect_layout(environ), environ)


def __getattr__(name: str) -> object:
    """``expand_nodelist`` and ``read_hostfile`` from :mod:`ezpz.inputs.hostlist`, imported only when a host list is read."""
    if name in ("expand_nodelist", "read_hostfile"):
        from ezpz.inputs import hostlist

        return getattr(hostlist, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
