"""The detection order, the single-process fallback, and running the detectors in order.

Order (first match wins; the innermost launcher first, since an outer one's variables
are inherited by everything started inside it):

1. ``torchrun``: torchrun's own variables, complete and unambiguous (torchrun is the innermost
   launcher when it runs under mpiexec or srun, or in a Kubeflow, PAI or SkyPilot node).
2. ``openmpi``: Open MPI also exports PMIX_RANK, and under Slurm its daemons' SLURM_* leak in.
3. ``flux``: ``flux run`` tasks; FLUX_* win over libpals' partial PALS_* and Flux's PMI_RANK/PMI_SIZE
   (:mod:`ezpz.launch_env.flux`), unless those disagree (an mpiexec inside the Flux task).
4. ``jsrun``: LSF's Job Step Manager; its tasks also carry PMIX_RANK, so before PMIx.
5. ``pals``: PALS also exports PMI_RANK/PMI_SIZE, so it goes before Hydra.
6. ``hydra``: MPICH/Intel MPI.
7. ``pmix``: PMIX_RANK alone; srun --mpi=pmix also sets it, so before Slurm.
8. ``slurm``: tasks of an srun job step (not a batch script).
9. ``node``: one process per node under Kubeflow (PET_*, or PyTorchJob v1's RANK/WORLD_SIZE in a pod),
   Alibaba PAI (WORLD_SIZE counts nodes) or SkyPilot (:mod:`ezpz.launch_env.node_jobs`); before ``env``, whose
   RANK/WORLD_SIZE these schedulers set with another meaning.
10. ``env``: RANK/WORLD_SIZE set by hand or by a wrapper script, when no launcher above matched.
11. ``single``: none of the above; one process.

When a launcher of 2-9 matched and RANK/WORLD_SIZE (or LOCAL_RANK ...) are also set and
disagree, :func:`ezpz.launch_env.conflicts.reconcile` decides, loudly: the trace names every
ignored variable and why, or every rank raises naming both sources.

Detectors are pure functions of the environment returning a LaunchEnv (rendezvous
unresolved) or the reason they do not apply; they raise LaunchEnvError when their
launcher's variables are present but inconsistent. A launcher's module is imported
only when one of its variables is set (:class:`GatedDetector`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attr

from ezpz.errors import LaunchEnvError
from ezpz.facts import Alternative, LaunchEnv
from ezpz.primitives.frozen_records import frozen
from ezpz.launch_env._parse import get, parse_int
from ezpz.launch_env.conflicts import reconcile
from ezpz.launch_env.torch_env import detect_env, detect_pmix, detect_torchrun

__all__ = ["DETECTORS", "Detector", "GatedDetector", "detect_layout", "detect_single"]

Detector = Callable[[Mapping[str, str]], "LaunchEnv | str"]


@frozen
class GatedDetector:
    """A detector imported only when one of its ``gate`` variables is set; else ``absent`` is its answer.

    Most processes run under one launcher, so importing every other launcher's
    module would only add file-system calls at every rank's start (at scale, on
    a parallel file system). ``absent`` is exactly what the detector says when
    none of ``gate`` is set; a test holds the two equal.
    """

    load: Callable[[], Detector]  # imports the detector's module
    gate: tuple[str, ...]
    absent: str

    def __call__(self, environ: Mapping[str, str]) -> LaunchEnv | str:
        if all(get(environ, name) is None for name in self.gate):
            return self.absent
        return self.load()(environ)


def _openmpi() -> Detector:
    from ezpz.launch_env.mpi import detect_openmpi

    return detect_openmpi


def _pals() -> Detector:
    from ezpz.launch_env.mpi import detect_pals

    return detect_pals


def _hydra() -> Detector:
    from ezpz.launch_env.mpi import detect_hydra

    return detect_hydra


def _flux() -> Detector:
    from ezpz.launch_env.flux import detect_flux

    return detect_flux


def _jsrun() -> Detector:
    from ezpz.launch_env.lsf import detect_jsrun

    return detect_jsrun


def _slurm() -> Detector:
    from ezpz.launch_env.slurm import detect_slurm

    return detect_slurm


def _node_job() -> Detector:
    from ezpz.launch_env.node_jobs import detect_node_job

    return detect_node_job


_NODE_JOB_ABSENT = ("kubeflow-pet: PET_NNODES and PET_NODE_RANK not set; pai: NPROC_PER_NODE not set; "
                    "kubeflow-pytorchjob: KUBERNETES_SERVICE_HOST not set (not in a Kubernetes pod); "
                    "skypilot: SKYPILOT_NODE_RANK not set")

DETECTORS: tuple[tuple[str, Detector], ...] = (
    ("torchrun", detect_torchrun),
    ("openmpi", GatedDetector(_openmpi, ("OMPI_COMM_WORLD_SIZE",), "OMPI_COMM_WORLD_SIZE not set")),
    ("flux", GatedDetector(_flux, ("FLUX_TASK_RANK",), "FLUX_TASK_RANK not set")),
    ("jsrun", GatedDetector(_jsrun, ("JSM_NAMESPACE_RANK",), "JSM_NAMESPACE_RANK not set")),
    ("pals", GatedDetector(_pals, ("PALS_RANKID",), "PALS_RANKID not set")),
    ("hydra", GatedDetector(_hydra, ("PMI_RANK", "PMI_ID"), "PMI_RANK not set")),
    ("pmix", detect_pmix),
    ("slurm", GatedDetector(_slurm, ("SLURM_STEP_NUM_TASKS", "SLURM_JOB_ID", "SLURM_JOBID"),
                            "SLURM_STEP_NUM_TASKS and SLURM_JOB_ID not set")),
    ("node", GatedDetector(_node_job, ("PET_NNODES", "PET_NODE_RANK", "NPROC_PER_NODE", "KUBERNETES_SERVICE_HOST",
                                       "SKYPILOT_NODE_RANK"), _NODE_JOB_ABSENT)),
    ("env", detect_env),
)
"""Launchers tried in order before the single-process fallback."""

#: Detectors whose layout *is* RANK/WORLD_SIZE; any other winner is reconciled with what those say.
TORCH_STYLE_DETECTORS = frozenset({"torchrun", "env"})

#: Variables that only exist when this process is one of several ranks: (name, smallest value that says so).
_MULTI_RANK_SIGNS = (
    ("RANK", 1), ("WORLD_SIZE", 2), ("LOCAL_RANK", 1), ("GROUP_RANK", 1), ("OMPI_COMM_WORLD_RANK", 1),
    ("OMPI_COMM_WORLD_SIZE", 2), ("OMPI_COMM_WORLD_LOCAL_RANK", 1), ("PALS_RANKID", 1), ("PALS_LOCAL_RANKID", 1),
    ("PMI_RANK", 1), ("PMI_SIZE", 2), ("PMI_ID", 1), ("MPI_LOCALRANKID", 1), ("PMIX_RANK", 1),
    ("SLURM_STEP_NUM_TASKS", 2), ("FLUX_TASK_RANK", 1), ("FLUX_JOB_SIZE", 2), ("JSM_NAMESPACE_RANK", 1),
    ("JSM_NAMESPACE_SIZE", 2), ("JSM_NAMESPACE_LOCAL_RANK", 1), ("PET_NODE_RANK", 1), ("PET_NNODES", 2),
    ("SKYPILOT_NODE_RANK", 1), ("SKYPILOT_NUM_NODES", 2),
)


def _summary(rejected: list[Alternative]) -> str:
    """The informative rejections (not the plain "X not set" ones)."""
    told = [f"{a.name}: {a.reason}" for a in rejected if not a.reason.endswith("not set")]
    return "; ".join(told) or "no launcher's variables found"


def detect_single(environ: Mapping[str, str], rejected: list[Alternative]) -> LaunchEnv:
    """One process; LaunchEnvError if some variable says this is one rank of several."""
    for name, least in _MULTI_RANK_SIGNS:
        raw = get(environ, name)
        if raw is not None and parse_int(name, raw) >= least:
            raise LaunchEnvError(
                name=name, value=raw,
                expected=f"a complete set of some launcher's variables, since {name}={raw} means several ranks "
                f"(checked: {_summary(rejected)})",
                fix="launch with torchrun, mpiexec or srun, or set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE "
                f"(and MASTER_ADDR, MASTER_PORT) yourself; unset {name} if it is left over from another job",
            )
    slurm = next((a.reason for a in rejected if a.name == "slurm" and "batch script" in a.reason), None)
    reason = "no launcher found: one process" if slurm is None else f"one process: {slurm}"
    default = "default: single process"
    fields = ("rank", "world_size", "local_rank", "local_world_size", "node_rank", "num_nodes")
    sources = {"launcher": "fallback: no launcher matched", **dict.fromkeys(fields, default)}
    return LaunchEnv(launcher="single", reason=reason, sources=sources)


def _shadowed(name: str, outcome: LaunchEnv | str, chosen: LaunchEnv) -> Alternative:
    if isinstance(outcome, str):
        return Alternative(name=name, reason=outcome)
    agrees = (outcome.rank, outcome.world_size) == (chosen.rank, chosen.world_size)
    said = f"rank {outcome.rank} of {outcome.world_size}"
    verdict = "agrees" if agrees else f"DISAGREES with {chosen.launcher}'s rank {chosen.rank} of {chosen.world_size}"
    return Alternative(name=name, reason=f"also present ({said}, {verdict}) but {chosen.launcher} comes first")


def _reconciled(chosen: LaunchEnv, environ: Mapping[str, str], rejected: list[Alternative]) -> LaunchEnv:
    """``chosen`` against RANK/WORLD_SIZE; replaces the ``env`` entry of ``rejected`` with the verdict."""
    try:
        env: LaunchEnv | str | LaunchEnvError = detect_env(environ)
    except LaunchEnvError as err:
        env = err
    winner, loser = reconcile(chosen, env, environ)
    rejected[:] = [a for a in rejected if a.name not in (loser.name, winner.launcher)]
    rejected.append(loser)
    return winner


def detect_layout(environ: Mapping[str, str]) -> LaunchEnv:
    """The first detector's layout, with every other launcher in ``rejected`` and why it was not used."""
    rejected: list[Alternative] = []
    chosen: LaunchEnv | None = None
    for name, detector in DETECTORS:
        if chosen is None:
            outcome = detector(environ)
            if isinstance(outcome, LaunchEnv):
                chosen = outcome
            else:
                rejected.append(Alternative(name=name, reason=outcome))
            continue
        try:  # later launchers only inform `ezpz doctor`; their errors must not stop the chosen one
            rejected.append(_shadowed(name, detector(environ), chosen))
        except LaunchEnvError as err:
            rejected.append(Alternative(name=name, reason=f"also present but inconsistent: {err}"))
    if chosen is None:
        chosen = detect_single(environ, rejected)
    else:
        if chosen.launcher not in TORCH_STYLE_DETECTORS:
            chosen = _reconciled(chosen, environ, rejected)
        rejected.append(Alternative(name="single", reason=f"{chosen.launcher} describes this process"))
    return attr.evolve(chosen, rejected=tuple(rejected))
