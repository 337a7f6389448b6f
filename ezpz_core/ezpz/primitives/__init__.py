"""The ground floor: small primitives every layer may use; they import nothing of ezpz above them.

Records (:mod:`~ezpz.primitives.frozen_records`, :mod:`~ezpz.primitives.converters`),
pluggy markers, files (:mod:`~ezpz.primitives.atomic_file`, :mod:`~ezpz.primitives.user_cache`),
logging and redaction (:mod:`~ezpz.primitives.logger`, :mod:`~ezpz.primitives.redact`),
threads ezpz gave up on (:mod:`~ezpz.primitives.abandoned_threads`), and the seams into
torch's internals (:mod:`~ezpz.primitives.torch_private`, :mod:`~ezpz.primitives.device_module`,
:mod:`~ezpz.primitives.gloo_quiesce`), and what names a CUDA device (:mod:`~ezpz.primitives.cuda_device`).
"""
