"""The original ezpz's names that this package does not include, and the error that says so.

ezpz here is a portability layer (devices, ranks, launch, process groups,
device meshes, model wrapping, timing and memory metrics). The original's
training utilities (metric history, FLOP counting, experiment trackers,
plots, model zoo, data loaders, job bookkeeping) are not part of it:
asking for one raises an ``AttributeError`` that names the feature, says it
is not included, suggests what to use, and points at the migration page.
"""

from __future__ import annotations

__all__ = ["MIGRATION_PAGE", "NOT_INCLUDED", "missing_attribute"]

MIGRATION_PAGE = "docs/migrating.md ('Migrating from the original ezpz')"

_TRACKING = "log metrics with your tracker directly (wandb.init()/wandb.log(), mlflow.start_run()) on rank 0"
_UTILS = "the standard library or your own helper"

#: name -> (the original feature, what to use instead). Keys are looked up on ``ezpz`` and ``ezpz.distributed``.
NOT_INCLUDED: dict[str, tuple[str, str]] = {
    # training utilities: metrics, FLOPs, trackers, plots
    "History": ("the metric history (ezpz.history.History)", _TRACKING),
    "history": ("the metric-history module", _TRACKING),
    "flops": ("FLOP and MFU estimation (ezpz.flops)", "torch.utils.flop_counter.FlopCounterMode"),
    "compute_mfu": ("MFU estimation (ezpz.flops.compute_mfu)", "torch.utils.flop_counter.FlopCounterMode"),
    "try_estimate": ("FLOP estimation (ezpz.flops.try_estimate)", "torch.utils.flop_counter.FlopCounterMode"),
    "tracker": ("the experiment-tracker backends (ezpz.tracker)", _TRACKING),
    "setup_wandb": ("Weights & Biases setup (setup_wandb)", "wandb.init(...) on rank 0 (ezpz.get_rank() == 0)"),
    "verify_wandb": ("the Weights & Biases check (verify_wandb)", "wandb.login() / WANDB_MODE"),
    "setup_mlflow": ("MLflow setup (setup_mlflow)", "mlflow.start_run() on rank 0"),
    "try_import_wandb": ("the optional wandb import (try_import_wandb)", "import wandb inside a try block"),
    "tplot": ("terminal plots (ezpz.tplot)", "plotext or matplotlib directly"),
    # models, data, configs, examples' helpers
    "models": ("the model zoo (ezpz.models: llama, vit, ...)", "your own model or a library such as transformers"),
    "data": ("the dataset helpers (ezpz.data)", "torch.utils.data with DistributedSampler"),
    "configs": ("the config and scheduler helpers (ezpz.configs)",
                "ezpz.hooks.plan() for the launch layout; dataclasses or hydra for configs"),
    "jobs": ("the job bookkeeping module (ezpz.jobs)", "your scheduler's own tools"),
    "profile": ("the profiler wrappers (ezpz.profile)",
                "ezpz.hooks.setup().profiler() and .range(name) (vendor markers included)"),
    "doctor": ("the doctor module (ezpz.doctor)", "the `ezpz doctor` command, or ezpz.hooks.plan() in Python"),
    "tp": ("the tensor/pipeline/context-parallel group module (ezpz.tp)",
           "ezpz.setup_torch(tensor_parallel_size=..., ...) then ezpz.distributed.get_device_mesh()['tp'].get_group()"),
    "use_torchcomms": ("torchcomms support (use_torchcomms)", "torch.distributed through ezpz.setup_torch()"),
    # grab-bag utilities
    "Color": ("terminal colours (ezpz.utils.Color)", "rich or plain ANSI codes"),
    "NoColor": ("terminal colours (ezpz.utils.NoColor)", "rich or plain ANSI codes"),
    "DistributedPdb": ("the per-rank debugger (DistributedPdb)", "pdb with `if ezpz.get_rank() == 0`"),
    "ForkedPdb": ("the forked-process debugger (ForkedPdb)", "pdb with sys.stdin reopened"),
    "check_for_tarball": ("the environment tarball helper (check_for_tarball)", _UTILS),
    "make_tarfile": ("the environment tarball helper (make_tarfile)", "tarfile"),
    "format_compact_summary": ("metric summary formatting (format_compact_summary)", _UTILS),
    "format_memory_summary": ("memory summary formatting (format_memory_summary)",
                              "ezpz.get_memory_metrics() and your own format string"),
    "format_pair": ("metric formatting (format_pair)", _UTILS),
    "summarize_dict": ("metric summary formatting (summarize_dict)", _UTILS),
    "get_timestamp": ("timestamp strings (get_timestamp)", "datetime.now().strftime(...)"),
    "grab_tensor": ("tensor-to-numpy conversion (grab_tensor)", "tensor.detach().cpu().numpy()"),
    "model_summary": ("model summaries (model_summary)", "torchinfo.summary(model)"),
    "utils": ("the utility grab-bag (ezpz.utils)",
              "the memory helpers are at top level (ezpz.get_memory_metrics, ...); see the page for the rest"),
    "tinker": ("the LoRA/Tinker helpers (ezpz.tinker)", "peft"),
}


def missing_attribute(module: str, name: str) -> AttributeError:
    """The AttributeError for ``module.name``: not included (with what to use), or simply absent."""
    entry = NOT_INCLUDED.get(name)
    if entry is None:
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    feature, instead = entry
    return AttributeError(
        f"{module}.{name}: {feature} from the original ezpz is not included in this package, which covers "
        f"portability only (devices, ranks, launch, process groups, model wrapping). Instead: {instead}. "
        f"See {MIGRATION_PAGE}"
    )
