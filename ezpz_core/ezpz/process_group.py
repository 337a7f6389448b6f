"""Process-group creation with a hard timeout and errors that name the rendezvous."""

from __future__ import annotations

import datetime as _dt
import re

from ezpz.decisions import SetupPlan
from ezpz.errors import ConfigError, RendezvousTimeoutError

__all__ = ["init_process_group"]

_TIMEOUT = re.compile(r"time[d]? ?out|timeout", re.IGNORECASE)
_IN_USE = re.compile(r"address already in use|EADDRINUSE", re.IGNORECASE)


def init_process_group(plan: SetupPlan) -> None:
    """Create the default process group for ``plan``; raise clearly within ``plan.timeout_s``."""
    import torch.distributed as dist

    launch = plan.launch
    addr, port = launch.master_addr, launch.master_port
    where = f"{addr}:{port}"
    kwargs = {}
    if plan.device.index is not None and plan.backend.name != "gloo":
        import torch

        kwargs["device_id"] = torch.device(plan.device.torch_device)
    try:
        dist.init_process_group(
            backend=plan.backend.name,
            init_method=f"tcp://{_bracket(addr)}:{port}",
            rank=launch.rank,
            world_size=launch.world_size,
            timeout=_dt.timedelta(seconds=plan.timeout_s),
            **kwargs,
        )
    except Exception as err:  # torch raises DistStoreError/DistNetworkError/RuntimeError
        text = str(err)
        if _IN_USE.search(text):
            raise ConfigError(
                name="MASTER_PORT", value=port, expected=f"a free TCP port on {addr}",
                fix="another job (or a stale one) holds this port: set MASTER_PORT to a free port, "
                "or kill the stale process",
            ) from err
        if _TIMEOUT.search(text):
            raise RendezvousTimeoutError(
                f"rank {launch.rank} of {launch.world_size} ({launch.launcher}) waited {plan.timeout_s:g}s at the "
                f"rendezvous {where} and not every rank arrived ({text.strip().splitlines()[0]}). "
                "Check that all ranks were launched, that they agree on MASTER_ADDR/MASTER_PORT and can reach "
                f"{where}; raise EZPZ_TIMEOUT if ranks start slowly"
            ) from err
        raise


def _bracket(addr: str | None) -> str:
    return f"[{addr}]" if addr and ":" in addr and not addr.startswith("[") else str(addr)
