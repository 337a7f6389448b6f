"""Sharded training: ``Runtime.mesh`` (a DeviceMesh on the chosen device) and ``Runtime.shard`` (FSDP2).

:mod:`.precision` derives FSDP2's mixed precision from the AMP decision (pure); :mod:`.explained` says
all of it in ``explain()["sharding"]``; :mod:`.mesh` builds meshes as the device's plugin says its backend
needs (``ezpz_mesh_support``); :mod:`.fsdp` applies ``fully_shard``, or refuses by name where it cannot run.
"""

from __future__ import annotations

__all__: list[str] = []
