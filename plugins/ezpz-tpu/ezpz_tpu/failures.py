"""torch_xla and PJRT failure texts, with where each comes from. Pure data; the plugin hook hands it to the core."""

from __future__ import annotations

__all__ = ["SIGNATURES"]

#: (pattern, kind, reason, blames_host, source)
SIGNATURES = (
    (r"RESOURCE_EXHAUSTED: .*(HBM|memory)|Ran out of memory in memory space hbm", "oom",
     "XLA could not allocate TPU memory (HBM): the model, batch or compiled graph does not fit", False,
     "XLA/PJRT status RESOURCE_EXHAUSTED (openxla/xla: xla/pjrt, tsl/platform/status); Cloud TPU troubleshooting, "
     "https://cloud.google.com/tpu/docs/troubleshooting/trouble-tf"),
    (r"LLVM compilation error: Cannot allocate memory", "oom",
     "XLA's compiler ran out of host memory compiling one graph: a lazy graph nothing cut grew over many steps "
     "(no torch_xla.sync() per step), and torch.save compiles it again for every tensor it moves; keep ezpz's "
     "optimizer step hook on (EZPZ_STEP_HOOK unset) or call rt.step() every step, and save with rt.save()", False,
     "XLA's CPU compiler (LLVM) out of memory; seen at the first torch.save of a loop with no step boundary "
     "(ezpz issue 33)"),
    (r"TPU initialization failed|Failed to get TPU metadata|Unable to initialize backend 'tpu'", "lost_peer",
     "the TPU runtime did not come up on this host (libtpu held by another process, or a broken chip): "
     "a retry should avoid the host", True,
     "libtpu/PJRT TPU client start-up (torch_xla/_internal/tpu.py; Cloud TPU troubleshooting)"),
    (r"The TPU is already in use by (process|pid)|TPU is already in use", "lost_peer",
     "another process on this host holds the TPU chips (a stale job): free them or avoid the host", True,
     "libtpu: chips are opened exclusively per host (Cloud TPU troubleshooting)"),
    (r"DEADLINE_EXCEEDED", "timeout",
     "an XLA/PJRT operation (often a collective or the distributed runtime's barrier) ran past its deadline: "
     "a peer did not arrive", False,
     "XLA/PJRT status DEADLINE_EXCEEDED (tsl/platform/status; torch_xla distributed runtime client)"),
    (r"UNAVAILABLE: .*(connect|Socket closed|failed to connect)", "lost_peer",
     "the XLA distributed runtime lost a peer (its coordinator or another worker went away)", False,
     "gRPC status UNAVAILABLE from XLA's distributed runtime service (xla/pjrt/distributed)"),
)
