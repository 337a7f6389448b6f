"""Visible-devices masks on recorded machines: ROCR_VISIBLE_DEVICES, then HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocm_recorded import BUILDS, NODES, torchrun_env

import ezpz
from ezpz.decisions import SetupPlan
from ezpz.errors import UnavailableError
from ezpz_rocm.policy import resolve_visible

BUILD = BUILDS["2.8.0+rocm6.4"]


def plan(environ: dict[str, str]) -> SetupPlan:
    return ezpz.hooks.plan(environ=environ, build=BUILD)[0]


def rejection(p: SetupPlan) -> str:
    return next(a.reason for a in p.device.alternatives if a.plugin == "rocm")


def test_recorded_mi300x_hip_visible_devices_maps_torch_index_to_physical(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    p = plan(torchrun_env(local_rank=1, local_world_size=4, HIP_VISIBLE_DEVICES="4,5,6,7"))
    cand = p.device.candidate
    assert cand.count == 4 and cand.physical_ids == ("4", "5", "6", "7")
    assert cand.visible_devices_var == "HIP_VISIBLE_DEVICES"
    assert p.device.torch_device == "cuda:1"
    assert "physical device 5 via HIP_VISIBLE_DEVICES" in p.device.reason


def test_recorded_mi300x_rocr_then_hip_compose(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    p = plan({"ROCR_VISIBLE_DEVICES": "1,2,3", "HIP_VISIBLE_DEVICES": "2"})
    cand = p.device.candidate
    assert cand.physical_ids == ("3",) and cand.visible_devices_var == "ROCR_VISIBLE_DEVICES then HIP_VISIBLE_DEVICES"
    assert "indexes the ROCr-visible devices" in cand.details["visible_devices"]


def test_recorded_mi250x_cuda_visible_devices_is_honoured_when_hip_is_unset(use_amdsmi) -> None:
    use_amdsmi("mi250x")
    p = plan({"CUDA_VISIBLE_DEVICES": "6,7"})
    assert p.device.candidate.physical_ids == ("6", "7")
    assert p.device.candidate.visible_devices_var == "CUDA_VISIBLE_DEVICES"


def test_recorded_mi250x_hip_visible_devices_wins_over_cuda(use_amdsmi) -> None:
    use_amdsmi("mi250x")
    p = plan({"CUDA_VISIBLE_DEVICES": "6,7", "HIP_VISIBLE_DEVICES": "0"})
    cand = p.device.candidate
    assert cand.physical_ids == ("0",) and cand.visible_devices_var == "HIP_VISIBLE_DEVICES"
    assert "CUDA_VISIBLE_DEVICES='6,7'" in cand.details["visible_devices_ignored"]


def test_recorded_mi300x_uuid_entries_resolve(use_amdsmi) -> None:
    node = use_amdsmi("mi300x")
    p = plan({"ROCR_VISIBLE_DEVICES": f"{node.gpus[6].uuid},{node.gpus[2].uuid}"})
    assert p.device.candidate.physical_ids == ("6", "2")


def test_recorded_mi300x_invalid_entry_ends_the_list(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    p = plan({"HIP_VISIBLE_DEVICES": "3,x,5"})
    assert p.device.candidate.physical_ids == ("3",)
    assert "not an index" in p.device.candidate.details["visible_devices"]


@pytest.mark.parametrize("mask", ["", "2,2", "-1", "9"])
def test_recorded_mi300x_mask_hiding_everything_is_a_rejection(use_amdsmi, mask: str) -> None:
    use_amdsmi("mi300x")
    p = plan({"HIP_VISIBLE_DEVICES": mask})
    assert p.device.candidate.plugin != "rocm"
    assert "no AMD GPU is visible after HIP_VISIBLE_DEVICES" in rejection(p)


def test_recorded_mi300x_requesting_cuda_when_masked_out_says_why(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    with pytest.raises(UnavailableError) as info:
        plan({"HIP_VISIBLE_DEVICES": "", "EZPZ_DEVICE": "cuda"})
    assert info.value.name == "EZPZ_DEVICE" and "no AMD GPU is visible" in str(info.value)


def test_recorded_torch_fallback_says_the_runtime_was_initialised(use_torch) -> None:
    """Without amdsmi, torch.cuda answers with the masks already applied; physical ids come from the mask."""
    mi300x = NODES["mi300x"].gpus
    use_torch([attrs.evolve(g, index=i) for i, g in enumerate(mi300x[:2])])
    p = plan(torchrun_env(local_rank=1, local_world_size=2, HIP_VISIBLE_DEVICES="6,7"))
    cand = p.device.candidate
    assert cand.facts.source == "torch.cuda" and cand.facts.runtime_initialised
    assert "initialised the HIP runtime" in cand.reason
    assert cand.physical_ids == ("6", "7") and p.device.torch_device == "cuda:1"
    assert "amdsmi not importable" in cand.details["note"]


def test_recorded_probe_failure_is_a_rejection_not_a_crash(monkeypatch) -> None:
    import ezpz_rocm.probe

    def broken() -> list:
        raise RuntimeError("HIP error: no ROCm-capable device is detected")

    monkeypatch.setattr(ezpz_rocm.probe, "amdsmi_gpus", lambda: None)
    monkeypatch.setattr(ezpz_rocm.probe, "torch_gpus", broken)
    p = plan({})
    assert p.device.candidate.plugin != "rocm"
    assert "probing the GPUs failed: RuntimeError: HIP error" in rejection(p)
    assert ezpz.hooks.get_plugin_host().records["rocm"].status == "loaded"  # not quarantined


def test_no_mask_and_unknown_count_is_identity() -> None:
    v = resolve_visible({})
    assert v.physical_ids is None and v.var is None


@given(
    count=st.integers(min_value=0, max_value=16),
    rocr=st.one_of(st.none(), st.lists(st.integers(-1, 20), max_size=6)),
    hip=st.one_of(st.none(), st.lists(st.integers(-1, 20), max_size=6)),
    cuda=st.one_of(st.none(), st.lists(st.integers(-1, 20), max_size=6)),
)
def test_resolve_visible_only_ever_names_real_distinct_devices(count, rocr, hip, cuda) -> None:
    env = {}
    for var, value in (("ROCR_VISIBLE_DEVICES", rocr), ("HIP_VISIBLE_DEVICES", hip), ("CUDA_VISIBLE_DEVICES", cuda)):
        if value is not None:
            env[var] = ",".join(map(str, value))
    v = resolve_visible(env, count)
    ids = v.physical_ids
    assert ids is not None
    assert len(set(ids)) == len(ids) <= count
    assert all(i.isdigit() and int(i) < count for i in ids)
    if rocr is None and hip is None and cuda is None:
        assert ids == tuple(str(i) for i in range(count)) and v.var is None
    else:
        assert v.var and v.reason
