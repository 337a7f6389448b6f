"""Schedulers that start one process per node and leave the ranks to torchrun: Kubeflow, Alibaba PAI, SkyPilot.

:func:`detect_node_job` is their launch-environment detector. With one process per node that
process *is* the rank (rank = node index). With more per node the process is the node's entry
point, not a rank: it must start them (``ezpz launch`` runs torchrun from the same variables),
and ``setup()`` there raises a LaunchEnvError saying so rather than run as rank 0 of 1.

Each contract below says how many nodes the job has, which one this is, how
many processes each node should run and where rank 0 listens. Both the detector
and the ``torchrun`` launch driver read them from here, so ``setup()`` and
``ezpz launch`` agree.
Pure functions of the environment mapping; nothing is read from disk.

Sources (each recorded fixture in ``tests/fixtures/launch_envs/`` cites its own):

* Kubeflow Trainer v2 (JobSet): ``kubeflow/trainer`` ``pkg/constants/constants.go``
  and ``pkg/runtime/framework/plugins/torch/torch.go`` set ``PET_NNODES``,
  ``PET_NPROC_PER_NODE`` (a number, or ``auto``), ``PET_NODE_RANK`` (the pod's
  job-completion index), ``PET_MASTER_ADDR``, ``PET_MASTER_PORT`` for torchrun,
  which reads any ``PET_<FLAG>`` as its ``--<flag>``.
* Kubeflow PyTorchJob v1 (training-operator ``pkg/controller.v1/pytorch/envvar.go``,
  and ``master.go``, last version before their removal in kubeflow/trainer 7858371b4):
  ``MASTER_ADDR`` (``<job>-master-0``, also as ``PET_MASTER_ADDR``),
  ``MASTER_PORT``, ``RANK`` (the pod's index, master first), ``WORLD_SIZE``
  (pods x ``nprocPerNode``), ``PET_NODE_RANK`` (= ``RANK``), ``PET_NNODES`` and,
  when the job names one, ``PET_NPROC_PER_NODE``. Older operators set only the
  first four (one process per pod).
* Alibaba PAI-DLC ("General environment variables", alibabacloud.com/help/en/pai):
  ``WORLD_SIZE`` is the number of *nodes*, ``RANK`` the node's index,
  ``NPROC_PER_NODE`` the GPUs per node, ``MASTER_ADDR``/``MASTER_PORT``.
* SkyPilot ("Distributed Multi-Node Jobs" and "Environment Variables",
  docs.skypilot.co): ``SKYPILOT_NODE_RANK``, ``SKYPILOT_NODE_IPS`` (one IP per
  line, the head node first), ``SKYPILOT_NUM_NODES``,
  ``SKYPILOT_NUM_GPUS_PER_NODE``, ``SKYPILOT_TASK_ID``; no port (its examples
  pick one), so the port is derived from ``SKYPILOT_TASK_ID``.

Precedence, first match wins: Kubeflow's ``PET_*``; PAI (``NPROC_PER_NODE``
with ``RANK``/``WORLD_SIZE``); Kubeflow PyTorchJob v1 without ``PET_*``
(``RANK``/``WORLD_SIZE``/``MASTER_ADDR=<job>-master-0`` in a Kubernetes pod, no ``LOCAL_*``);
SkyPilot. torchrun started inside any of them wins over all (its variables
describe the process; these describe the node).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from attrs import field

from ezpz.errors import LaunchEnvError
from ezpz.facts import LaunchEnv
from ezpz.primitives.converters import as_dict
from ezpz.primitives.frozen_records import frozen
from ezpz.launch_env.ports import derive_port

__all__ = ["CONTRACTS", "NodeJob", "detect_node_job", "find_node_job", "read_pai", "read_pet", "read_pytorchjob", "read_skypilot"]

_MAX = 2**31 - 1
_TORCHRUN = ("TORCHELASTIC_RUN_ID", "GROUP_RANK")


@frozen(kw_only=True)
class NodeJob:
    """One node of a job whose scheduler starts one process per node.

    ``nproc_per_node`` is None when the scheduler leaves it to torchrun
    (``auto``: one per accelerator); ``nproc_var`` is the variable that says
    so. ``sources`` names the variable behind each field.
    """

    scheduler: str
    reason: str
    nnodes: int
    node_rank: int
    nproc_per_node: int | None
    nproc_var: str = ""
    master_addr: str | None = None
    master_port: int | None = None
    sources: Mapping[str, str] = field(factory=dict, converter=as_dict, hash=False)


def _get(environ: Mapping[str, str], name: str) -> str | None:
    raw = environ.get(name)
    text = None if raw is None else str(raw).strip()
    return text or None


def _int(environ: Mapping[str, str], name: str, *, minimum: int = 0, fix: str = "") -> int | None:
    raw = _get(environ, name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 10 or not minimum <= int(raw) <= _MAX:
        raise LaunchEnvError(name=name, value=raw, expected=f"a whole number of at least {minimum}",
                             fix=fix or f"{name} is set by the scheduler; unset it if you exported it by hand")
    return int(raw)


def _port(environ: Mapping[str, str], name: str) -> int | None:
    port = _int(environ, name, minimum=1)
    if port is not None and port > 65535:
        raise LaunchEnvError(name=name, value=port, expected="a TCP port from 1 to 65535",
                             fix=f"{name} is set by the scheduler; unset it if you exported it by hand")
    return port


def _check(job: NodeJob) -> NodeJob:
    if job.node_rank >= job.nnodes:
        raise LaunchEnvError(
            name=job.sources["node_rank"], value=job.node_rank,
            expected=f"below the number of nodes {job.nnodes} ({job.sources['nnodes']})",
            fix="the scheduler's variables disagree; unset copies exported by hand or left from another job")
    return job


def _nproc(environ: Mapping[str, str], name: str) -> tuple[int | None, str]:
    raw = _get(environ, name)
    if raw is None:
        return 1, f"default: 1 ({name} not set)"
    if raw.lower() in ("auto", "gpu"):
        return None, f"{name}={raw}: one per accelerator, decided on the node"
    if raw.lower() == "cpu":
        return 1, f"{name}=cpu: one process"
    return _int(environ, name, minimum=1), name


def read_pet(environ: Mapping[str, str]) -> NodeJob | str:
    """Kubeflow Trainer v2 / JobSet, or PyTorchJob v1 with ``PET_*``: the variables torchrun reads."""
    if _get(environ, "PET_NNODES") is None or _get(environ, "PET_NODE_RANK") is None:
        return "PET_NNODES and PET_NODE_RANK not set"
    raw_nodes = _get(environ, "PET_NNODES") or ""
    if ":" in raw_nodes:
        raise LaunchEnvError(
            name="PET_NNODES", value=raw_nodes, expected="a fixed node count (an elastic range is torchrun's to settle)",
            fix="run the script under torchrun (the pod's default command), which reads PET_NNODES itself")
    nnodes = _int(environ, "PET_NNODES", minimum=1) or 1
    node = _int(environ, "PET_NODE_RANK") or 0
    nproc, nproc_src = _nproc(environ, "PET_NPROC_PER_NODE")
    addr_var = "PET_MASTER_ADDR" if _get(environ, "PET_MASTER_ADDR") else "MASTER_ADDR"
    port_var = "PET_MASTER_PORT" if _get(environ, "PET_MASTER_PORT") else "MASTER_PORT"
    v1 = _get(environ, "RANK") is not None and _get(environ, "WORLD_SIZE") is not None  # v2 sets neither
    what = "Kubeflow PyTorchJob v1 (PET_*, RANK, WORLD_SIZE)" if v1 else "Kubeflow Trainer v2 / JobSet (PET_*)"
    sources = {"nnodes": "PET_NNODES", "node_rank": "PET_NODE_RANK", "nproc_per_node": nproc_src,
               "master_addr": addr_var, "master_port": port_var}
    return _check(NodeJob(scheduler="kubeflow", reason=what, nnodes=nnodes, node_rank=node, nproc_per_node=nproc,
                          nproc_var="PET_NPROC_PER_NODE", master_addr=_get(environ, addr_var), master_port=_port(environ, port_var), sources=sources))


def read_pai(environ: Mapping[str, str]) -> NodeJob | str:
    """Alibaba PAI-DLC: ``WORLD_SIZE`` counts nodes and ``RANK`` is the node's index."""
    if _get(environ, "NPROC_PER_NODE") is None:
        return "NPROC_PER_NODE not set"
    if _get(environ, "WORLD_SIZE") is None or _get(environ, "RANK") is None:
        return "NPROC_PER_NODE is set but RANK/WORLD_SIZE not"
    nproc, nproc_src = _nproc(environ, "NPROC_PER_NODE")
    sources = {"nnodes": "WORLD_SIZE (PAI: the number of nodes)", "node_rank": "RANK (PAI: the node's index)",
               "nproc_per_node": nproc_src, "master_addr": "MASTER_ADDR", "master_port": "MASTER_PORT"}
    return _check(NodeJob(
        scheduler="pai", reason="Alibaba PAI-DLC (NPROC_PER_NODE; WORLD_SIZE counts nodes)",
        nnodes=_int(environ, "WORLD_SIZE", minimum=1) or 1, node_rank=_int(environ, "RANK") or 0,
        nproc_per_node=nproc, nproc_var="NPROC_PER_NODE", master_addr=_get(environ, "MASTER_ADDR"),
        master_port=_port(environ, "MASTER_PORT"), sources=sources))


def read_pytorchjob(environ: Mapping[str, str]) -> NodeJob | str:
    """Kubeflow PyTorchJob v1 without ``PET_*``: one process per pod, ``RANK`` of ``WORLD_SIZE`` pods."""
    if _get(environ, "KUBERNETES_SERVICE_HOST") is None:
        return "KUBERNETES_SERVICE_HOST not set (not in a Kubernetes pod)"
    missing = [n for n in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if _get(environ, n) is None]
    if missing:
        return f"in a Kubernetes pod but {', '.join(missing)} not set"
    local = [n for n in ("LOCAL_RANK", "LOCAL_WORLD_SIZE") if _get(environ, n) is not None]
    if local:
        return f"in a Kubernetes pod but {', '.join(local)} set: several ranks per pod, not PyTorchJob's one"
    addr = _get(environ, "MASTER_ADDR") or ""
    if not addr.endswith("-master-0"):
        return (f"in a Kubernetes pod but MASTER_ADDR={addr} is not a PyTorchJob master (<job>-master-0): RANK and "
                "WORLD_SIZE were set by something else")
    sources = {"nnodes": "WORLD_SIZE (PyTorchJob: one process per pod)", "node_rank": "RANK (PyTorchJob: the pod)",
               "nproc_per_node": "PyTorchJob v1 default: 1 per pod", "master_addr": "MASTER_ADDR",
               "master_port": "MASTER_PORT"}
    return _check(NodeJob(
        scheduler="kubeflow", reason="Kubeflow PyTorchJob v1 (RANK, WORLD_SIZE, MASTER_ADDR in a Kubernetes pod)",
        nnodes=_int(environ, "WORLD_SIZE", minimum=1) or 1, node_rank=_int(environ, "RANK") or 0, nproc_per_node=1,
        nproc_var="(PyTorchJob v1: one per pod)", master_addr=_get(environ, "MASTER_ADDR"), master_port=_port(environ, "MASTER_PORT"), sources=sources))


def skypilot_port(task_id: str) -> int:
    """A port in :data:`ezpz.launch_env.ports.PORT_RANGE` from a stable hash of ``SKYPILOT_TASK_ID`` (the same on every node)."""
    return derive_port(f"SKYPILOT_TASK_ID={task_id}")


def read_skypilot(environ: Mapping[str, str]) -> NodeJob | str:
    """SkyPilot's ``run`` section: once per node, with the node list and GPU count."""
    if _get(environ, "SKYPILOT_NODE_RANK") is None:
        return "SKYPILOT_NODE_RANK not set"
    ips = [line.strip() for line in (environ.get("SKYPILOT_NODE_IPS") or "").splitlines() if line.strip()]
    nodes = _int(environ, "SKYPILOT_NUM_NODES", minimum=1)
    nodes_src = "SKYPILOT_NUM_NODES"
    if nodes is None:
        if not ips:
            return "SKYPILOT_NODE_RANK is set but SKYPILOT_NUM_NODES and SKYPILOT_NODE_IPS not"
        nodes, nodes_src = len(ips), "derived: lines of SKYPILOT_NODE_IPS"
    if ips and len(ips) != nodes:
        raise LaunchEnvError(name="SKYPILOT_NODE_IPS", value=environ.get("SKYPILOT_NODE_IPS"),
                             expected=f"{nodes} lines, one IP per node ({nodes_src}={nodes})",
                             fix="the SkyPilot variables disagree; unset copies exported by hand")
    gpus = _int(environ, "SKYPILOT_NUM_GPUS_PER_NODE")
    nproc, nproc_src = (gpus, "SKYPILOT_NUM_GPUS_PER_NODE") if gpus else (
        1, "derived: 1 (no GPUs: SKYPILOT_NUM_GPUS_PER_NODE is 0 or not set)")
    addr = _get(environ, "MASTER_ADDR") or (ips[0] if ips else None)
    addr_src = "MASTER_ADDR" if _get(environ, "MASTER_ADDR") else "derived: first line of SKYPILOT_NODE_IPS (head node)"
    port = _port(environ, "MASTER_PORT")
    port_src = "MASTER_PORT"
    task = _get(environ, "SKYPILOT_TASK_ID")
    if port is None and task is not None:
        port, port_src = skypilot_port(task), "derived: hash of SKYPILOT_TASK_ID into 20000..32767"
    sources = {"nnodes": nodes_src, "node_rank": "SKYPILOT_NODE_RANK", "nproc_per_node": nproc_src,
               "master_addr": addr_src, "master_port": port_src}
    return _check(NodeJob(
        scheduler="skypilot", reason="SkyPilot (SKYPILOT_NODE_RANK, SKYPILOT_NODE_IPS)", nnodes=nodes,
        node_rank=_int(environ, "SKYPILOT_NODE_RANK") or 0, nproc_per_node=nproc,
        nproc_var="SKYPILOT_NUM_GPUS_PER_NODE", master_addr=addr,
        master_port=port, sources=sources))


CONTRACTS: tuple[tuple[str, Callable[[Mapping[str, str]], "NodeJob | str"]], ...] = (
    ("kubeflow-pet", read_pet),
    ("pai", read_pai),
    ("kubeflow-pytorchjob", read_pytorchjob),
    ("skypilot", read_skypilot),
)
"""Node-level contracts in precedence order."""


def find_node_job(environ: Mapping[str, str]) -> tuple[NodeJob | None, list[tuple[str, str]]]:
    """The first contract that applies (None if none), with each one passed over and why.

    Returns None, with the reason, when torchrun started this process: then the
    variables describe the node, and torchrun's describe the process.
    """
    passed: list[tuple[str, str]] = []
    for name, read in CONTRACTS:
        found = read(environ)
        if isinstance(found, NodeJob):
            return found, passed
        passed.append((name, found))
    return None, passed


def under_torchrun(environ: Mapping[str, str]) -> str | None:
    """The torchrun variable set in ``environ``, if any (then node contracts describe the node, not the process)."""
    return next((n for n in _TORCHRUN if _get(environ, n) is not None), None)


def detect_node_job(environ: Mapping[str, str]) -> LaunchEnv | str:
    """One rank per node under Kubeflow, PAI or SkyPilot; LaunchEnvError when the node should run several."""
    from ezpz.launch_env._parse import build

    inner = under_torchrun(environ)
    job, passed = find_node_job(environ)
    if job is None:
        return "; ".join(f"{name}: {why}" for name, why in passed)
    if inner is not None:
        return f"{job.reason} describes the node; torchrun ({inner} is set) started this process inside it"
    if job.nproc_per_node != 1:
        raise LaunchEnvError(
            name=job.nproc_var, value=job.nproc_per_node or environ.get(job.nproc_var, "auto"),
            expected=f"1 for the script to run as the node's only rank: {job.reason} asks for "
            f"{f'{job.nproc_per_node} processes' if job.nproc_per_node else 'one process per accelerator'} on each of "
            f"{job.nnodes} node(s), and this "
            "process is the node's entry point, not one of them",
            fix="start the ranks with `ezpz launch -- python train.py` (it runs torchrun --nnodes/--node-rank/"
            "--master-addr from these variables) or with torchrun itself",
        )
    lay = {"rank": job.node_rank, "world_size": job.nnodes, "local_rank": 0, "local_world_size": 1,
           "node_rank": job.node_rank, "num_nodes": job.nnodes}
    src = {"rank": job.sources["node_rank"], "world_size": job.sources["nnodes"],
           "local_rank": f"derived: 0 (one process per node: {job.sources['nproc_per_node']})",
           "local_world_size": f"derived: 1 ({job.sources['nproc_per_node']})",
           "node_rank": job.sources["node_rank"], "num_nodes": job.sources["nnodes"]}
    env = build(job.scheduler, lay, src, job.reason)
    return _with_rendezvous(env, job.master_addr, job.master_port, job.sources)


def _with_rendezvous(env: LaunchEnv, addr: str | None, port: int | None, sources: Mapping[str, str]) -> LaunchEnv:
    import attrs

    merged = dict(env.sources)
    if addr is not None:
        merged["master_addr"] = sources["master_addr"]
    if port is not None:
        merged["master_port"] = sources["master_port"]
    return attrs.evolve(env, master_addr=addr, master_port=port, sources=merged)
