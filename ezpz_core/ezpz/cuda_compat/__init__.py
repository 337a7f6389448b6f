"""Run a script written for CUDA, unchanged, on the device ezpz chose: ``python -m ezpz.cuda_compat SCRIPT``.

A front above the runtime, like :mod:`ezpz.original`: the core never imports it. ``setup()`` runs first;
then the script's CUDA requests (device strings, ``torch.cuda.*``, CUDA autocast and loss scaling,
``init_process_group('nccl')``, NVTX ranges, ``torch.load`` of CUDA-tagged checkpoints) are answered by the
chosen device, its backend and its precision policy. Only calls from the script's own project are redirected
(:mod:`.scope`); every redirected call site is written to a report (:mod:`.report`). What the device says comes
from its plugin (``ezpz_cuda_answers``, :mod:`.answers`). Where CUDA itself is chosen nothing is redirected.
Importing this package does no work.
"""

from __future__ import annotations

__all__ = ["run_script"]


def run_script(script: str, argv: list[str], *, project_root: str | None = None) -> object:
    """Run ``script`` as ``__main__`` with ``sys.argv = [script, *argv]`` under the mode; see :mod:`.session`."""
    from ezpz.cuda_compat.session import run_script as run

    return run(script, argv, project_root=project_root)
