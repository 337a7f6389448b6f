"""ezpz.testing's conformance kit run against this plugin, with recorded devices as well as this machine's."""

from __future__ import annotations

import pytest

import cuda_recorded as rec
from ezpz_cuda.facts import CudaFacts
from ezpz_cuda.policy import cuda_candidate

testing = pytest.importorskip("ezpz.testing", reason="ezpz.testing (the conformance kit) is not in this ezpz")


def _candidate(gpu, count, build):
    facts = CudaFacts(build=build, gpus=rec.node(gpu, count), physical_ids=[str(i) for i in range(count)],
                      arch_list=rec.ARCH[build.version])
    return cuda_candidate(facts)


def test_conformant_on_this_machine():
    """The installed torch and environment (here a CPU build: the plugin must reject cleanly)."""
    report = testing.assert_conformant("cuda")
    assert report["imports without vendor SDKs"].passed


@pytest.mark.parametrize("build", rec.CUDA_BUILDS, ids=lambda b: b.version)
def test_recorded_devices_conformant(build):
    candidates = [_candidate(rec.H100_SXM5_80GB, 8, build), _candidate(rec.T4, 1, build)]
    if build.at_least(2, 4) and not build.at_least(2, 11):
        candidates.append(_candidate(rec.V100_SXM2_32GB, 8, build))
    report = testing.assert_conformant("cuda", build=build, environ={}, candidates=candidates,
                                       isolated_import=False)
    names = report.names()
    assert "ezpz_amp_policy(cuda, bf16)" in names and "ezpz_select_backend(cuda, 2 ranks)" in names


def test_recorded_rocm_build_conformant():
    testing.assert_conformant("cuda", build=rec.TORCH_2_6_ROCM62, environ={}, isolated_import=False)
