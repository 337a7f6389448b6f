"""Process-group creation with a hard timeout and errors that name the rendezvous."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from typing import TYPE_CHECKING, Any

from ezpz.decisions import SetupPlan
from ezpz.errors import ConfigError, EzpzError, RendezvousError, RendezvousTimeoutError

if TYPE_CHECKING:
    from ezpz.launch_env.store import Rendezvous
    from ezpz.startup.adoption import ExistingGroup

__all__ = ["init_process_group", "probe_existing_group"]

# Frameworks that create the default process group before user code runs, by the module that shows they are in use.
_GROUP_MAKERS = (("ray.train", "Ray Train"), ("lightning.fabric", "Lightning Fabric"),
                 ("pytorch_lightning", "PyTorch Lightning"), ("lightning", "Lightning"), ("accelerate", "accelerate"),
                 ("deepspeed", "DeepSpeed"))

_TIMEOUT = re.compile(r"time[d]? ?out|timeout", re.IGNORECASE)
_IN_USE = re.compile(r"address already in use|EADDRINUSE", re.IGNORECASE)
_LOST = re.compile(r"connection reset|broken pipe|closed|failed to (recv|send)|shutdown or crash|ECONNRESET|refused",
                   re.IGNORECASE)


def _check_backend_known(plan: SetupPlan) -> None:
    """Refuse, naming the plugin and the fix, a backend torch.distributed does not know after ``ezpz_before_init``.

    Checked here, not while planning: a plugin may register its backend only in ``ezpz_before_init`` (oneCCL's
    ``ccl`` exists once its bindings are imported), which runs after the plan is made.
    """
    from ezpz.errors import UnavailableError
    from ezpz.probes.torch_types import backend_known

    name = plan.backend.name
    if backend_known(name):
        return
    plugin = plan.device.candidate.plugin or "?"
    raise UnavailableError(
        name="backend", value=name,
        expected=(f"a collective backend torch.distributed knows (built in, or registered with "
                  f"torch.distributed.Backend.register_backend); plugin {plugin!r} chose {name!r} for "
                  f"{plan.device.torch_device}, and after ezpz_before_init torch.distributed still does not know it"),
        fix=(f"install the vendor's collective bindings that register {name!r} and have plugin {plugin!r} import "
             f"them in ezpz_before_init, or set EZPZ_BACKEND to a backend torch knows (gloo)"),
    )


def init_process_group(plan: SetupPlan, environ: Mapping[str, str] | None = None) -> None:
    """Create the default process group for ``plan``; raise a named error within ``plan.timeout_s`` + grace.

    The store, the job fingerprint check and the generation's namespace are
    :mod:`ezpz.launch_env.store`'s; every step runs under one deadline.
    """
    from ezpz.launch_env import store as _store

    _check_backend_known(plan)
    launch = plan.launch
    rdzv = _store.connect(launch, plan.timeout_s, os.environ if environ is None else environ)

    def run() -> None:
        import datetime as _dt

        import torch
        import torch.distributed as dist

        prefix = rdzv.open()
        kwargs: dict[str, Any] = {}
        eager = plan.mesh.eager_init if plan.mesh is not None else None  # the device plugin's word, else ours
        if plan.device.index is not None and (eager if eager is not None else plan.backend.name != "gloo"):
            kwargs["device_id"] = torch.device(plan.device.torch_device)
        dist.init_process_group(backend=plan.backend.name, store=prefix, rank=launch.rank,
                                world_size=launch.world_size, timeout=_dt.timedelta(seconds=plan.timeout_s), **kwargs)

    def overran() -> RendezvousTimeoutError:
        return _with_absent(rdzv, RendezvousTimeoutError(
            f"rank {launch.rank} of {launch.world_size} ({launch.launcher}) got no answer at the rendezvous "
            f"{rdzv.where} within {plan.timeout_s:g}s (+{_store.GRACE_S:g}s grace): something there accepted the "
            "connection and never answered as a torch store, or the store stopped answering mid-rendezvous. "
            "Check that MASTER_ADDR/MASTER_PORT point at this job's rank 0 (not a stale service), that all ranks "
            "were launched; raise EZPZ_TIMEOUT if ranks start slowly"
        ))

    try:
        _store.run_bounded(run, plan.timeout_s + _store.GRACE_S, overran)
    except EzpzError:
        raise
    except Exception as err:  # torch raises DistStoreError/DistNetworkError/RuntimeError
        named = _named(err, plan, rdzv.where)
        raise (_with_absent(rdzv, named) if isinstance(named, RendezvousTimeoutError) else named) from err
    _store.report_refused()


def probe_existing_group() -> ExistingGroup | None:
    """The default process group if ``torch.distributed`` is already initialised, else None (never creates one)."""
    import sys

    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    from ezpz.startup.adoption import ExistingGroup

    frameworks = dict.fromkeys(label for module, label in _GROUP_MAKERS if module in sys.modules)
    return ExistingGroup(backend=str(dist.get_backend()), rank=dist.get_rank(), world_size=dist.get_world_size(),
                         frameworks=tuple(frameworks))


def _with_absent(rdzv: Rendezvous, err: RendezvousTimeoutError, deadline_s: float = 3.0) -> RendezvousTimeoutError:
    """``err`` with the ranks that never reached the store named (``missing_ranks``), when the store can tell."""
    from ezpz.launch_env import store as _store

    try:
        arrived = _store.run_bounded(rdzv.arrived, deadline_s, lambda: TimeoutError("the store did not answer"))
    except Exception:  # the store itself is gone: nothing more to say than the error already does
        return err
    missing = [r for r in range(rdzv.launch.world_size) if r not in arrived]
    if not missing or not arrived:
        return err
    here = ", ".join(f"{r} on {h}" for r, h in sorted(arrived.items())[:16])
    named = type(err)(f"{err} [ranks that never arrived: {_ranks(missing)}; arrived: {here}]")
    named.missing_ranks = tuple(missing)  # type: ignore[attr-defined]  # read by ezpz.failures.capture
    return named


def _ranks(ranks: list[int], limit: int = 32) -> str:
    shown = ", ".join(map(str, ranks[:limit]))
    return shown + (f" and {len(ranks) - limit} more" if len(ranks) > limit else "")


def _named(err: Exception, plan: SetupPlan, where: str) -> Exception:
    launch = plan.launch
    text = str(err)
    first = (text.strip().splitlines() or [type(err).__name__])[0]
    if _IN_USE.search(text):
        return ConfigError(
            name="MASTER_PORT", value=launch.master_port, expected=f"a free TCP port on {launch.master_addr}",
            fix="another job (or a stale one) holds this port: set MASTER_PORT to a free port, "
            "or kill the stale process",
        )
    if _TIMEOUT.search(text):
        return RendezvousTimeoutError(
            f"rank {launch.rank} of {launch.world_size} ({launch.launcher}) waited {plan.timeout_s:g}s at the "
            f"rendezvous {where} and not every rank arrived ({first}). "
            "Check that all ranks were launched, that they agree on MASTER_ADDR/MASTER_PORT and can reach "
            f"{where}; raise EZPZ_TIMEOUT if ranks start slowly"
        )
    if _LOST.search(text) or type(err).__name__ == "DistNetworkError":
        return RendezvousError(
            f"rank {launch.rank} of {launch.world_size} ({launch.launcher}) lost the rendezvous store at {where} "
            f"mid-rendezvous ({first}): rank 0 (or whatever listened there) went away. Check rank 0's output "
            "for its own error"
        )
    return err
