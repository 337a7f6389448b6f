"""Recorded TPU VM environments, one per generation, with where each value comes from.

A Cloud TPU VM's environment names its slice: ``TPU_ACCELERATOR_TYPE``
(``v4-8``...), ``TPU_WORKER_ID`` (this host's index in a multi-host slice)
and ``TPU_WORKER_HOSTNAMES`` (every host of the slice, comma-separated).
torch_xla reads exactly these (torch_xla/_internal/tpu.py, torch-xla 2.9.0:
``xenv.TPU_ACCELERATOR_TYPE``, ``xenv.TPU_WORKER_ID``,
``xenv.TPU_WORKER_HOSTNAMES``) before falling back to the metadata server.
The chips per host, HBM per chip and what the number in the accelerator
type counts are from each generation's Google Cloud TPU page
(:data:`ezpz_tpu.facts.GENERATIONS`).
"""

from __future__ import annotations

SOURCES = {
    "variables": "torch_xla/_internal/tpu.py (torch-xla 2.9.0): TPU_ACCELERATOR_TYPE, TPU_WORKER_ID, "
                 "TPU_WORKER_HOSTNAMES, TPU_PROCESS_BOUNDS, TPU_CHIPS_PER_PROCESS_BOUNDS, TPU_VISIBLE_CHIPS",
    "v4": "https://cloud.google.com/tpu/docs/v4 (v4-8: 8 TensorCores = 4 chips, one host; 2 TensorCores/chip, "
          "32 GiB HBM per chip)",
    "v5e": "https://cloud.google.com/tpu/docs/v5e (accelerator type counts chips; VMs of 1, 4 or 8 chips; "
           "16 GB HBM per chip; 4x4 = 16 chips on 2 hosts)",
    "v5p": "https://cloud.google.com/tpu/docs/v5p (v5p-8: 8 TensorCores = 4 chips; 95 GB HBM per chip)",
    "v6e": "https://cloud.google.com/tpu/docs/v6e (accelerator type counts chips; Chips per host 8; multi-host "
           "slices use ct6e-standard-4t VMs of 4 chips; 32 GB HBM per chip)",
}

#: name -> (environment of one TPU VM worker, what the plugin must report)
TPU_VMS = {
    "v4-8": ({"TPU_ACCELERATOR_TYPE": "v4-8", "TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "t1v-n-0-w-0"},
             {"generation": "v4", "slice_chips": 4, "count": 4, "hbm_gb": 32}),
    "v4-32 worker 3": ({"TPU_ACCELERATOR_TYPE": "v4-32", "TPU_WORKER_ID": "3",
                        "TPU_WORKER_HOSTNAMES": "w-0,w-1,w-2,w-3"},
                       {"generation": "v4", "slice_chips": 16, "count": 4, "hbm_gb": 32}),
    "v5litepod-8": ({"TPU_ACCELERATOR_TYPE": "v5litepod-8", "TPU_WORKER_ID": "0"},
                    {"generation": "v5e", "slice_chips": 8, "count": 8, "hbm_gb": 16}),
    "v5litepod-16 worker 1": ({"TPU_ACCELERATOR_TYPE": "v5litepod-16", "TPU_WORKER_ID": "1",
                               "TPU_WORKER_HOSTNAMES": "w-0,w-1,w-2,w-3"},
                              {"generation": "v5e", "slice_chips": 16, "count": 4, "hbm_gb": 16}),
    "v5p-8": ({"TPU_ACCELERATOR_TYPE": "v5p-8", "TPU_WORKER_ID": "0"},
              {"generation": "v5p", "slice_chips": 4, "count": 4, "hbm_gb": 95}),
    "v6e-8": ({"TPU_ACCELERATOR_TYPE": "v6e-8", "TPU_WORKER_ID": "0"},
              {"generation": "v6e", "slice_chips": 8, "count": 8, "hbm_gb": 32}),
    "v6e-4": ({"TPU_ACCELERATOR_TYPE": "v6e-4", "TPU_WORKER_ID": "0"},
              {"generation": "v6e", "slice_chips": 4, "count": 4, "hbm_gb": 32}),
}
