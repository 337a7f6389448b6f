"""The core's plugin conformance kit (``ezpz.testing``) run against ezpz-rocm."""

from __future__ import annotations

import importlib.util

import pytest
from rocm_recorded import BUILDS, NODES, torchrun_env

from ezpz_rocm.facts import RocmFacts
from ezpz_rocm.policy import resolve_visible, rocm_candidate, rocm_notes

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ezpz.testing") is None,
                                reason="ezpz.testing (the conformance kit) is not in this ezpz")


def _candidate(key: str, build_key: str, tunableop: bool = False):
    gpus = NODES[key].gpus
    facts = RocmFacts(hip=BUILDS[build_key].hip or "", gpus=gpus, source="amdsmi", runtime_initialised=False,
                      visible=resolve_visible({}, len(gpus)), tunableop=tunableop, notes=rocm_notes(gpus))
    return rocm_candidate(facts)


def test_conformant_on_this_machine() -> None:
    """This CPU build: the probe rejects without touching amdsmi or torch.cuda."""
    from ezpz.testing import assert_conformant

    report = assert_conformant("rocm", environ={})
    assert "rejects cuda: torch is not a ROCm build" in report["ezpz_probe_devices(inputs)"].detail


@pytest.mark.parametrize(("key", "build_key"), [("mi300x", "2.13.0+rocm7.2"), ("mi250x", "2.6.0+rocm6.2.4"),
                                                ("mi100", "2.4.0+rocm6.1"), ("rx6900xt", "2.8.0+rocm6.4")])
def test_recorded_conformant_on_recorded_rocm_machines(use_amdsmi, key: str, build_key: str) -> None:
    from ezpz.testing import assert_conformant

    use_amdsmi(key)
    report = assert_conformant(
        "rocm", build=BUILDS[build_key], environ=torchrun_env(local_rank=0, local_world_size=1),
        candidates=[_candidate(key, build_key, tunableop=True)], isolated_import=key == "mi300x",
    )
    assert report["ezpz_probe_devices(inputs)"].detail.startswith("offers cuda (priority 100)")
