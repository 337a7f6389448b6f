"""Fixtures for the ezpz-cuda suite: recorded facts in place of the probes, torchrun-style environments.

Only the three probe functions in :mod:`ezpz_cuda.probe` are replaced; the
plugin is reached through its real entry point, via ``ezpz.hooks.plan``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

import ezpz
from ezpz.facts import TorchBuild
from ezpz_cuda import probe
from ezpz_cuda.facts import GpuFacts

import cuda_recorded as rec
from cuda_testlib import torchrun


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a real NVIDIA GPU (skipped unless torch.cuda.is_available())")


# -- the gpu report: one line per check of gpu_kit.GPU_CHECKS, and a JSON file (bash scripts/gpu-check.sh) -------

_GPU_RESULTS: dict[str, dict[str, Any]] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--gpu-report", default=None, metavar="PATH",
                     help="write the gpu checks' results (gpu_kit.GPU_CHECKS) as JSON to PATH")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    from gpu_kit import checks_by_test

    check = checks_by_test().get(report.nodeid.split("::")[-1])
    if check is None or (report.when != "call" and report.passed):
        return
    if report.skipped and isinstance(report.longrepr, tuple):
        detail = str(report.longrepr[2]).removeprefix("Skipped: ")
    elif report.failed:
        detail = str(report.longrepr).strip().splitlines()[-1][:300] if report.longrepr else "failed"
    else:
        detail = f"{report.duration:.1f}s"
    _GPU_RESULTS.setdefault(check, {"outcome": report.outcome, "detail": detail, "test": report.nodeid})


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    from gpu_kit import GPU_CHECKS, report_line

    path = config.getoption("--gpu-report")
    if not _GPU_RESULTS or not (path or "gpu" in (config.getoption("markexpr") or "")):
        return  # only under -m gpu or --gpu-report: the plain suite's summary stays as pytest prints it
    rows = {check: _GPU_RESULTS.get(check, {"outcome": "not run", "detail": "not selected", "test": test})
            for check, test in GPU_CHECKS.items()}
    terminalreporter.section("gpu checks")
    for check, row in rows.items():
        terminalreporter.write_line(report_line(check, {"passed": "pass", "failed": "fail",
                                                        "skipped": "skip"}.get(row["outcome"], row["outcome"]),
                                                row["detail"]))
    if path:
        import json
        import platform

        import torch

        doc = {"torch": torch.__version__, "cuda": torch.version.cuda, "host": platform.node(),
               "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
               "checks": rows}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
        terminalreporter.write_line(f"gpu report written to {path}")


class ProbeLog:
    """What the (replaced) probes were asked, so tests can say which ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []


@pytest.fixture(autouse=True)
def cuda_plugin_loaded() -> Iterator[None]:
    """The plugin must be a real, loaded entry point, before and after every test (no quarantine)."""
    host = ezpz.hooks.get_plugin_host()
    record = host.records.get("cuda")
    if record is None or record.status != "loaded":
        pytest.fail(f"ezpz-cuda is not loaded as the 'cuda' entry point ({record}); "
                    "run: pip install -e plugins/ezpz-cuda --no-build-isolation")
    yield
    after = host.records.get("cuda")
    assert after is not None and after.status == "loaded", f"the cuda plugin was quarantined: {after}"


@pytest.fixture(autouse=True)
def unrecorded_probes(monkeypatch: pytest.MonkeyPatch) -> ProbeLog:
    """By default every probe reports 'not recorded', so no test reads this machine by accident."""
    log = ProbeLog()

    def missing(name: str) -> Callable[[], Any]:
        def probe_fn() -> Any:
            log.calls.append(name)
            raise probe.ProbeUnavailable(f"{name} not recorded in this test")

        return probe_fn

    def no_arch() -> tuple[str, ...]:
        log.calls.append("torch_arch_list")
        return ()

    monkeypatch.setattr(probe, "nvml_gpus", missing("nvml_gpus"))
    monkeypatch.setattr(probe, "torch_gpus", missing("torch_gpus"))
    monkeypatch.setattr(probe, "torch_arch_list", no_arch)
    return log


@pytest.fixture
def record(monkeypatch: pytest.MonkeyPatch, unrecorded_probes: ProbeLog) -> Callable[..., None]:
    """Install recorded facts in place of the probes.

    ``record(gpus, build)`` answers NVML with ``gpus`` (all physical GPUs, NVML
    order) and the arch list with the build's recorded one; ``via="torch"``
    makes NVML unavailable and answers the CUDA-runtime probe instead (GPUs as
    torch sees them, after ``CUDA_VISIBLE_DEVICES``).
    """

    def install(gpus: Sequence[GpuFacts], build: TorchBuild, *, via: str = "nvml",
                arch: Sequence[str] | None = None) -> None:
        log = unrecorded_probes
        arch_list = tuple(rec.ARCH.get(build.version, ()) if arch is None else arch)

        def answer(name: str, value: tuple[Any, ...]) -> Callable[[], tuple[Any, ...]]:
            def probe_fn() -> tuple[Any, ...]:
                log.calls.append(name)
                return value

            return probe_fn

        if via == "nvml":
            monkeypatch.setattr(probe, "nvml_gpus", answer("nvml_gpus", tuple(gpus)))
        else:
            monkeypatch.setattr(probe, "torch_gpus", answer("torch_gpus", tuple(gpus)))
        monkeypatch.setattr(probe, "torch_arch_list", answer("torch_arch_list", arch_list))

    return install


@pytest.fixture(scope="session")
def torchrun_supported() -> None:
    """Skip tests that need the core to read torchrun's variables while its launch detection is a placeholder."""
    env = torchrun(rank=5, world_size=8, local_rank=1, local_world_size=4)
    plan, _ = ezpz.hooks.plan(environ=env, build=rec.TORCH_2_13_CPU)
    if (plan.launch.local_rank, plan.launch.world_size) != (1, 8):
        pytest.skip(f"ezpz's launch detection ignores torchrun variables here (launcher {plan.launch.launcher!r}, "
                    f"reason {plan.launch.reason!r}): core launch module not landed yet")
