"""A well-behaved test plugin: offers a low-priority device and a lifecycle note."""
from ezpz import hookimpl
from ezpz.decisions import LifecycleAction
from ezpz.facts import DeviceCandidate, ProbeReport


@hookimpl
def ezpz_probe_devices(build, environ):
    return ProbeReport.found(DeviceCandidate(device_type="privateuseone", vendor="testvendor", priority=-10,
                                             reason="test plugin device, below cpu on purpose"))


@hookimpl
def ezpz_before_init(plan):
    return LifecycleAction(reason=f"test-good saw device {plan.device.torch_device}")
