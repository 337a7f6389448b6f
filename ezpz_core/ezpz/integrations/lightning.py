"""Lightning Fabric from ezpz's decisions: every launcher ezpz knows, every device its plugins pick.

Install with ``pip install 'ezpz[lightning]'``. Everything here reads a
:class:`~ezpz.runtime.Runtime` (after ``ezpz.hooks.setup()``) or a
:class:`~ezpz.decisions.SetupPlan` (from ``ezpz.hooks.plan()``); nothing is
detected again and no plugin is called. Lightning is imported inside the
functions, so ``import ezpz`` never needs it::

    rt = ezpz.hooks.setup()
    fabric = Fabric(**fabric_arguments(rt))

- :func:`cluster_environment`: Fabric's ``ClusterEnvironment`` answered from
  ezpz's :class:`~ezpz.facts.LaunchEnv` (PALS, Hydra without mpi4py, Open MPI,
  Slurm, torchrun, or whatever plugin detected the launch).
- :func:`accelerator`: a Fabric ``Accelerator`` on the device ezpz chose
  (XPU through ezpz-xpu included), so Fabric never guesses it.
- :func:`precision`: Fabric's precision from ezpz's AMP policy, with the
  autocast device type Fabric would otherwise get wrong off CUDA.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

from ezpz.errors import ConfigError

if TYPE_CHECKING:
    from ezpz.decisions import AmpPolicy, SetupPlan
    from ezpz.facts import LaunchEnv
    from ezpz.runtime import Runtime

    Source = Union[Runtime, SetupPlan]

__all__ = ["accelerator", "cluster_environment", "fabric_arguments", "fabric_precision", "precision"]

#: ezpz precision (autocast on) -> Fabric precision flag.
FABRIC_PRECISION = {"bf16": "bf16-mixed", "fp16": "16-mixed"}


def _plan(source: Source) -> SetupPlan:
    return source.plan if hasattr(source, "explanation") else source  # type: ignore[union-attr]


def _device(source: Source) -> Any:
    import torch

    return source.device if hasattr(source, "explanation") else torch.device(_plan(source).device.torch_device)


def _lightning() -> Any:
    try:
        from lightning import fabric
    except ImportError as err:
        raise ConfigError(
            name="lightning", value=None, expected="Lightning Fabric 2.x installed",
            fix="pip install 'ezpz[lightning]' (or pip install lightning)",
        ) from err
    return fabric


def cluster_environment(source: Source) -> Any:
    """A Fabric ``ClusterEnvironment`` whose ranks and rendezvous are ezpz's launch decision."""
    _lightning()
    from lightning.fabric.plugins.environments import ClusterEnvironment

    launch: LaunchEnv = _plan(source).launch

    class EzpzEnvironment(ClusterEnvironment):
        """Ranks from ezpz's launch detection; the launcher made the processes, so Fabric spawns none."""

        @property
        def creates_processes_externally(self) -> bool:
            return True

        @property
        def main_address(self) -> str:
            if launch.master_addr is None:
                return "127.0.0.1" if not launch.distributed else _no_rendezvous(launch, "MASTER_ADDR")
            return launch.master_addr

        @property
        def main_port(self) -> int:
            if launch.master_port is None:
                return 0 if not launch.distributed else _no_rendezvous(launch, "MASTER_PORT")
            return launch.master_port

        @staticmethod
        def detect() -> bool:
            return False  # never chosen automatically: built from a runtime or plan and passed in

        def world_size(self) -> int:
            return launch.world_size

        def set_world_size(self, size: int) -> None:
            pass  # the launcher decided; Fabric's node_rank * devices arithmetic would be wrong for odd layouts

        def global_rank(self) -> int:
            return launch.rank

        def set_global_rank(self, rank: int) -> None:
            pass  # as above: rank = node * devices + local does not hold for round-robin MPI placement

        def local_rank(self) -> int:
            return launch.local_rank

        def node_rank(self) -> int:
            return launch.node_rank

        def validate_settings(self, num_devices: int, num_nodes: int) -> None:
            if num_devices != launch.local_world_size or num_nodes != launch.num_nodes:
                raise ConfigError(
                    name="Fabric(devices=..., num_nodes=...)", value=(num_devices, num_nodes),
                    expected=f"devices={launch.local_world_size}, num_nodes={launch.num_nodes} "
                             f"(what {launch.launcher} started)",
                    fix="pass fabric_arguments(rt) to Fabric, or devices=rt.local_world_size, num_nodes=rt.num_nodes",
                )

        def teardown(self) -> None:
            pass

        def __repr__(self) -> str:
            return f"EzpzEnvironment({launch.launcher}: rank {launch.rank} of {launch.world_size})"

    return EzpzEnvironment()


def _no_rendezvous(launch: LaunchEnv, name: str) -> Any:
    raise ConfigError(
        name=name, value=None, expected=f"the rendezvous of this {launch.launcher} job",
        fix=("this launcher publishes rank 0's address at setup (PMI), so the plan does not hold it: call "
             "ezpz.hooks.setup() before Fabric (Fabric then uses ezpz's process group), or set MASTER_ADDR and "
             "MASTER_PORT yourself"),
    )


def accelerator(source: Source) -> Any:
    """A Fabric ``Accelerator`` for the device ezpz chose; ``devices`` means processes on this node."""
    _lightning()
    import torch
    from lightning.fabric.accelerators import Accelerator

    device = _device(source)

    class EzpzAccelerator(Accelerator):
        """This rank's device as ezpz's plugins decided (``cpu``, ``cuda:1``, ``xpu:0`` ...)."""

        def setup_device(self, device: torch.device) -> None:
            module = torch.get_device_module(device.type) if device.type != "cpu" else None
            if device.index is not None and module is not None and hasattr(module, "set_device"):
                module.set_device(device)

        def teardown(self) -> None:
            pass

        @staticmethod
        def parse_devices(devices: Any) -> int:
            return 1 if devices in ("auto", None) else int(devices)

        @staticmethod
        def get_parallel_devices(devices: Any) -> list[torch.device]:
            # Fabric takes entry local_rank as this process's device; each process only ever uses its own.
            return [device] * EzpzAccelerator.parse_devices(devices)

        @staticmethod
        def auto_device_count() -> int:
            return 1

        @staticmethod
        def is_available() -> bool:
            return True

        @staticmethod
        def name() -> str:
            return "ezpz"

        def __repr__(self) -> str:
            return f"EzpzAccelerator({device})"

    return EzpzAccelerator()


def fabric_precision(amp: AmpPolicy) -> str:
    """ezpz's AMP policy as Fabric's precision flag: ``bf16-mixed``, ``16-mixed`` or ``32-true``. Pure."""
    return FABRIC_PRECISION[amp.dtype] if amp.autocast else "32-true"


def precision(source: Source) -> Any:
    """Fabric's precision plugin for ezpz's AMP policy, autocasting on the chosen device type."""
    _lightning()
    from lightning.fabric.plugins.precision import MixedPrecision, Precision

    plan = _plan(source)
    flag = fabric_precision(plan.amp)
    if flag == "32-true":
        return Precision()
    device_type = plan.device.candidate.device_type
    scaler = None
    if plan.amp.grad_scaler:
        import torch

        scaler = torch.amp.GradScaler(device_type)
    return MixedPrecision(precision=flag, device=device_type, scaler=scaler)  # type: ignore[arg-type]


def fabric_arguments(source: Source, **overrides: Any) -> dict[str, Any]:
    """Keyword arguments for ``lightning.Fabric``: accelerator, strategy, devices, nodes, environment, precision.

    Several ranks get DDP over ezpz's backend (Fabric would pick gloo for
    anything but CUDA). ``overrides`` win (``strategy="fsdp"`` ...).
    """
    _lightning()
    from lightning.fabric.strategies import DDPStrategy

    plan = _plan(source)
    launch = plan.launch
    strategy: Any = DDPStrategy(process_group_backend=plan.backend.name) if launch.distributed else "auto"
    args = {"accelerator": accelerator(source), "strategy": strategy, "devices": launch.local_world_size,
            "num_nodes": launch.num_nodes, "plugins": [cluster_environment(source), precision(source)]}
    args.update(overrides)
    return args
