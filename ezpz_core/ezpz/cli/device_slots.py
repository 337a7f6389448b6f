"""How many devices a node has, as ``setup()`` would choose them: what ``ezpz launch`` tells the drivers."""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.launch_drivers.base import DeviceSlots

__all__ = ["planned_device_slots"]


def planned_device_slots(environ: Mapping[str, str]) -> DeviceSlots:
    """Devices per node from ``ezpz.hooks.plan()`` on ``environ``; one shared device when planning fails.

    A broken plugin or launcher variable must not stop a launch that could be
    told ``-n``/``--ppn``, so the failure becomes the reason instead.
    """
    from ezpz.errors import LaunchEnvError
    from ezpz.hooks import plan

    try:
        try:
            the_plan, _ = plan(environ=environ)
        except LaunchEnvError:  # on a Kubeflow/PAI/SkyPilot node this process is the node's entry point, not a rank
            the_plan, _ = plan(environ=_node_entry_point(environ))
    except Exception as err:
        return DeviceSlots(per_node=1, shared=True, why=f"could not probe devices ({type(err).__name__}: {err})")
    cand = the_plan.device.candidate
    if cand.shared or cand.count < 1:
        return DeviceSlots(per_node=1, shared=True, why=f"{cand.device_type} is one device shared by all ranks")
    return DeviceSlots(per_node=cand.count, shared=False,
                       why=f"{cand.count} {cand.device_type} device(s) per node ({cand.vendor})")


#: What Kubeflow, PAI and SkyPilot tell a node's entry point about the ranks it is to start (ezpz.launch_env.node_jobs).
_NODE_JOB_PREFIXES = ("PET_", "SKYPILOT_")
_NODE_JOB_NAMES = frozenset({"NPROC_PER_NODE", "RANK", "WORLD_SIZE"})


def _node_entry_point(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the node-level launch variables: the devices of a node that has no ranks yet."""
    return {k: v for k, v in environ.items() if not k.startswith(_NODE_JOB_PREFIXES) and k not in _NODE_JOB_NAMES}
