"""A third-party plugin for a new accelerator, written from docs/hooks.md (issue 28).

Device type ``nimbus``, found through its vendor's visible-devices variable ``NIMBUS_VISIBLE_DEVICES``; backend
``nimbusccl``; bf16. Its torch extension (which would register ``nimbus`` with torch) is not installed, the
ordinary state before ``import torch_nimbus``: torch does not know the device type or the backend.
"""

from ezpz import hookimpl


class NimbusFacts:
    """The probe's facts: how many devices the variable lists."""

    def __init__(self, count: int) -> None:
        self.count = count


@hookimpl
def ezpz_probe_devices(build, environ):
    from ezpz.facts import DeviceCandidate, ProbeReport

    visible = [d for d in environ.get("NIMBUS_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not visible:
        return ProbeReport.rejected("nimbus", "nimbus", "NIMBUS_VISIBLE_DEVICES not set")
    return ProbeReport.found(DeviceCandidate(
        device_type="nimbus", vendor="nimbus", count=len(visible), priority=120,
        reason=f"{len(visible)} nimbus device(s) in NIMBUS_VISIBLE_DEVICES", facts=NimbusFacts(len(visible)),
    ))


@hookimpl
def ezpz_select_backend(device, build, launch, requested):
    if not isinstance(device.facts, NimbusFacts):
        return None
    from ezpz.decisions import BackendOption
    from ezpz.policies import choose_backend

    options = [BackendOption(name="nimbusccl", available=True, reason="nimbus's collective library")]
    return choose_backend(options, requested=requested, device="nimbus")


@hookimpl
def ezpz_amp_policy(device, build, requested):
    if not isinstance(device.facts, NimbusFacts):
        return None
    from ezpz.decisions import PrecisionOption
    from ezpz.policies import choose_precision

    options = [PrecisionOption(dtype="bf16", supported=True, reason="nimbus computes in bf16")]
    return choose_precision(options, requested=requested, device="nimbus", tf32=False, tf32_reason="not a CUDA device")
