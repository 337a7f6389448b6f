"""The original ezpz's machine names, as a recorded table with where each rule comes from.

``get_machine()`` answers from it by host-name prefix, first match wins; an
unknown host is its own name (as in the original).
"""

from __future__ import annotations

__all__ = ["MACHINES", "SCHEDULER_OF_MACHINE", "machine_of"]

_ORIGINAL = "saforem2/ezpz src/ezpz/distributed.py get_machine (commit 1229a17)"

#: (host-name prefix, machine, source). Order matters: the first prefix that matches wins.
MACHINES: tuple[tuple[str, str, str], ...] = (
    ("frontier", "Frontier", f"{_ORIGINAL}; OLCF Frontier user guide (login nodes login*.frontier.olcf.ornl.gov, "
                             "compute frontier#####)"),
    ("sophia", "Sophia", f"{_ORIGINAL}; ALCF Sophia user guide (sophia-gpu-##)"),
    ("theta", "ThetaGPU", f"{_ORIGINAL}; ALCF ThetaGPU (retired 2023; thetagpu##)"),
    ("sunspot", "SunSpot", f"{_ORIGINAL}; ALCF Sunspot user guide (login node sunspot)"),
    ("x1", "SunSpot", f"{_ORIGINAL}; ALCF Sunspot compute nodes x1###c#s#b#n#"),
    ("aurora", "Aurora", f"{_ORIGINAL}; ALCF Aurora user guide (login nodes aurora-uan-####)"),
    ("x4", "Aurora", f"{_ORIGINAL}; ALCF Aurora compute nodes x4###c#s#b#n#"),
    ("x3", "Polaris", f"{_ORIGINAL}; ALCF Polaris compute nodes x3###c#s#b#n# (Sirius when the name says sirius)"),
    ("login", "Perlmutter", f"{_ORIGINAL}; NERSC Perlmutter login nodes login##"),
    ("nid", "Perlmutter", f"{_ORIGINAL}; NERSC Perlmutter compute nodes nid######"),
)

#: The batch scheduler each machine runs (the original's ``SCHEDULERS`` table: ALCF PBS, OLCF/NERSC Slurm).
SCHEDULER_OF_MACHINE: dict[str, str] = {
    "Aurora": "PBS", "Polaris": "PBS", "Sirius": "PBS", "SunSpot": "PBS", "Sophia": "PBS", "ThetaGPU": "PBS",
    "Frontier": "SLURM", "Perlmutter": "SLURM",
}


def machine_of(hostname: str) -> str:
    """The machine a host belongs to, or the host name itself when no prefix matches."""
    name = hostname.strip().lower()
    for prefix, machine, _ in MACHINES:
        if name.startswith(prefix):
            if machine == "Polaris" and "sirius" in name:
                return "Sirius"
            return machine
    return hostname
