"""Device discovery from recorded facts: which xpu index, which physical card/tile, priority, rejections."""

from __future__ import annotations

import pytest
from xpu_testlib import plan, torchrun_env
from ezpz.errors import ConfigError, UnavailableError
from xpu_recorded import (
    ARC_A770,
    AURORA_COMPOSITE,
    AURORA_FLAT,
    MAX1550_TILE,
    MTL_IGPU,
    TORCH_2_4_XPU,
    TORCH_2_8_XPU,
    TORCH_2_13_CPU,
    TORCH_2_13_XPU,
    XPU_BUILDS,
)

from ezpz_xpu import policy


def _rejection(explanation, device_type="xpu"):  # type: ignore[no-untyped-def]
    device = next(d for d in explanation.decisions if d.topic == "device")
    return next(a.reason for a in device.alternatives if a.name == device_type and a.plugin == "xpu")


@pytest.mark.parametrize("build", XPU_BUILDS, ids=lambda b: b.version)
def test_recorded_max1550_flat_each_tile_is_a_device(intel, build) -> None:
    intel(AURORA_FLAT)
    the_plan, _ = plan(build, torchrun_env(rank=5, world=12))
    dev = the_plan.device
    assert dev.torch_device == "xpu:5"
    assert dev.candidate.vendor == "intel" and dev.candidate.plugin == "xpu"
    assert dev.candidate.count == 12 and dev.candidate.priority == policy.DISCRETE_PRIORITY
    assert dev.candidate.physical_ids == tuple(f"{c}.{t}" for c in range(6) for t in range(2))
    assert dev.candidate.physical_ids[5] == "2.1"  # card 2, tile 1
    assert "physical device 2.1 via ZE_AFFINITY_MASK" in dev.reason
    assert "each of a card's 2 tiles is its own device" in dev.candidate.reason
    assert "COMPOSITE makes each card one device" in dev.candidate.reason
    assert dev.candidate.details["hierarchy"] == "FLAT (unset: driver default)"


def test_recorded_max1550_composite_each_card_is_a_device(intel) -> None:
    intel(AURORA_COMPOSITE)
    the_plan, _ = plan(TORCH_2_13_XPU, torchrun_env(rank=3, world=6, ZE_FLAT_DEVICE_HIERARCHY="COMPOSITE"))
    cand = the_plan.device.candidate
    assert the_plan.device.torch_device == "xpu:3"
    assert cand.count == 6 and cand.physical_ids == ("0", "1", "2", "3", "4", "5")
    assert "COMPOSITE: each card (all 2 tiles) is one device" in cand.reason
    assert cand.total_memory[0] == 2 * 65520 * 2**20


def test_recorded_composite_under_pals_takes_the_local_rank_from_pals_not_a_tile_count(intel) -> None:
    """The original ezpz's #187 (v0.21.11): under COMPOSITE, `mpiexec -n 24 -ppn 6` rank 23 computed
    23 % NGPU_PER_HOST(12) = 11 ("device index out of range [0, 6)"): it did not read PALS_LOCAL_RANKID. ezpz's
    PALS detector reads it, and the device count is the driver's (6 cards), not a FLAT-mode constant."""
    intel(AURORA_COMPOSITE)
    pals = {"PALS_APID": "9d2f6c1e-4b7a-4c55-8f0e-1a2b3c4d5e6f", "PALS_RANKID": "23", "PALS_LOCAL_RANKID": "5",
            "PALS_NODEID": "3", "PMI_RANK": "23", "PMI_SIZE": "24", "PMI_LOCAL_RANK": "5", "PMI_LOCAL_SIZE": "6",
            "MASTER_ADDR": "x4102c5s0b0n0", "NGPU_PER_HOST": "12", "ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"}
    the_plan, _ = plan(TORCH_2_13_XPU, pals)
    assert the_plan.launch.launcher == "pals" and the_plan.launch.local_rank == 5
    assert the_plan.launch.sources["local_rank"] == "PALS_LOCAL_RANKID"
    assert the_plan.device.torch_device == "xpu:5" and the_plan.device.candidate.count == 6


def test_recorded_max1550_flat_affinity_mask_selects_tiles(intel) -> None:
    intel(AURORA_FLAT[:2])  # the driver shows 2 devices under the mask
    env = torchrun_env(rank=1, world=2, ZE_AFFINITY_MASK="4,5")
    the_plan, _ = plan(TORCH_2_13_XPU, env)
    assert the_plan.device.torch_device == "xpu:1"
    assert the_plan.device.candidate.physical_ids == ("2.0", "2.1")
    assert "physical device 2.1" in the_plan.device.reason


def test_recorded_max1550_composite_tile_mask_is_one_card_or_one_tile(intel) -> None:
    intel(AURORA_COMPOSITE[:1])
    both, _ = plan(TORCH_2_13_XPU, torchrun_env(ZE_FLAT_DEVICE_HIERARCHY="COMPOSITE", ZE_AFFINITY_MASK="0.0,0.1"))
    assert both.device.candidate.physical_ids == ("0",)
    one, _ = plan(TORCH_2_13_XPU, torchrun_env(ZE_FLAT_DEVICE_HIERARCHY="COMPOSITE", ZE_AFFINITY_MASK="1.1"))
    assert one.device.candidate.physical_ids == ("1.1",)
    intel(AURORA_COMPOSITE[:2])
    two, _ = plan(TORCH_2_13_XPU, torchrun_env(ZE_FLAT_DEVICE_HIERARCHY="COMPOSITE", ZE_AFFINITY_MASK="3.0,1.1"))
    assert two.device.candidate.physical_ids == ("1.1", "3.0")  # driver order, not mask order


def test_recorded_max1550_flat_more_local_ranks_than_tiles_says_so(intel) -> None:
    intel(AURORA_FLAT[:2])
    env = torchrun_env(rank=2, world=4, ZE_AFFINITY_MASK="0,1")
    with pytest.raises(UnavailableError) as err:
        plan(TORCH_2_13_XPU, env)
    text = str(err.value)
    assert "2 xpu device(s) visible (after ZE_AFFINITY_MASK)" in text
    assert "4 local rank(s)" in text and "via ZE_AFFINITY_MASK" in text


def test_recorded_mask_that_cannot_explain_the_count_drops_physical_ids(intel) -> None:
    intel(AURORA_FLAT[:3])
    the_plan, _ = plan(TORCH_2_13_XPU, torchrun_env(ZE_AFFINITY_MASK="0,1"))
    cand = the_plan.device.candidate
    assert cand.physical_ids == ()
    assert "names 2 device(s) but torch sees 3" in cand.details["physical_id_mapping"]


def test_recorded_arc_a770_is_discrete_single_device(intel) -> None:
    intel([ARC_A770])
    the_plan, _ = plan(TORCH_2_8_XPU)
    cand = the_plan.device.candidate
    assert the_plan.device.torch_device == "xpu:0"
    assert cand.priority == policy.DISCRETE_PRIORITY and cand.physical_ids == ("0",)
    assert cand.arch == "Xe-HPG (Alchemist)"
    assert "Xe-HPG (Alchemist) is a discrete GPU" in cand.reason


def test_recorded_mtl_igpu_is_integrated_with_lower_priority(intel) -> None:
    intel([MTL_IGPU])
    the_plan, explanation = plan(TORCH_2_8_XPU)
    cand = the_plan.device.candidate
    assert the_plan.device.torch_device == "xpu:0"  # still beats the CPU
    assert cand.priority == policy.INTEGRATED_PRIORITY < policy.DISCRETE_PRIORITY
    assert "integrated" in cand.reason and "EZPZ_DEVICE=xpu picks it anyway" in cand.reason
    assert "not cpu" in str(explanation)


def test_recorded_igpu_beside_dgpu_is_flagged_with_a_mask_hint(intel) -> None:
    intel([MTL_IGPU, ARC_A770])  # torch < 2.13 lists every Level Zero GPU, the iGPU first on many laptops
    the_plan, _ = plan(TORCH_2_8_XPU)
    cand = the_plan.device.candidate
    assert cand.priority == policy.DISCRETE_PRIORITY
    assert "integrated GPU at index [0]" in cand.reason and "ZE_AFFINITY_MASK=1" in cand.reason


def test_recorded_zero_devices_under_affinity_mask_is_rejected(intel) -> None:
    intel([])
    the_plan, explanation = plan(TORCH_2_13_XPU, torchrun_env(ZE_AFFINITY_MASK="7"))
    assert the_plan.device.torch_device == "cpu"
    assert _rejection(explanation).startswith("intel: 0 devices visible under ZE_AFFINITY_MASK='7'")


def test_recorded_zero_devices_without_mask_names_the_driver(intel) -> None:
    intel([])
    _, explanation = plan(TORCH_2_13_XPU)
    assert "0 devices visible to torch 2.13.0+xpu" in _rejection(explanation)
    assert "Level Zero" in _rejection(explanation)


def test_recorded_cpu_build_rejects_xpu_without_probing(intel, monkeypatch) -> None:
    intel([MAX1550_TILE])
    from ezpz_xpu import probe

    def boom() -> int:
        raise AssertionError("probe must not run on a build without XPU")

    monkeypatch.setattr(probe, "device_count", boom)
    _, explanation = plan(TORCH_2_13_CPU)
    assert "torch built without XPU (build.xpu_built is False" in _rejection(explanation)


def test_recorded_broken_driver_is_a_rejection_not_a_crash(intel, monkeypatch) -> None:
    intel([MAX1550_TILE])
    from ezpz_xpu import probe

    def broken() -> int:
        raise RuntimeError("level_zero backend failed with error: 2147483646 (UR_RESULT_ERROR_UNKNOWN)")

    monkeypatch.setattr(probe, "device_count", broken)
    the_plan, explanation = plan(TORCH_2_13_XPU)
    assert the_plan.device.torch_device == "cpu"
    assert "probing torch.xpu failed: RuntimeError: level_zero backend failed" in _rejection(explanation)


def test_recorded_bad_hierarchy_value_is_the_users_error(intel) -> None:
    intel(AURORA_FLAT)
    with pytest.raises(ConfigError, match="ZE_FLAT_DEVICE_HIERARCHY='TILES'"):
        plan(TORCH_2_13_XPU, torchrun_env(ZE_FLAT_DEVICE_HIERARCHY="TILES"))


def test_recorded_bad_affinity_mask_is_the_users_error(intel) -> None:
    intel(AURORA_FLAT[:1])
    with pytest.raises(ConfigError, match="ZE_AFFINITY_MASK='gpu0'"):
        plan(TORCH_2_13_XPU, torchrun_env(ZE_AFFINITY_MASK="gpu0"))


def test_recorded_ezpz_device_xpu_index_override(intel) -> None:
    intel(AURORA_FLAT)
    the_plan, _ = plan(TORCH_2_4_XPU, torchrun_env(EZPZ_DEVICE="xpu:11"))
    assert the_plan.device.torch_device == "xpu:11"
    assert the_plan.device.candidate.physical_ids[11] == "5.1"
    assert "requested by EZPZ_DEVICE=xpu:11" in the_plan.device.reason
