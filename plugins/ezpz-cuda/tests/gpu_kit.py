"""What the ``gpu`` suite (``pytest -m gpu``, ``bash scripts/gpu-check.sh``) checks, and the pure parts of its judging.

``GPU_CHECKS`` names every check that ran live on the NVIDIA H200 (2026-11-27,
docs/hardware-validation.md) and the test in ``test_gpu.py`` that repeats it;
``test_gpu_suite.py`` (no GPU needed) checks that ``pytest -m gpu`` collects
each of them. The report hooks in ``conftest.py`` print one line per check and
write the JSON report.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

#: check -> the test in test_gpu.py that performs it (one line of the report each).
GPU_CHECKS: dict[str, str] = {
    "setup": "test_gpu_setup_chooses_this_gpu",
    "doctor": "test_gpu_doctor_names_this_gpu",
    "main job": "test_gpu_main_job_runs",
    "bf16 training step with rt.step()": "test_gpu_low_precision_training_step_with_rt_step",
    "autocast engaged": "test_gpu_autocast_really_engaged",
    "tf32": "test_gpu_tf32_flag_follows_the_policy",
    "nccl group of one": "test_gpu_nccl_process_group_of_one",
    "memory stats": "test_gpu_memory_stats",
    "nvml agrees with torch": "test_gpu_nvml_probe_agrees_with_torch",
    "nvtx range in the profiler": "test_gpu_nvtx_range_shows_in_the_torch_profiler",
    "profiler trace: CUDA kernels and our range": "test_gpu_profiler_trace_holds_cuda_kernels_and_our_range",
    "device timer": "test_gpu_device_timer_times_on_the_device",
    "inductor against eager": "test_gpu_inductor_matches_eager",
    "checkpoint round trip": "test_gpu_checkpoint_round_trip",
    "live conformance kit": "test_gpu_live_conformance_kit",
    "DDP world of one under torchrun": "test_gpu_ddp_world_of_one_under_torchrun",
    "two ranks on one GPU refused": "test_gpu_two_ranks_on_one_gpu_are_refused",
    "DeepSpeed ZeRO-2": "test_gpu_deepspeed_zero2",
    "CUDA-style trainer against its port": "test_gpu_cuda_style_trainer_matches_its_port",
    "CUDA-compat mode redirects nothing on CUDA": "test_gpu_cuda_compat_mode_redirects_nothing",
}

#: NVTX's ``nvtxRangePushA`` returns the new range's 0-based depth, or ``NVTX_NO_PUSH_POP_TRACKING`` (-2) when no
#: tool (Nsight Systems, ...) is attached to record it (nvToolsExt.h, NVTX v3: "#define NVTX_NO_PUSH_POP_TRACKING
#: ((int)-2)"); other negative values are errors ("If an error occurs a negative value is returned").
NVTX_NO_PUSH_POP_TRACKING = -2

#: Launcher and override variables a check's own process must not inherit (it decides from this machine alone).
LAUNCH_VARS = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK", "PALS_RANKID", "SLURM_JOB_ID",
    "SLURM_STEP_NUM_TASKS", "EZPZ_DEVICE", "TORCH_DEVICE", "EZPZ_BACKEND", "TORCH_BACKEND", "EZPZ_PRECISION",
)


def nvtx_push_result(depth: object) -> tuple[bool, str]:
    """Whether ``range_push``'s answer is a success, and what it means.

    A depth (>= 0) or NVTX's "no tool attached" (-2) is fine: without Nsight the
    range still reaches the torch profiler through ``record_function``. ``None``
    means the marker API returned nothing (a build without NVTX). Any other
    negative value is NVTX reporting an error.
    """
    if depth is None:
        return True, "range_push returned None: no NVTX depth to report"
    if isinstance(depth, bool) or not isinstance(depth, int):
        return False, f"range_push returned {depth!r} ({type(depth).__name__}), expected an int depth"
    if depth >= 0:
        return True, f"NVTX range at depth {depth} (a tool is recording it)"
    if depth == NVTX_NO_PUSH_POP_TRACKING:
        return True, ("NVTX returned -2 (NVTX_NO_PUSH_POP_TRACKING): no NVTX tool such as Nsight Systems is "
                      "attached; not a failure, the torch profiler still records the range")
    return False, f"NVTX range_push failed with {depth} (negative values other than -2 are errors)"


def no_device_reason() -> str | None:
    """Why the gpu checks cannot run here (no CUDA device), or None when they can. Imports torch."""
    import torch

    if torch.cuda.is_available():
        return None
    built = torch.version.cuda
    return (f"no CUDA device: torch.cuda.is_available() is False (torch {torch.__version__}, "
            + (f"built for CUDA {built})" if built else "a build without CUDA)"))


def check_env(**extra: str) -> dict[str, str]:
    """This process's environment without launcher or override variables, plus ``extra``: for a check's subprocess."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env.update(extra)
    return env


def last_loss(text: str, prefix: str = "iter ") -> float:
    """The loss on the last ``iter N: loss X`` line of a trainer's output."""
    found = [line for line in text.splitlines() if line.startswith(prefix) and ": loss " in line]
    if not found:
        raise AssertionError(f"no '{prefix}N: loss X' line in the output:\n{text[-2000:]}")
    return float(found[-1].split(": loss ")[1].split(",")[0])


def report_line(check: str, outcome: str, detail: str) -> str:
    """One line of the gpu report: ``CHECK <name>: PASS|FAIL|SKIP <detail>``."""
    return f"CHECK {check}: {outcome.upper()} {detail}".rstrip()


def python() -> str:
    """The interpreter that runs the checks' subprocesses (the one running pytest)."""
    return sys.executable


def checks_by_test() -> Mapping[str, str]:
    """test name -> check name."""
    return {test: check for check, test in GPU_CHECKS.items()}
