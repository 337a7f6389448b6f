"""ezpz.plugin_kit: the public helpers every device plugin uses (ownership, backend options, visible devices,
logging, DeepSpeed's accelerator)."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ezpz.plugin_kit as kit
from ezpz.decisions import BackendOption, LifecycleAction
from ezpz.facts import DeviceCandidate, TorchBuild
from ezpz.plugin_kit import VisibleList, parse_visible_devices

# -- facts_if_ours ------------------------------------------------------------------------------------


class _Mine:
    pass


def _device(facts: object) -> DeviceCandidate:
    return DeviceCandidate(device_type="x", vendor="v", count=1, reason="test device", facts=facts)


def test_facts_if_ours_by_class_and_by_path() -> None:
    mine, theirs = _device(_Mine()), _device(object())
    assert kit.facts_if_ours(mine, _Mine) is mine.facts
    assert kit.facts_if_ours(theirs, _Mine) is None
    assert kit.facts_if_ours(mine, f"{__name__}:_Mine") is mine.facts
    assert kit.facts_if_ours(theirs, f"{__name__}:_Mine") is None


def test_facts_if_ours_never_imports_the_record_module_to_ask() -> None:
    code = ("import sys; from ezpz.plugin_kit import facts_if_ours; "
            "print(facts_if_ours(object(), 'ezpz_kit_never_loaded.facts:Facts'), "
            "'ezpz_kit_never_loaded.facts' in sys.modules, 'attrs' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    # None, nothing imported to ask, and importing the kit itself loads no attrs records
    assert out.stdout.split() == ["None", "False", "False"]


@pytest.mark.parametrize("record", ["no_colon.module", ":Cls", "mod:", f"{__name__}:not_a_class"])
def test_facts_if_ours_rejects_a_malformed_record(record: str) -> None:
    with pytest.raises(ValueError, match="facts_if_ours"):
        kit.facts_if_ours(_device(_Mine()), record)


# -- backend options ----------------------------------------------------------------------------------

BUILD = TorchBuild(version="2.8.0", distributed_backends=("gloo", "nccl"))


def test_vendor_then_gloo_keeps_the_vendor_order_and_falls_back_to_gloo() -> None:
    nccl = kit.backend_in_build(BUILD, "nccl", reason="vendor collectives", missing="no nccl")
    other = BackendOption(name="other", available=False, reason="not installed")
    options = kit.vendor_then_gloo(BUILD, (nccl, other), gloo_reason="host-staged fallback")
    assert [(o.name, o.available, o.reason) for o in options] == [
        ("nccl", True, "vendor collectives"), ("other", False, "not installed"), ("gloo", True, "host-staged fallback")]


def test_backend_missing_from_the_build_says_so() -> None:
    build = TorchBuild(version="2.8.0", distributed_backends=("nccl",))
    options = kit.vendor_then_gloo(build, kit.backend_in_build(build, "xccl", reason="r", missing="no xccl here"),
                                   gloo_reason="fallback")
    assert [(o.available, o.reason) for o in options] == [(False, "no xccl here"),
                                                           (False, "torch 2.8.0 was built without gloo")]


def test_no_torch_distributed_makes_every_option_unavailable() -> None:
    build = TorchBuild(version="2.8.0", distributed=False, distributed_backends=("gloo",))
    vendor = BackendOption(name="hccl", available=True, reason="SDK present")
    options = kit.vendor_then_gloo(build, vendor, gloo_reason="fallback")
    assert [o.name for o in options] == ["hccl", "gloo"]
    assert all(not o.available and "without torch.distributed" in o.reason for o in options)


# -- with_ds_accelerator ------------------------------------------------------------------------------


def test_with_ds_accelerator_adds_to_an_action_or_makes_one() -> None:
    made = kit.with_ds_accelerator(None, "hpu", "HPU")
    assert made.env_defaults == {"DS_ACCELERATOR": "hpu"} and "HPU accelerator" in made.reason
    kept = kit.with_ds_accelerator(LifecycleAction(reason="did X", env_defaults={"A": "1"}), "xpu", "XPU")
    assert kept.env_defaults == {"A": "1", "DS_ACCELERATOR": "xpu"} and kept.reason.startswith("did X; ")
    from ezpz.runtime.deepspeed import with_ds_accelerator

    assert with_ds_accelerator is kit.with_ds_accelerator  # the old path still works


# -- get_logger ---------------------------------------------------------------------------------------


def test_get_logger_events_go_to_the_named_stdlib_logger_and_obey_the_rank_filter(caplog) -> None:
    from ezpz.primitives import logger as _log

    log = kit.get_logger("ezpz_kit_test")
    with caplog.at_level(logging.DEBUG, logger="ezpz_kit_test"):
        try:
            _log.set_rank(1, all_ranks=False)
            log.info("quiet_on_rank_1")
            log.warning("loud_everywhere", why="warnings pass")
        finally:
            _log.set_rank(None, all_ranks=False)
    assert [r.getMessage() for r in caplog.records] == ["loud_everywhere why='warnings pass' rank=1"]


# -- visible devices ----------------------------------------------------------------------------------

_ALPHABET = "0123456789,-+ GPUMIabcdef"


def test_unset_means_every_device() -> None:
    v = parse_visible_devices(None)
    assert v == VisibleList(raw=None) and not v.restricted and not v.none


@pytest.mark.parametrize(("raw", "mixed", "entries", "stop"), [
    ("", False, (), "entry '' is not an index"),
    ("-1", False, (), "entry '-1' is not an index"),
    ("2, 0", False, (2, 0), ""),
    ("1gpu2,2ampere", False, (1, 2), ""),
    ("0,x,1", False, (0,), "entry 'x' is not an index"),
    ("1,1", False, (), "entry '1' is repeated, which hides every device"),
    ("GPU-a,MIG-b", False, ("GPU-a",), "entry 'MIG-b' is not a GPU-<uuid> like the first entry"),
    ("0,GPU-a", False, (0,), "entry 'GPU-a' is not an index like the first entry"),
    ("0,GPU-a", True, (0, "GPU-a"), ""),
    ("GPU-a,2,GPU-a", True, (), "entry 'GPU-a' is repeated"),
])
def test_examples(raw: str, mixed: bool, entries: tuple, stop: str) -> None:
    v = parse_visible_devices(raw, mixed=mixed)
    assert v.entries == entries and v.stop.startswith(stop) and bool(v.stop) == bool(stop)
    assert v.restricted and v.none is (not entries)


@settings(max_examples=300, deadline=None)
@given(raw=st.text(alphabet=_ALPHABET, max_size=24), mixed=st.booleans())
def test_entries_are_distinct_valid_and_read_back_the_same(raw: str, mixed: bool) -> None:
    v = parse_visible_devices(raw, mixed=mixed)
    assert v.restricted and len(set(v.entries)) == len(v.entries)
    assert all((isinstance(e, int) and e >= 0) or (isinstance(e, str) and e.startswith(("GPU-", "MIG-")))
               for e in v.entries)
    assert len(v.entries) <= raw.count(",") + 1
    # Stopping early is always explained; the entries, written back, parse to themselves.
    assert bool(v.stop) or len(v.entries) == raw.count(",") + 1
    again = parse_visible_devices(",".join(map(str, v.entries)), mixed=mixed)
    if v.entries:
        assert again.entries == v.entries and not again.stop


@settings(max_examples=300, deadline=None)
@given(raw=st.text(alphabet="0123456789,-+ x", max_size=24))
def test_ordinal_lists_read_the_same_mixed_or_not(raw: str) -> None:
    assert parse_visible_devices(raw).entries == parse_visible_devices(raw, mixed=True).entries


@settings(max_examples=300, deadline=None)
@given(raw=st.text(alphabet=_ALPHABET, max_size=24))
def test_same_answers_as_torch_cuda(raw: str) -> None:
    import torch.cuda

    parse = getattr(torch.cuda, "_parse_visible_devices", None)
    if parse is None:
        pytest.skip("this torch has no torch.cuda._parse_visible_devices to compare with")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDA_VISIBLE_DEVICES", raw)
        try:
            expected = parse()
        except ValueError:  # torch's strtoul crashes on a lone sign ("+"): nothing to compare
            return
    assert list(parse_visible_devices(raw).entries) == list(expected)


def test_every_public_name_resolves() -> None:
    assert all(getattr(kit, name) is not None for name in kit.__all__)
    assert set(kit.__all__) <= set(dir(kit))
    with pytest.raises(AttributeError):
        kit.not_in_the_kit  # noqa: B018
