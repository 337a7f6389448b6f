"""Variables a launcher exports to every worker on its own: values that are the launcher's default, not the user's.

``setup()`` never overrides a variable the user set (:mod:`ezpz.startup.environ`).
A launcher that fills in a variable for its workers when it is unset makes
its default look like the user's choice; the values below are recognised as
the launcher's, so a plugin's default replaces them and the trace says who
set what.

torchrun: ``LocalElasticAgent._start_workers`` builds each worker's
environment with ``"TORCH_NCCL_ASYNC_ERROR_HANDLING": os.getenv(
"TORCH_NCCL_ASYNC_ERROR_HANDLING", str(1))`` next to ``TORCHELASTIC_RUN_ID``
(torch 2.13.0, torch/distributed/elastic/agent/server/local_elastic_agent.py,
line 430; the same in torch 2.4 to 2.13). A worker therefore sees ``1`` both
when nobody set the variable and when the user exported ``1`` before
torchrun: the two cannot be told apart from inside the worker, and ``1`` is
taken as torchrun's. Seen on an NVIDIA H200 (2026-11-27): the trace said
``TORCH_NCCL_ASYNC_ERROR_HANDLING=1 set by the user was kept`` where the
user had set nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["LAUNCHER_EXPORTS", "launcher_default"]

#: (marker variable, launcher, variable, the value it exports when unset, where that is written).
LAUNCHER_EXPORTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("TORCHELASTIC_RUN_ID", "torchrun", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1",
     "torchrun's elastic agent exports TORCH_NCCL_ASYNC_ERROR_HANDLING=1 to every worker when it is unset "
     "(torch/distributed/elastic/agent/server/local_elastic_agent.py, LocalElasticAgent._start_workers)"),
)


def launcher_default(name: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """``(launcher, why)`` when ``environ[name]`` holds the value a launcher exports on its own, else None."""
    value = environ.get(name)
    if value is None:
        return None
    for marker, launcher, var, default, why in LAUNCHER_EXPORTS:
        if var == name and value.strip() == default and environ.get(marker):
            return launcher, why
    return None
