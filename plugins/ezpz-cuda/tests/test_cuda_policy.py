"""The pure policies on their own, some checked against torch's own implementation of the same rule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuda_recorded as rec
from ezpz.policies import choose_precision
from ezpz_cuda import policy
from ezpz_cuda.facts import CudaFacts, GpuFacts

# -- CUDA_VISIBLE_DEVICES: same answers as torch.cuda's own parser ---------------------------------

_VISIBLE_ALPHABET = "0123456789,-+ GPUMIabcdef"


def _torch_parse(monkeypatch: pytest.MonkeyPatch, value: str) -> list[int] | list[str] | None:
    import torch.cuda

    parse = getattr(torch.cuda, "_parse_visible_devices", None)
    if parse is None:
        pytest.skip("this torch has no _parse_visible_devices to compare with")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    try:
        return parse()
    except ValueError:  # torch's strtoul crashes on a lone sign ("+"): nothing to compare
        return None


@settings(max_examples=400, deadline=None)
@given(value=st.text(alphabet=_VISIBLE_ALPHABET, max_size=24))
def test_visible_devices_parse_like_torch(value: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        expected = _torch_parse(mp, value)
    if expected is None:
        return
    parsed = policy.parse_visible_devices(value)
    assert parsed.restricted
    assert list(parsed.entries) == list(expected)


@pytest.mark.parametrize(("value", "entries"), [
    ("", ()),
    ("-1", ()),
    ("0,1", (0, 1)),
    ("2, 0", (2, 0)),
    ("1,1", ()),  # a repeated ordinal hides everything
    ("0,x,1", (0,)),
    ("1gpu2,2ampere", (1, 2)),
    ("GPU-abc,GPU-def", ("GPU-abc", "GPU-def")),
    ("GPU-abc,3", ("GPU-abc",)),
    ("MIG-1234", ("MIG-1234",)),
])
def test_visible_devices_examples(value, entries):
    parsed = policy.parse_visible_devices(value)
    assert parsed.entries == entries
    assert parsed.none is (not entries)


def test_visible_devices_unset_means_all():
    parsed = policy.parse_visible_devices(None)
    assert not parsed.restricted and not parsed.none
    assert policy.select_visible(parsed, rec.node(rec.T4, 3)).indices == (0, 1, 2)


def test_select_visible_ambiguous_uuid_prefix_ends_the_list():
    gpus = rec.node(rec.T4, 3)  # synthetic UUIDs share the "GPU-0000000" prefix
    sel = policy.select_visible(policy.parse_visible_devices(f"{gpus[2].uuid},GPU-0000000"), gpus)
    assert sel.indices == (2,)
    assert "ambiguous (3 GPUs match)" in sel.notes[0]


def test_select_visible_same_gpu_twice_hides_all():
    gpus = rec.node(rec.T4, 2)
    sel = policy.select_visible(policy.parse_visible_devices(f"{gpus[1].uuid},{gpus[1].uuid[:12]}"), gpus)
    assert sel.indices == ()


# -- architectures: same as torch's own compatibility table for cubins -----------------------------

_KNOWN_CC = [50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 120]


@pytest.mark.parametrize("code", _KNOWN_CC)
@pytest.mark.parametrize("device", _KNOWN_CC)
def test_cubin_compatibility_matches_torch(code, device):
    import torch.cuda

    table = getattr(torch.cuda, "DEVICE_REQUIREMENT", None)
    if table is None or code not in table:
        pytest.skip("this torch has no DEVICE_REQUIREMENT table to compare with")
    expected = device in table[code]
    assert policy.arch_supports([f"sm_{code}"], divmod(device, 10)) is expected


@pytest.mark.parametrize(("arch", "cc", "ok"), [
    (rec.ARCH_CU130, (7, 0), False),
    (rec.ARCH_CU130, (7, 5), True),
    (rec.ARCH_CU130, (8, 9), True),  # sm_86 cubin runs on 8.9
    (rec.ARCH_CU130, (12, 1), True),
    (rec.ARCH_CU130, (13, 0), True),  # only through compute_120 PTX
    (rec.ARCH_CU128, (13, 0), False),  # no PTX in the cu128 list
    (rec.ARCH_CU124, (6, 1), True),
    (rec.ARCH_CU124, (10, 0), False),
    (("sm_90a",), (9, 0), True),
    (("sm_90a",), (9, 1), False),
    ((), (9, 0), None),
])
def test_arch_supports_recorded_lists(arch, cc, ok):
    assert policy.arch_supports(arch, cc) is ok


# -- precision table -------------------------------------------------------------------------------

_CC = st.tuples(st.integers(min_value=3, max_value=12), st.integers(min_value=0, max_value=9))


@given(cc=_CC, version=st.sampled_from([b.version for b in rec.CUDA_BUILDS]))
def test_auto_precision_follows_compute_capability(cc, version):
    gpu = GpuFacts(name="recorded-gpu", major=cc[0], minor=cc[1])
    build = next(b for b in rec.CUDA_BUILDS if b.version == version)
    tf32, tf32_reason = policy.tf32_decision(gpu, build, "auto")
    amp = choose_precision(policy.precision_options(gpu), requested="auto", device=gpu.label, tf32=tf32,
                           tf32_reason=tf32_reason)
    if cc >= (8, 0):
        assert (amp.dtype, amp.grad_scaler, amp.tf32) == ("bf16", False, True)
    elif cc >= (5, 3):
        assert (amp.dtype, amp.grad_scaler, amp.tf32) == ("fp16", True, False)
    else:
        assert (amp.dtype, amp.autocast, amp.tf32) == ("fp32", False, False)
    assert amp.grad_scaler == (amp.dtype == "fp16")
    fp32 = choose_precision(policy.precision_options(gpu), requested="fp32", device=gpu.label)
    assert not fp32.autocast


def test_tf32_reason_names_the_api_of_the_torch_version():
    gpu = rec.H100_SXM5_80GB
    _, old = policy.tf32_decision(gpu, rec.TORCH_2_8_CU128, "auto")
    _, new = policy.tf32_decision(gpu, rec.TORCH_2_13_CU130, "auto")
    assert "fp32_precision" not in old and "allow_tf32" in old
    assert "fp32_precision='tf32'" in new


def test_build_rejection_prefers_the_rocm_message():
    both = rec.TORCH_2_6_ROCM62
    assert policy.build_rejection(both).startswith("torch is a ROCm build")
    assert policy.build_rejection(rec.TORCH_2_13_CPU).startswith("torch built without CUDA")
    assert policy.build_rejection(rec.TORCH_2_13_CU130) is None


def test_backend_options_without_distributed():
    from attrs import evolve

    build = evolve(rec.TORCH_2_13_CU130, distributed=False)
    options = policy.backend_options(build)
    assert [o.available for o in options] == [False, False]
    assert all("without torch.distributed" in o.reason for o in options)


def test_candidate_for_mixed_node_lists_each_gpu():
    facts = CudaFacts(build=rec.TORCH_2_6_CU124, gpus=(rec.RTX_4090, rec.GTX_1080), physical_ids=("0", "1"))
    cand = policy.cuda_candidate(facts)
    assert cand.arch == "sm_61,sm_89"
    assert "NVIDIA GeForce RTX 4090 (8.9), NVIDIA GeForce GTX 1080 (6.1)" in cand.reason
    assert facts.weakest == rec.GTX_1080
