"""Pure policy functions on their own: mask parsing, tile mapping, families, version tables (property tests)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from ezpz.errors import ConfigError
from hypothesis import given
from hypothesis import strategies as st
from xpu_recorded import ARC_A770, MAX1550_TILE, MTL_IGPU, TORCH_2_4_XPU, TORCH_2_13_CPU

from ezpz_xpu import policy
from ezpz_xpu.facts import XpuDeviceProps, XpuFacts


@pytest.mark.parametrize(("raw", "parsed"), [
    (None, None), ("", None), (" ", None),
    ("0", ((0, None),)), ("0,1", ((0, None), (1, None))), ("0.0,0.1", ((0, 0), (0, 1))), (" 3 , 2.1 ", ((3, None), (2, 1))),
])
def test_parse_affinity_mask(raw, parsed) -> None:
    assert policy.parse_affinity_mask(raw) == parsed


@pytest.mark.parametrize("raw", ["a", "0,,1", "-1", "0.1.2", "0.x"])
def test_parse_affinity_mask_rejects_garbage(raw) -> None:
    with pytest.raises(ConfigError, match="ZE_AFFINITY_MASK"):
        policy.parse_affinity_mask(raw)


@pytest.mark.parametrize(("raw", "mode"), [(None, "FLAT"), ("", "FLAT"), ("flat", "FLAT"), ("COMPOSITE", "COMPOSITE"),
                                           ("combined", "COMBINED")])
def test_hierarchy_mode(raw, mode) -> None:
    assert policy.hierarchy_mode(raw) == mode


@pytest.mark.parametrize(("device", "integrated", "arch"), [
    (MAX1550_TILE, False, "Xe-HPC (Ponte Vecchio)"),
    (ARC_A770, False, "Xe-HPG (Alchemist)"),
    (MTL_IGPU, True, "Xe-LPG (Meteor/Arrow/Panther Lake iGPU)"),
    (XpuDeviceProps(name="Intel(R) Iris(R) Xe Graphics"), True, "Xe-LP/Gen9-11 iGPU"),
    (XpuDeviceProps(name="Intel(R) Arc(TM) 140V GPU (16GB)"), True, "Xe2-LPG (Lunar Lake)"),
    (XpuDeviceProps(name="Intel(R) Arc(TM) B580 Graphics"), False, "Xe2-HPG (Battlemage)"),
])
def test_family_and_integration(device, integrated, arch) -> None:
    fam = policy.family(device.name)
    assert fam is not None and fam.arch == arch
    assert policy.is_integrated(device)[0] is integrated


def test_torch_flag_for_integration_wins_over_the_name() -> None:
    odd = XpuDeviceProps(name="Intel(R) Arc(TM) Graphics", is_integrated_gpu=False)
    assert policy.is_integrated(odd) == (False, "torch reports is_integrated_gpu=0")


def test_unknown_name_is_assumed_discrete_and_bf16() -> None:
    dev = XpuDeviceProps(name="Intel(R) Graphics [0xe20b]")
    assert policy.is_integrated(dev)[0] is False
    ok, why = policy.bf16_support(dev)
    assert ok and "assumed" in why


def test_iris_xe_has_no_bf16() -> None:
    ok, why = policy.bf16_support(XpuDeviceProps(name="Intel(R) Iris(R) Xe Graphics"))
    assert not ok and "no XMX" in why


def test_build_rejections() -> None:
    assert "build.xpu_built is False" in policy.build_rejection(TORCH_2_13_CPU)
    from ezpz.facts import TorchBuild

    old = TorchBuild(version="2.3.1+cxx11.abi", xpu_built=True)
    assert "predates native XPU" in policy.build_rejection(old) and "March 2026" in policy.build_rejection(old)
    assert policy.build_rejection(TORCH_2_4_XPU) is None


def _facts(count: int, mask: str | None, devices: tuple[XpuDeviceProps, ...] | None = None) -> XpuFacts:
    return XpuFacts(torch_version="2.13.0+xpu", device_count=count, devices=devices or (MAX1550_TILE,) * count,
                    affinity_mask=mask)


@given(st.sets(st.integers(min_value=0, max_value=23), min_size=1, max_size=12))
def test_flat_mask_maps_every_selected_tile_in_driver_order(tiles) -> None:
    mask = ",".join(str(t) for t in sorted(tiles, reverse=True))  # mask order must not matter
    ids, how = policy.physical_ids(_facts(len(tiles), mask), "FLAT")
    assert ids == tuple(f"{t // 2}.{t % 2}" for t in sorted(tiles))
    assert "card.tile" in how


@given(st.dictionaries(st.integers(min_value=0, max_value=7), st.sets(st.integers(0, 1), min_size=1), min_size=1))
def test_composite_mask_gives_one_device_per_card(cards) -> None:
    mask = ",".join(f"{c}.{t}" for c, ts in cards.items() for t in sorted(ts))
    ids, _ = policy.physical_ids(_facts(len(cards), mask), "COMPOSITE")
    assert len(ids) == len(cards)
    for card, phys in zip(sorted(cards), ids):
        assert phys == (str(card) if len(cards[card]) == 2 else f"{card}.{next(iter(cards[card]))}")


@given(st.integers(min_value=1, max_value=16), st.sampled_from(["FLAT", "COMPOSITE", "COMBINED"]))
def test_unmasked_ids_are_unique_and_match_the_count(count, mode) -> None:
    ids, _ = policy.physical_ids(_facts(count, None), mode)
    assert len(ids) == count == len(set(ids))


def test_single_tile_devices_use_plain_indices() -> None:
    ids, _ = policy.physical_ids(_facts(2, "1,3", (ARC_A770, ARC_A770)), "FLAT")
    assert ids == ("1", "3")


def test_importing_the_plugin_imports_no_torch_and_no_vendor_sdk() -> None:
    code = ("import sys, ezpz_xpu.plugin, ezpz_xpu.policy, ezpz_xpu.probe; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'intel_extension_for_pytorch', 'oneccl_bindings_for_pytorch')); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"EZPZ_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
